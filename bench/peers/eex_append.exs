# The BEAM's side of `cargo bench -p galleon-template --bench append`: the same reduce over
# N words ("w0 ", "w1 ", ...), `acc ++ [w]` and `acc <> w`, median of 5 runs, in milliseconds.
# Usage: elixir bench/peers/eex_append.exs
for n <- [10_000, 100_000] do
  words = for i <- 0..(n - 1), do: "w#{i} "

  median = fn f ->
    ts = for _ <- 1..5, do: elem(:timer.tc(f), 0)
    Enum.at(Enum.sort(ts), 2) / 1000
  end

  pp = median.(fn -> Enum.reduce(words, [], fn w, acc -> acc ++ [w] end) |> length() end)
  IO.puts("++  #{n} words  #{pp} ms")
  cat = median.(fn -> Enum.reduce(words, "", fn w, acc -> acc <> w end) |> byte_size() end)
  IO.puts("<>  #{n} words  #{cat} ms")
end
