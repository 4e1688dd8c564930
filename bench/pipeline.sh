#!/usr/bin/env bash
# bench/pipeline.sh: pipelined requests (wrk with bench/pipeline.lua, DEPTH per write) to galleon
# (this tree) and to hyper-peer with and without `pipeline_flush(true)`, serving the same bytes.
# Servers pinned to core 0, wrk to core 1 (bench/pinning.sh; PIN=0: unpinned); contenders
# interleaved per round; per row req/s and
# the server's CPU µs per response (utime+stime from /proc/PID/stat over the responses served),
# medians. Then each server under strace for a short run: write calls per read of requests.
#
#   bench/pipeline.sh                          # /blah?iters=10, depth 16, 5 rounds of 4 s
#   ROUNDS=9 DUR=5 DEPTH=16 CONNS=50 TARGET='/blah?iters=10' STRACE=0 bench/pipeline.sh
#
# Needs wrk, curl, taskset (strace unless STRACE=0); 127.0.0.1 only.
set -euo pipefail
ROUNDS=${ROUNDS:-5}
DUR=${DUR:-4}
DEPTH=${DEPTH:-16}
CONNS=${CONNS:-50}
TARGET=${TARGET:-/blah?iters=10}
STRACE=${STRACE:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
cargo build --release -q -p galleon
cargo build --release -q --manifest-path bench/peers/hyper-peer/Cargo.toml
GALLEON=${CARGO_TARGET_DIR:-$ROOT/target}/release/galleon
HYPER_PEER=${CARGO_TARGET_DIR:-bench/peers/hyper-peer/target}/release/hyper-peer
# shellcheck source=bench/pinning.sh
source "$ROOT/bench/pinning.sh"
TMP=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$TMP"' EXIT
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; exit 1; }
for port in 4321 4322 4323; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is taken by another process; stop it first" >&2; exit 1
    fi
done
"${SERVER_ON[@]}" "$GALLEON" serve --addr 127.0.0.1:4321 --events off --trace-endpoint off 2>/dev/null & PIDS+=($!); PG=$!
wait_port 4321
curl -sf "http://127.0.0.1:4321$TARGET" -o "$TMP/body"
"${SERVER_ON[@]}" "$HYPER_PEER" 127.0.0.1:4322 "$TMP/body" --pipeline-flush 2>/dev/null & PIDS+=($!); PF=$!
"${SERVER_ON[@]}" "$HYPER_PEER" 127.0.0.1:4323 "$TMP/body" 2>/dev/null & PIDS+=($!); PH=$!
wait_port 4322; wait_port 4323
for port in 4322 4323; do
    cmp -s <(curl -sf "http://127.0.0.1:$port$TARGET") "$TMP/body" || { echo "port $port serves different bytes" >&2; exit 1; }
done
run() { # port pid -> "rps us"
    local c0 c1 out n r
    c0=$(cpu_ticks "$2")
    out=$("${CLIENT_ON[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" -s bench/pipeline.lua "http://127.0.0.1:$1$TARGET" -- "$DEPTH")
    c1=$(cpu_ticks "$2")
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    r=$(echo "$out" | awk '/^Requests\/sec/ {print $2}')
    printf '%.0f %s' "$r" "$(us_per_response $((c1 - c0)) "$n")"
}
echo "== $TARGET pipelined $DEPTH deep, wrk -t$WRK_THREADS -c$CONNS, $ROUNDS rounds of ${DUR}s, $PIN_NOTE"
echo "== $(nproc) CPUs, $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}'), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
printf '%5s %11s %8s %11s %8s %11s %8s %9s %9s\n' round galleon_rps us flush_rps us hyper_rps us g/flush us_g/f
for r in $(seq 1 "$ROUNDS"); do
    case $((r % 3)) in
    0) g=$(run 4321 "$PG"); f=$(run 4322 "$PF"); h=$(run 4323 "$PH") ;;
    1) f=$(run 4322 "$PF"); h=$(run 4323 "$PH"); g=$(run 4321 "$PG") ;;
    2) h=$(run 4323 "$PH"); g=$(run 4321 "$PG"); f=$(run 4322 "$PF") ;;
    esac
    # shellcheck disable=SC2086
    set -- $g $f $h
    printf '%5s %11s %8s %11s %8s %11s %8s %9.3f %9.3f\n' "$r" "$1" "$2" "$3" "$4" "$5" "$6" \
        "$(awk -v a="$1" -v b="$3" 'BEGIN { print a / b }')" "$(awk -v a="$2" -v b="$4" 'BEGIN { print a / b }')"
done | tee "$TMP/rounds"
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$1" '{print $c}' "$TMP/rounds" | median; }
printf 'medians: galleon %s req/s %s µs; hyper pipeline_flush %s req/s %s µs; hyper %s req/s %s µs\n' \
    "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)"
printf 'median of per-round ratios galleon/hyper-pipeline_flush: req/s %s, CPU per response %s\n' "$(col 8)" "$(col 9)"
if [ "$STRACE" = 1 ]; then
    echo "== write calls per read of requests, 2 s of wrk -t1 -c4 at depth $DEPTH under strace -f -c"
    printf '%-22s %8s %8s %10s %12s\n' server reads writes responses resp/write
    for s in "galleon 4321 $PG" "hyper_pipeline_flush 4322 $PF" "hyper 4323 $PH"; do
        # shellcheck disable=SC2086
        set -- $s
        timeout 20 strace -f -c -qq -e trace=read,recvfrom,write,writev,sendto,sendmsg -o "$TMP/strace.$1" -p "$3" & st=$!
        sleep 0.5
        n=$("${CLIENT_ON[@]}" wrk -t1 -c4 -d2s -s bench/pipeline.lua "http://127.0.0.1:$2$TARGET" -- "$DEPTH" | awk '/requests in/ {print $1}')
        sleep 0.2; kill -INT "$st" 2>/dev/null || true; wait "$st" 2>/dev/null || true
        # Successful reads only: calls minus errors (the EAGAIN that ends each batch of reads).
        reads=$(awk '$NF ~ /^(read|recvfrom)$/ { e = ($5 ~ /^[0-9]+$/) ? $5 : 0; s += $4 - e } END { print s + 0 }' "$TMP/strace.$1")
        writes=$(awk '$NF ~ /^(write|writev|sendto|sendmsg)$/ { s += $4 } END { print s + 0 }' "$TMP/strace.$1")
        printf '%-22s %8s %8s %10s %12.1f\n' "$1" "$reads" "$writes" "$n" "$(awk -v n="$n" -v w="$writes" 'BEGIN { print (w > 0) ? n / w : 0 }')"
    done
fi
