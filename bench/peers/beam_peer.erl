%% beam_peer: the Erlang VM peer of bench/http.sh. A small gen_tcp HTTP/1.1 server (keep-alive,
%% GET only) that sends the seed's templates the way Phoenix does: each response is an I/O list
%% of module literals (binaries of 64 bytes or more live once, shared, in the literal area), sent
%% with one gen_tcp:send, so the VM decides per its own limits (SMALL_WRITE_VEC,
%% ERL_SMALL_IO_BIN_LIMIT) whether to writev the pieces or flatten them.
%%
%%   /blah?iters=N        [Blah || _ <- 1..N]              (one 410-byte literal per iteration)
%%   /blah-split?iters=N  [[Half1, <<>>, Half2] || ...]   (two 205-byte literals and the empty string)
%%   /doom?iters=N        lists:duplicate(N, Doom)         (one 301-byte literal; N defaults to 1e8)
%%
%% Run: erlc beam_peer.erl && erl -noshell -eval 'beam_peer:start(4103)'
-module(beam_peer).
-export([start/1, accept/1]).

%% Acceptor processes: a few, so accepting never serialises behind one process.
-define(ACCEPTORS, 8).

-define(BLAH_LINE, "BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah BlahBlahBlahBlah\n").
-define(DOOM_LINE, "DOOM DOOM DOOM DOOM\n").

blah() ->
    <<"\n", ?BLAH_LINE, ?BLAH_LINE, ?BLAH_LINE, "\n", ?BLAH_LINE, ?BLAH_LINE, ?BLAH_LINE>>.
half1() -> <<"\n", ?BLAH_LINE, ?BLAH_LINE, ?BLAH_LINE>>.
half2() -> <<"\n", ?BLAH_LINE, ?BLAH_LINE, ?BLAH_LINE>>.
doom() ->
    <<"\n", ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE,
      ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE, ?DOOM_LINE,
      ?DOOM_LINE>>.

start(Port) ->
    {ok, L} = gen_tcp:listen(Port, [binary, {packet, http_bin}, {active, false},
                                    {reuseaddr, true}, {backlog, 1024}, {nodelay, true},
                                    {ip, {127, 0, 0, 1}}]),
    io:format(standard_error, "beam_peer: serving at http://127.0.0.1:~p/~n", [Port]),
    [spawn(?MODULE, accept, [L]) || _ <- lists:seq(1, ?ACCEPTORS)],
    receive stop -> ok end.

accept(L) ->
    case gen_tcp:accept(L) of
        {ok, S} ->
            Pid = spawn(fun() -> receive go -> loop(S) end end),
            ok = gen_tcp:controlling_process(S, Pid),
            Pid ! go,
            accept(L);
        {error, _} ->
            accept(L)
    end.

loop(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, {http_request, _Method, {abs_path, Target}, _Version}} ->
            case headers(S) of
                ok ->
                    Body = body(Target),
                    Head = [<<"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: ">>,
                            integer_to_binary(iolist_size(Body)), <<"\r\n\r\n">>],
                    case gen_tcp:send(S, [Head, Body]) of
                        ok -> loop(S);
                        _ -> gen_tcp:close(S)
                    end;
                closed ->
                    gen_tcp:close(S)
            end;
        _ ->
            gen_tcp:close(S)
    end.

headers(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, {http_header, _, _, _, _}} -> headers(S);
        {ok, http_eoh} -> ok;
        _ -> closed
    end.

body(Target) ->
    {Path, Iters} = case binary:split(Target, <<"?iters=">>) of
                        [P, N] -> {P, binary_to_integer(hd(binary:split(N, <<"&">>)))};
                        [P] -> {P, default}
                    end,
    case Path of
        <<"/blah">> ->
            Blah = blah(),
            [Blah || _ <- lists:seq(1, iters(Iters, 1))];
        <<"/blah-split">> ->
            H1 = half1(), H2 = half2(),
            [[H1, <<>>, H2] || _ <- lists:seq(1, iters(Iters, 1))];
        <<"/doom">> ->
            lists:duplicate(iters(Iters, 100000000), doom());
        _ ->
            <<"not found\n">>
    end.

iters(default, D) -> D;
iters(N, _) -> N.
