#!/usr/bin/env bash
# bench/http.sh: galleon's HTTP server against its peers, in one run, on loopback only.
#
#   bench/http.sh                 # 5 s per row, 3 rounds (about 4 minutes in all)
#   DUR=10 ROUNDS=5 bench/http.sh # longer
#   BASELINE=/path/to/older/galleon bench/http.sh   # adds that build as a "baseline" row
#   TARGETS="/blah?iters=10" DOOM=0 bench/http.sh    # only some rows, no /doom download
#   PAGES=0 bench/http.sh         # only the /doom rows
#   INSTR=1 bench/http.sh         # and callgrind user instructions per request (galleon, hyper)
#   PIN=0 bench/http.sh           # unpinned, wrk -t2 (the runs before 2026-12-07)
#
# Pinned by default (bench/pinning.sh): every server on CPU 0, wrk and curl on CPU 1, so the
# client's cost comes from its own core, as with a client on another machine.
# Rows (wrk -t1 -c50 pinned, -t2 unpinned; DUR seconds each, 127.0.0.1 only; every row run
# ROUNDS times, the contenders' order rotated each round, the median shown): req/s, MB/s, the
# server's CPU µs per response (utime + stime from /proc/PID/stat over the requests served),
# each as a multiple of hyper's, and with INSTR=1 user-space instructions per request
# (bench/instructions.sh: callgrind, INSTR_N keep-alive requests; galleon's own policy and
# hyper-peer only):
#   /blah?iters=1000, /blah-split?iters=1000, /blah?iters=10, each served by
#   - galleon under each write policy, rendering every request: `default` is the server's own
#     policy (requests as hyper gets them), `flatten` and `vectored` are picked per request with
#     the x-galleon-write-policy header;
#   - hyper-peer (bench/peers/hyper-peer): hyper 1.x holding galleon's exact bytes pre-flattened,
#     one process per page so it answers without even a lookup, with the same headers
#     (content-type, content-length, date) and TCP_NODELAY like galleon;
#   - beam_peer (bench/peers/beam_peer.erl): the Erlang VM sending the same templates as I/O lists
#     of module literals.
# Then /doom?iters=10000000 (3.01 GB) downloaded with curl from fresh servers, DOOM_ROUNDS (3)
# rounds interleaved: galleon (default and vectored policy), the BEAM and raw-sender
# (`galleon bench --raw-sender`, the http suite's floor: pre-flattened blocks, blocking writes). Each one's median time, its speed as a
# multiple of raw-sender's in the same round ("vs raw"; galleon should stay at 0.9x or above),
# its CPU per download and its peak RSS.
#
# Needs: cargo, wrk, curl, erl/erlc, taskset (Debian: apt-get install wrk curl erlang-nox);
# valgrind and python3 for INSTR=1.
set -euo pipefail

DUR=${DUR:-5}
ROUNDS=${ROUNDS:-3}
CONNS=50
INSTR=${INSTR:-0}
INSTR_N=${INSTR_N:-2000}
DOOM_ITERS=${DOOM_ITERS:-10000000}
DOOM_ROUNDS=${DOOM_ROUNDS:-3}
# Ports for the run; all on 127.0.0.1.
P_GALLEON=${P_GALLEON:-4101}
P_BEAM=${P_BEAM:-4103}
P_RAW=${P_RAW:-4104}
P_BASE=${P_BASE:-4105}
# hyper-peer i (one per target) listens on P_HYPER_FIRST + i.
P_HYPER_FIRST=${P_HYPER_FIRST:-4110}
BASELINE=${BASELINE:-}
DOOM=${DOOM:-1}
PAGES=${PAGES:-1}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/pinning.sh
source "$ROOT/bench/pinning.sh"
THREADS=$WRK_THREADS
for tool in curl erl erlc cargo $([ "$PAGES" = 1 ] && echo wrk); do
    command -v "$tool" >/dev/null || { echo "bench/http.sh: $tool is missing" >&2; exit 1; }
done

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

echo "== building (release)" >&2
cargo build --release -q -p galleon
cargo build --release -q --manifest-path bench/peers/hyper-peer/Cargo.toml
erlc -o "$TMP" bench/peers/beam_peer.erl
# Where cargo puts the builds (CARGO_TARGET_DIR, as cargo reads it).
GALLEON=${CARGO_TARGET_DIR:-$ROOT/target}/release/galleon
PEERS=${CARGO_TARGET_DIR:-$ROOT/bench/peers/hyper-peer/target}/release

wait_port() { # port
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench/http.sh: nothing listening on port $1" >&2
    exit 1
}

start_galleon() {
    "${SERVER_ON[@]}" "$GALLEON" serve --addr "127.0.0.1:$P_GALLEON" --trace-endpoint off --events off 2>"$TMP/galleon.log" &
    GALLEON_PID=$!
    PIDS+=("$GALLEON_PID")
    wait_port "$P_GALLEON"
}

start_beam() {
    "${SERVER_ON[@]}" erl -noshell -pa "$TMP" -eval "beam_peer:start($P_BEAM)" >"$TMP/beam.out" 2>"$TMP/beam.log" &
    BEAM_PID=$!
    PIDS+=("$BEAM_PID")
    wait_port "$P_BEAM"
}

if [ -n "${TARGETS:-}" ]; then
    read -r -a TARGETS <<<"$TARGETS"
else
    TARGETS=("/blah?iters=1000" "/blah-split?iters=1000" "/blah?iters=10")
fi

start_baseline() {
    "${SERVER_ON[@]}" "$BASELINE" serve --addr "127.0.0.1:$P_BASE" --trace-endpoint off --events off 2>"$TMP/baseline.log" &
    BASE_PID=$!
    PIDS+=("$BASE_PID")
    wait_port "$P_BASE"
}

# wrk's "Transfer/sec: 411.32MB" in MB/s.
to_mb() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
        if (u == "GB") n *= 1024; else if (u == "KB") n /= 1024; else if (u == "B") n /= 1048576;
        printf "%.1f", n }'
}

# cpu_ticks: bench/pinning.sh.
TICK_US=$(awk -v hz="$(getconf CLK_TCK)" 'BEGIN { print 1000000 / hz }')

# The median of a list of numbers, with DIGITS decimals (1).
median() { # "list" [digits]
    tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk -v d="${2:-1}" '{ v[NR] = $1 } END { printf "%.*f", d, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

if [ "$PAGES" = 1 ]; then
start_galleon
# The peers get galleon's exact bytes.
HYPER_PIDS=()
i=0
for t in "${TARGETS[@]}"; do
    curl -sf "http://127.0.0.1:$P_GALLEON$t" -o "$TMP/body$i"
    "${SERVER_ON[@]}" "$PEERS/hyper-peer" "127.0.0.1:$((P_HYPER_FIRST + i))" "$TMP/body$i" 2>"$TMP/hyper$i.log" &
    HYPER_PIDS+=($!)
    PIDS+=($!)
    i=$((i + 1))
done
start_beam
[ -n "$BASELINE" ] && start_baseline
for i in "${!TARGETS[@]}"; do wait_port "$((P_HYPER_FIRST + i))"; done

i=0
for t in "${TARGETS[@]}"; do
    ports=("$((P_HYPER_FIRST + i))" "$P_BEAM")
    [ -n "$BASELINE" ] && ports+=("$P_BASE")
    for p in "${ports[@]}"; do
        curl -sf "http://127.0.0.1:$p$t" -o "$TMP/check"
        cmp -s "$TMP/check" "$TMP/body$i" || {
            echo "bench/http.sh: port $p serves different bytes for $t" >&2
            exit 1
        }
    done
    i=$((i + 1))
done



# One wrk row: prints "req/s MB/s server-CPU-us-per-request [errors]". The server's CPU per
# request is the steadier figure on a shared machine: other tenants slow a row down but do not
# add to the server's own CPU time.
run_wrk() { # pid url [header]
    local pid=$1 url=$2 out t0 t1
    t0=$(cpu_ticks "$pid")
    if [ $# -gt 2 ]; then
        out=$("${CLIENT_ON[@]}" wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" -H "$3" "$url")
    else
        out=$("${CLIENT_ON[@]}" wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" "$url")
    fi
    t1=$(cpu_ticks "$pid")
    local rps mbs errs reqs cpu
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    mbs=$(to_mb "$(awk '/^Transfer\/sec:/ {print $2}' <<<"$out")")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    cpu=$(awk -v d="$((t1 - t0))" -v n="$reqs" -v us="$TICK_US" 'BEGIN { printf "%.1f", d * us / n }')
    errs=$(awk '/Socket errors|Non-2xx/ {printf "%s ", $0}' <<<"$out")
    echo "$rps $mbs $cpu ${errs:-}"
}

HEADER="wrk -t$THREADS -c$CONNS -d${DUR}s per row, $ROUNDS rounds interleaved (order rotated), $PIN_NOTE, $(nproc) cores, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates bench/peers 2>/dev/null || echo ' + uncommitted changes')"
echo "== $HEADER" >&2
# Rows run round-robin, ROUNDS times, and the table shows each row's median: on a shared machine
# the background load drifts, and interleaving spreads the drift over every server alike; the
# order rotates each round, so no server always runs first or right after a given one.
SERVERS=("galleon default" "galleon flatten" "galleon vectored" hyper beam)
[ -n "$BASELINE" ] && SERVERS=("galleon default" baseline "galleon flatten" "galleon vectored" hyper beam)
declare -A RPS=() MBS=() CPU=()
for round in $(seq 1 "$ROUNDS"); do
    for ti in "${!TARGETS[@]}"; do
        t=${TARGETS[$ti]}
        k=$((round % ${#SERVERS[@]}))
        for s in "${SERVERS[@]:$k}" "${SERVERS[@]:0:$k}"; do
            case $s in
            # The default row sends what a browser sends, no policy header: the same request
            # bytes hyper and the BEAM get (until 0f78fde it sent `...: default`, a 33-byte
            # header the server then parsed, looked up and acted on, which hyper never saw).
            "galleon default") read -r rps mbs cpu errs < <(run_wrk "$GALLEON_PID" "http://127.0.0.1:$P_GALLEON$t") ;;
            galleon*) read -r rps mbs cpu errs < <(run_wrk "$GALLEON_PID" "http://127.0.0.1:$P_GALLEON$t" "x-galleon-write-policy: ${s#galleon }") ;;
            baseline) read -r rps mbs cpu errs < <(run_wrk "$BASE_PID" "http://127.0.0.1:$P_BASE$t") ;;
            hyper) read -r rps mbs cpu errs < <(run_wrk "${HYPER_PIDS[$ti]}" "http://127.0.0.1:$((P_HYPER_FIRST + ti))$t") ;;
            beam) read -r rps mbs cpu errs < <(run_wrk "$BEAM_PID" "http://127.0.0.1:$P_BEAM$t") ;;
            esac
            [ -n "${errs:-}" ] && echo "  round $round, $s, $t: $errs" >&2
            RPS["$t|$s"]="${RPS["$t|$s"]:-} $rps"
            MBS["$t|$s"]="${MBS["$t|$s"]:-} $mbs"
            CPU["$t|$s"]="${CPU["$t|$s"]:-} $cpu"
        done
    done
    echo "  round $round done" >&2
done


# INSTR=1: user-space instructions per request of galleon (its own policy, as "galleon
# default" is measured), hyper-peer and the baseline, per target (bench/instructions.sh).
declare -A INSTRS=()
if [ "$INSTR" = 1 ]; then
    echo "== user-space instructions per request (callgrind, $INSTR_N keep-alive requests)" >&2
    for t in "${TARGETS[@]}"; do
        BASELINE=$BASELINE TARGET=$t N=$INSTR_N bench/instructions.sh >"$TMP/instr.out"
        cat "$TMP/instr.out" >&2
        while read -r who count _; do
            case $who in
            galleon) INSTRS["$t|galleon default"]=$count ;;
            hyper | baseline) INSTRS["$t|$who"]=$count ;;
            esac
        done < <(grep 'instructions per request' "$TMP/instr.out")
    done
fi

echo "$HEADER; medians"
printf '%-24s %-18s %10s %9s %9s %11s %9s %11s   %s\n' "target" "server" "req/s" "MB/s" "vs hyper" "CPU us/req" "vs hyper" "instr/req" "req/s of each round"
for t in "${TARGETS[@]}"; do
    hyper_rps=$(median "${RPS["$t|hyper"]}")
    hyper_cpu=$(median "${CPU["$t|hyper"]}")
    for s in "${SERVERS[@]}"; do
        rps=$(median "${RPS["$t|$s"]}")
        mbs=$(median "${MBS["$t|$s"]}")
        cpu=$(median "${CPU["$t|$s"]}")
        ratio=$(awk -v a="$rps" -v b="$hyper_rps" 'BEGIN { printf "%.2fx", a / b }')
        cratio=$(awk -v a="$cpu" -v b="$hyper_cpu" 'BEGIN { printf "%.2fx", a / b }')
        printf '%-24s %-18s %10s %9s %9s %11s %9s %11s  %s\n' "$t" "$s" "$rps" "$mbs" "$ratio" "$cpu" "$cratio" "${INSTRS["$t|$s"]:--}" "${RPS["$t|$s"]}"
    done
done

fi

# /doom: DOOM_ROUNDS rounds in each of which every server is downloaded from once, in an order
# rotated each round, each download from a server started for it (curl -o /dev/null; the
# server's RSS sampled every 20 ms). Per server: the median time and its throughput, the median of each round's
# time ratio raw-sender/server ("vs raw": 1.00x is the floor's speed), the server's CPU per
# download, and its peak RSS. Pinned (the default): servers on CPU 0, curl on CPU 1.
for p in ${GALLEON_PID:-} ${BEAM_PID:-} ${HYPER_PIDS[@]+"${HYPER_PIDS[@]}"} ${BASE_PID:-}; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
done
[ "$DOOM" = 0 ] && exit 0
# The doom block, 301 bytes: one iteration as galleon renders it.
start_galleon
curl -sf "http://127.0.0.1:$P_GALLEON/doom?iters=1" -o "$TMP/doom1"
kill "$GALLEON_PID"; wait "$GALLEON_PID" 2>/dev/null || true
DOOM_SERVERS=("galleon default" "galleon vectored")
[ -n "$BASELINE" ] && DOOM_SERVERS+=(baseline)
DOOM_SERVERS+=(beam raw-sender)
# Starts contender $1 in the background (pinned unless PIN=0); sets PORT, POLICY and SPID.
start_contender() { # name
    local f=${1// /_}
    POLICY=default
    case $1 in
    "galleon default" | "galleon vectored")
        PORT=$P_GALLEON
        POLICY=${1#galleon }
        "${SERVER_ON[@]}" "$GALLEON" serve --addr "127.0.0.1:$PORT" --trace-endpoint off --events off 2>"$TMP/doom-$f.log" &
        ;;
    baseline)
        PORT=$P_BASE
        "${SERVER_ON[@]}" "$BASELINE" serve --addr "127.0.0.1:$PORT" --trace-endpoint off --events off 2>"$TMP/doom-$f.log" &
        ;;
    beam)
        PORT=$P_BEAM
        "${SERVER_ON[@]}" erl -noshell -pa "$TMP" -eval "beam_peer:start($PORT)" >"$TMP/doom-$f.out" 2>"$TMP/doom-$f.log" &
        ;;
    raw-sender)
        PORT=$P_RAW
        "${SERVER_ON[@]}" "$GALLEON" bench --raw-sender "127.0.0.1:$PORT" "$TMP/doom1" 2>"$TMP/doom-$f.log" &
        ;;
    esac
    SPID=$!
    PIDS+=("$SPID")
    wait_port "$PORT"
}
# One download from a server started for it alone (an idle BEAM beside the others spins its
# schedulers, and would tax whoever shares its core), its RSS sampled every 20 ms.
declare -A DTIME=() DCPU=() DBYTES=()
doom_download() { # round name
    local round=$1 s=$2 f=${2// /_}
    start_contender "$s"
    local pid=$SPID
    (
        while kill -0 "$pid" 2>/dev/null; do
            awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null
            sleep 0.02
        done
    ) >>"$TMP/rss.$f" &
    local sampler=$! t0 t1 res
    t0=$(cpu_ticks "$pid")
    res=$("${CLIENT_ON[@]}" curl -s -o /dev/null -w '%{size_download} %{time_total}' \
        -H "x-galleon-write-policy: $POLICY" "http://127.0.0.1:$PORT/doom?iters=$DOOM_ITERS")
    t1=$(cpu_ticks "$pid")
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    DBYTES[$s]=${res% *}
    DTIME["$round|$s"]=${res#* }
    DCPU[$s]="${DCPU[$s]:-} $(awk -v d="$((t1 - t0))" -v us="$TICK_US" 'BEGIN { printf "%.2f", d * us / 1e6 }')"
}
n=${#DOOM_SERVERS[@]}
for round in $(seq 1 "$DOOM_ROUNDS"); do
    for k in $(seq 0 $((n - 1))); do
        doom_download "$round" "${DOOM_SERVERS[$(((k + round) % n))]}"
    done
    echo "  /doom round $round done" >&2
done
echo
echo "/doom?iters=$DOOM_ITERS, $DOOM_ROUNDS rounds interleaved (order rotated), curl -o /dev/null, $PIN_NOTE, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); medians"
printf '%-18s %10s %12s %9s %12s  %s\n' "server" "time" "throughput" "vs raw" "CPU s" "server RSS"
for s in "${DOOM_SERVERS[@]}"; do
    times="" ratios=""
    for round in $(seq 1 "$DOOM_ROUNDS"); do
        times="$times ${DTIME["$round|$s"]}"
        ratios="$ratios $(awk -v r="${DTIME["$round|raw-sender"]}" -v t="${DTIME["$round|$s"]}" 'BEGIN { printf "%.3f", r / t }')"
    done
    tm=$(median "$times" 3)
    rm=$(median "$ratios" 3)
    cpu=$(median "${DCPU[$s]}" 2)
    peak=$(sort -n "$TMP/rss.${s// /_}" | tail -1)
    awk -v n="$s" -v sz="${DBYTES[$s]}" -v t="$tm" -v r="$rm" -v c="$cpu" -v p="$peak" -v each="$ratios" \
        'BEGIN { printf "%-18s %8.2f s %7.1f MB/s %8.2fx %10.2f s  %.1f MiB peak; vs raw each round:%s\n", n, t, sz / t / 1048576, r, c, p / 1024, each }'
done
