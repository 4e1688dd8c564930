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
%% The seed's string pages (galleon's /static-strings and /dynamic-strings, same bytes): a pool of
%% 20,000 random 65-byte binaries made at start (off-heap, shared, in persistent_term), and a page
%% of count=N (default 100) of them, each as <p>S</p>, between the template's header and footer:
%%   /static?count=N      picked with rand:uniform among the first 16
%%   /dynamic?count=N     picked with rand:uniform among all 20,000
%%   /fixed?count=N       the first 16 in turn, no random pick (the pick's cost, by difference)
%%
%% Run: erlc beam_peer.erl && erl -noshell -eval 'beam_peer:start(4103)'
-module(beam_peer).
-export([start/1, accept/1]).

%% Acceptor processes: a few, so accepting never serialises behind one process.
-define(ACCEPTORS, 8).

-define(POOL, 20000).
-define(STATIC_SET, 16).
-define(STRING_LEN, 65).
-define(MAX_COUNT, 100000).
-define(HEADER, "<header>O O O O O O O O O O O O O O O O O O O O O O O O O O O O O O O O</header>\n").
-define(FOOTER, "<footer>X X X X X X X X X X X X X X X X X X X X X X X X X X X X X X X X</footer>\n").

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
    persistent_term:put({?MODULE, pool}, pool()),
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
    case binary:split(Target, <<"?count=">>) of
        [<<"/static">> | C] -> strings(?STATIC_SET, count(C));
        [<<"/dynamic">> | C] -> strings(?POOL, count(C));
        [<<"/fixed">> | C] -> strings(fixed, count(C));
        _ -> iters_body(Target)
    end.

iters_body(Target) ->
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

%% The string pool: ?POOL binaries of ?STRING_LEN uppercase letters (deterministic).
pool() ->
    rand:seed(exsss, {20, 2, 2026}),
    list_to_tuple([list_to_binary([$A + rand:uniform(26) - 1 || _ <- lists:seq(1, ?STRING_LEN)])
                   || _ <- lists:seq(1, ?POOL)]).

count([]) -> 100;
count([N]) -> max(0, min(?MAX_COUNT, binary_to_integer(hd(binary:split(N, <<"&">>))))).

%% A string page of Count strings: picked at random among the first Modulus, or (fixed) the
%% first ?STATIC_SET in turn.
strings(Modulus, Count) ->
    Pool = persistent_term:get({?MODULE, pool}),
    Pick = case Modulus of
               fixed -> fun(I) -> element(I rem ?STATIC_SET + 1, Pool) end;
               M -> fun(_) -> element(rand:uniform(M), Pool) end
           end,
    [<<?HEADER>>, [[<<"<p>">>, Pick(I), <<"</p>\n">>] || I <- lists:seq(1, Count)], <<?FOOTER>>].
