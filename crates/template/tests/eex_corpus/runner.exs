# The Elixir side of galleon's EEx conformance test (`tests/eex_conformance.rs`).
#
# Usage: elixir runner.exs CASES_FILE RESULTS_FILE
#
# CASES_FILE holds the cases back to back, each as five length-prefixed fields
# (`<byte length>:<bytes>`): name, flags (space-separated, e.g. "trim"), assigns (an Elixir
# map literal, evaluated), template, partials (name and source fields back to back, which
# `render/2` renders as a Phoenix view's `render(name, assigns)` does). For each case, in order, stdout gets one result:
# `ok:<len>:<rendered bytes>` or `error:<len>:<message>`. One process renders the whole corpus:
# starting the VM costs about half a second.
#
# Rendering uses EEx with an engine that reproduces Phoenix.HTML.Engine (Phoenix.HTML 3.x),
# which Debian's elixir package does not ship: `<%= %>` output goes through `Safe.to_iodata`
# (strings HTML-escaped as `&amp; &lt; &gt; &quot; &#39;`, `{:safe, iodata}` as is, nil as
# nothing, atoms, numbers, lists of bytes/strings/safe), `@name` raises when the assign is
# missing, and `raw/1` (also `Phoenix.HTML.raw/1`) marks a value safe.

defmodule Phoenix.HTML do
  @moduledoc false
  def raw({:safe, _} = safe), do: safe
  def raw(nil), do: {:safe, ""}
  def raw(value) when is_binary(value) or is_list(value), do: {:safe, value}
end

defmodule GalleonHarness.Safe do
  @moduledoc false
  # Phoenix.HTML.Safe's implementations for the types a template outputs.
  def to_iodata({:safe, data}), do: data
  def to_iodata(nil), do: ""
  def to_iodata(bin) when is_binary(bin), do: escape(bin)
  def to_iodata(atom) when is_atom(atom), do: escape(Atom.to_string(atom))
  def to_iodata(int) when is_integer(int), do: Integer.to_string(int)
  def to_iodata(float) when is_float(float), do: Float.to_string(float)
  def to_iodata(list) when is_list(list), do: list_to_iodata(list)

  def to_iodata(other) do
    raise Protocol.UndefinedError, protocol: Phoenix.HTML.Safe, value: other
  end

  defp list_to_iodata([h | t]), do: [list_to_iodata(h) | list_to_iodata(t)]
  defp list_to_iodata([]), do: []
  defp list_to_iodata(?<), do: "&lt;"
  defp list_to_iodata(?>), do: "&gt;"
  defp list_to_iodata(?&), do: "&amp;"
  defp list_to_iodata(?"), do: "&quot;"
  defp list_to_iodata(?'), do: "&#39;"
  defp list_to_iodata(h) when is_integer(h) and h <= 255, do: h

  defp list_to_iodata(h) when is_integer(h),
    do: raise(ArgumentError, "lists in templates only support iodata: integers are bytes")

  defp list_to_iodata(h) when is_binary(h), do: escape(h)
  defp list_to_iodata({:safe, data}), do: data

  defp list_to_iodata(other),
    do: raise(ArgumentError, "invalid entry in a list output: #{inspect(other)}")

  def escape(bin) do
    for <<c <- bin>>, into: "" do
      case c do
        ?< -> "&lt;"
        ?> -> "&gt;"
        ?& -> "&amp;"
        ?" -> "&quot;"
        ?' -> "&#39;"
        c -> <<c>>
      end
    end
  end
end

defmodule GalleonHarness.Engine do
  @moduledoc false
  # Phoenix.HTML.Engine's shape: static text and dynamic parts gathered into `{:safe, iodata}`.
  @behaviour EEx.Engine

  @impl true
  def init(_opts), do: %{iodata: [], dynamic: [], vars_count: 0}

  @impl true
  def handle_begin(state), do: %{state | iodata: [], dynamic: []}

  @impl true
  def handle_end(quoted), do: handle_body(quoted)

  @impl true
  def handle_body(state) do
    %{iodata: iodata, dynamic: dynamic} = state
    safe = {:safe, Enum.reverse(iodata)}
    {:__block__, [], Enum.reverse([safe | dynamic])}
  end

  @impl true
  def handle_text(state, _meta, text) do
    %{state | iodata: [text | state.iodata]}
  end

  @impl true
  def handle_expr(state, "=", ast) do
    ast = Macro.prewalk(ast, &handle_assign/1)
    %{iodata: iodata, dynamic: dynamic, vars_count: count} = state
    var = Macro.var(:"arg#{count}", __MODULE__)
    ast = quote do: unquote(var) = GalleonHarness.Safe.to_iodata(unquote(ast))
    %{state | dynamic: [ast | dynamic], iodata: [var | iodata], vars_count: count + 1}
  end

  def handle_expr(state, "", ast) do
    ast = Macro.prewalk(ast, &handle_assign/1)
    %{state | dynamic: [ast | state.dynamic]}
  end

  defp handle_assign({:@, meta, [{name, _, atom}]}) when is_atom(name) and is_atom(atom) do
    quote line: meta[:line] || 0 do
      GalleonHarness.Engine.fetch_assign!(var!(assigns), unquote(name))
    end
  end

  defp handle_assign(arg), do: arg

  def fetch_assign!(assigns, key) do
    case Access.fetch(assigns, key) do
      {:ok, value} -> value
      :error -> raise ArgumentError, "assign @#{key} not available in template"
    end
  end
end

defmodule GalleonHarness.View do
  @moduledoc false
  # A Phoenix view's `render(template, assigns)`: the case's partial by that name (or with
  # `.eex` appended, the file Phoenix compiles for `"form.html"`), rendered with the same
  # engine and options, its assigns `Map.new(assigns)`; the result is safe iodata.
  def render(name, assigns) do
    partials = Process.get(:galleon_partials, %{})
    file = if Map.has_key?(partials, name), do: name, else: name <> ".eex"

    case Map.fetch(partials, file) do
      {:ok, source} -> GalleonHarness.eval(file, source, Map.new(assigns))
      :error -> raise ArgumentError, "could not render #{inspect(name)}: no such template"
    end
  end
end

defmodule GalleonHarness do
  @moduledoc false

  def main([path, out]) do
    results = path |> File.read!() |> run([]) |> Enum.reverse()
    File.write!(out, results)
  end

  defp run("", acc), do: acc

  defp run(bin, acc) do
    {name, bin} = field(bin)
    {flags, bin} = field(bin)
    {assigns, bin} = field(bin)
    {template, bin} = field(bin)
    {partials, bin} = field(bin)
    result = render(name, String.split(flags), assigns, template, pairs(partials, %{}))
    run(bin, [frame(result) | acc])
  end

  defp field(bin) do
    [len, rest] = :binary.split(bin, ":")
    len = String.to_integer(len)
    <<value::binary-size(len), rest::binary>> = rest
    {value, rest}
  end

  defp pairs("", acc), do: acc

  defp pairs(bin, acc) do
    {name, bin} = field(bin)
    {source, bin} = field(bin)
    pairs(bin, Map.put(acc, name, source))
  end

  defp frame({status, bytes}), do: [status, ":", Integer.to_string(byte_size(bytes)), ":", bytes]

  defp render(name, flags, assigns, template, partials) do
    try do
      {assigns, _} = Code.eval_string(assigns)
      Process.put(:galleon_partials, partials)
      Process.put(:galleon_trim, "trim" in flags)
      {:safe, iodata} = eval(name, template, assigns)
      {"ok", IO.iodata_to_binary(iodata)}
    rescue
      e -> {"error", Exception.format(:error, e, []) |> String.slice(0, 2000)}
    catch
      kind, reason -> {"error", inspect({kind, reason})}
    end
  end

  @doc false
  # Compiles and runs one template (the case's or a partial) with the case's options.
  def eval(name, template, assigns) do
    opts = [engine: GalleonHarness.Engine, file: name, trim: Process.get(:galleon_trim, false)]
    quoted = EEx.compile_string(template, opts)

    quoted =
      quote do
        import Phoenix.HTML, warn: false
        import GalleonHarness.View, warn: false
        unquote(quoted)
      end

    {safe, _} = Code.eval_quoted(quoted, [assigns: assigns], file: name)
    safe
  end
end

GalleonHarness.main(System.argv())
