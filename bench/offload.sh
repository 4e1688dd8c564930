#!/usr/bin/env bash
# bench/offload.sh: where offloading CPU work pays (issue 14, seed 001), in one run, loopback only.
#
#   bench/offload.sh                      # 7 rounds of 3 s per /seal cell, 5 head-of-line rounds
#   ROUNDS=9 DUR=5 bench/offload.sh       # longer (ROUNDS: /seal rounds; HOL_ROUNDS: the other)
#   HOL=0 bench/offload.sh                # only the /seal table
#   HOPS=0 bench/offload.sh               # without the hop table (part 1)
#   SEAL=0 bench/offload.sh               # without the /seal table (part 2)
#   CARGO_TARGET_DIR=/tmp/t bench/offload.sh   # the build (and the binary run) there
#   GALLEON=path/to/galleon bench/offload.sh    # that binary, no build
#
# 1. The hop itself: `cargo bench -p galleon-lab --features peers --bench hops` (galleon's
#    pool vs spawn_blocking vs rayon + oneshot, and the two one-way hops), its table printed first;
# 2. /seal?bytes=N (XChaCha20-Poly1305 of N bytes, the seed's libsodium secretbox case) at 64 B,
#    1 KB, 8 KB, 64 KB and 1 MB, served by three galleons that differ only in `--offload`
#    (inline, offload, adaptive), wrk -t2 -c8, the three cells of a size run back to back in a
#    rotating order, every size once per round; per size the median req/s of each policy and the
#    median (and range) over rounds of that round's adaptive / the better of the other two, so a
#    slow patch of a shared machine moves a round's three cells together, not the ratio; then
#    the size where adaptive switches (from the adaptive server's loopback-only /_galleon/offload).
# 3. Head-of-line: p99 of /blah?iters=1 and /static/robots.txt (wrk -t1 -c2 --latency) alone,
#    then while other clients keep /hash?cost=1 (Argon2id, ~10+ ms a job) and /blah?iters=1000
#    (410 KB pages) busy; per server, the median over rounds of that round's loaded p99 ÷ alone
#    p99. Servers: inline, adaptive and offload at the default --offload-priority (normal,
#    nice 10), and adaptive with --offload-priority idle (SCHED_IDLE pool threads). Then two floors, measured the same way on
#    the adaptive server with two CPU hogs that are not galleon in place of the load: at nice 19
#    (what any normal-class CPU work costs the light routes here) and in SCHED_IDLE (`chrt -i 0`:
#    what the idle pool can at best achieve). Every contender once per round, in turn.
#
# The load average (`uptime`) is printed with each section: the machine may be shared.
# Needs cargo, wrk, curl, python3 and chrt (Debian: apt-get install wrk curl util-linux).
set -euo pipefail
DUR=${DUR:-3}
ROUNDS=${ROUNDS:-7}
HOL_ROUNDS=${HOL_ROUNDS:-5}
HOL=${HOL:-1}
SIZES=${SIZES:-"64 1024 8192 65536 1048576"}
PORT0=${PORT0:-4401}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
for tool in wrk curl cargo python3 chrt; do
    command -v "$tool" >/dev/null || { echo "bench/offload.sh: $tool is missing" >&2; exit 1; }
done
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
load() { echo "load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"; }

if [ "${HOPS:-1}" = 1 ]; then
    echo "== 1. the hop itself (cargo bench -p galleon-lab --features peers --bench hops), $(load)"
    cargo bench -q -p galleon-lab --features peers --bench hops 2>/dev/null |
        sed -n '1,/^target:/p'
    echo
fi

if [ -z "${GALLEON:-}" ]; then
    echo "== building (release)" >&2
    cargo build --release -q -p galleon
    GALLEON=${CARGO_TARGET_DIR:-$ROOT/target}/release/galleon
fi

wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench/offload.sh: nothing listening on port $1" >&2
    exit 1
}

# The servers: name and flags. /seal compares the first three.
NAMES=(inline offload adaptive adaptive-idle)
FLAGS=("--offload inline" "--offload offload" "--offload adaptive"
    "--offload adaptive --offload-priority idle")
port_of() { # server index
    echo $((PORT0 + $1))
}
for i in "${!NAMES[@]}"; do
    # shellcheck disable=SC2086 # FLAGS are words
    "$GALLEON" serve --addr "127.0.0.1:$(port_of "$i")" --events off ${FLAGS[$i]} \
        2>"$TMP/galleon.$i.log" &
    PIDS+=($!)
done
for i in "${!NAMES[@]}"; do wait_port "$(port_of "$i")"; done

rps() { # port path
    wrk -t2 -c8 -d"${DUR}s" "http://127.0.0.1:$1$2" | awk '/^Requests\/sec/ {print $2}'
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3f-%.3f", lo, hi}'; }

if [ "${SEAL:-1}" = 1 ]; then
echo "== 2. /seal, $ROUNDS rounds of ${DUR}s per cell, wrk -t2 -c8, $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(load)"
# Warm up: every server sees every size, so adaptive has estimates before it is measured.
for size in $SIZES; do
    for i in 0 1 2; do
        wrk -t1 -c2 -d1s "http://127.0.0.1:$(port_of "$i")/seal?bytes=$size" >/dev/null
    done
done
for r in $(seq 1 "$ROUNDS"); do
    for size in $SIZES; do
        # Rotate the order per round so no policy always runs first.
        for k in 0 1 2; do
            i=$(((k + r) % 3))
            rps "$(port_of "$i")" "/seal?bytes=$size" >"$TMP/cell.$i"
        done
        a=$(cat "$TMP/cell.0") b=$(cat "$TMP/cell.1") c=$(cat "$TMP/cell.2")
        echo "$a" >>"$TMP/seal.$size.0"
        echo "$b" >>"$TMP/seal.$size.1"
        echo "$c" >>"$TMP/seal.$size.2"
        awk -v i="$a" -v o="$b" -v d="$c" 'BEGIN { m = i > o ? i : o; printf "%.4f\n", d / m }' \
            >>"$TMP/ratio.$size"
    done
    echo "   round $r done, $(load)" >&2
done
printf '%10s %10s %10s %10s %20s %14s %12s\n' bytes inline offload adaptive 'adaptive / better' 'range' 'of medians'
for size in $SIZES; do
    m=()
    for i in 0 1 2; do m+=("$(median <"$TMP/seal.$size.$i")"); done
    printf '%10s %10.0f %10.0f %10.0f %20.3f %14s %12.3f\n' "$size" "${m[0]}" "${m[1]}" "${m[2]}" \
        "$(median <"$TMP/ratio.$size")" "$(range <"$TMP/ratio.$size")" \
        "$(awk -v i="${m[0]}" -v o="${m[1]}" -v d="${m[2]}" 'BEGIN { print d / (i > o ? i : o) }')"
done
echo "(req/s: medians over rounds; adaptive / better: the median over rounds of each round's ratio;"
echo " of medians: adaptive's median ÷ the better median. Each round's better of two noisy cells is"
echo " biased high, so on a loaded machine the per-round ratio reads low even for equal servers)"
echo "adaptive's switch point for seal (bytes; smaller sizes run inline), and its estimates by size bucket at the end"
echo "(cost and hop: the model's estimates; inline while hop > 10% of cost):"
curl -sf "http://127.0.0.1:$(port_of 2)/_galleon/offload" |
    python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in d["kinds"]:
    if k["name"] != "seal":
        continue
    print("  ", k["name"], k.get("switch_point"))
    for e in k["estimates"]:
        print("   from %8s bytes: cost %9.1f us, hop %7.2f us (%5.1f%%), %6d samples, %7d decisions" % (
            e["size_from"], e["cost_ns"] / 1e3, e["hop_ns"] / 1e3,
            100 * e["hop_ns"] / max(e["cost_ns"], 1), e["samples"], e["decisions"]))'
echo "after: $(load)"
fi

[ "$HOL" = 1 ] || exit 0

p99() { # port path -> ms
    wrk -t1 -c2 -d"${DUR}s" --latency "http://127.0.0.1:$1$2" |
        awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 } print v }'
}

# One measurement: p99 alone, then p99 under the contender's load. Contenders: a server index
# (the galleon load on that server), or floor-nice19 / floor-idle (hogs, on the adaptive server).
measure() { # contender path -> "alone loaded"
    local who=$1 path=$2 port l1 l2 a l
    case "$who" in floor-*) port=$(port_of 2) ;; *) port=$(port_of "$who") ;; esac
    a=$(p99 "$port" "$path")
    case "$who" in
    floor-nice19 | floor-idle)
        local how=(nice -n 19)
        [ "$who" = floor-idle ] && how=(chrt -i 0)
        timeout $((DUR + 2)) "${how[@]}" python3 -c 'while True: pass' &
        l1=$!
        timeout $((DUR + 2)) "${how[@]}" python3 -c 'while True: pass' &
        l2=$!
        ;;
    *)
        # The load's clients run at nice 19: they stand for machines elsewhere, and on these
        # 2 cores the measuring client would otherwise wait for them, not for the server.
        nice -n 19 wrk -t1 -c4 -d$((DUR + 2))s "http://127.0.0.1:$port/hash?cost=1" >/dev/null &
        l1=$!
        nice -n 19 wrk -t1 -c2 -d$((DUR + 2))s "http://127.0.0.1:$port/blah?iters=1000" >/dev/null &
        l2=$!
        ;;
    esac
    sleep 1
    l=$(p99 "$port" "$path")
    wait "$l1" "$l2" || true
    echo "$a $l"
}

CONTENDERS=(0 2 3 1 floor-nice19 floor-idle)
label() { case "$1" in floor-*) echo "$1" ;; *) echo "${NAMES[$1]}" ;; esac; }
PATHS=("/blah?iters=1" "/static/robots.txt")
echo
echo "== 3. head-of-line: p99 (ms) of light routes alone and while /hash?cost=1 (4 clients) and /blah?iters=1000 (2 clients) run, $HOL_ROUNDS rounds, $(date -u +%FT%TZ), $(load)"
for r in $(seq 1 "$HOL_ROUNDS"); do
    for p in "${!PATHS[@]}"; do
        n=${#CONTENDERS[@]}
        for k in $(seq 0 $((n - 1))); do
            c=${CONTENDERS[$(((k + r) % n))]}
            read -r a l < <(measure "$c" "${PATHS[$p]}")
            echo "$a" >>"$TMP/hol.$p.$c.alone"
            echo "$l" >>"$TMP/hol.$p.$c.loaded"
            awk -v a="$a" -v l="$l" 'BEGIN { printf "%.3f\n", l / a }' >>"$TMP/hol.$p.$c.ratio"
        done
    done
    echo "   round $r done, $(load)" >&2
done
printf '%-20s %-16s %8s %8s %8s %16s\n' route server alone loaded ratio 'ratio range'
for p in "${!PATHS[@]}"; do
    for c in "${CONTENDERS[@]}"; do
        printf '%-20s %-16s %8.3f %8.3f %8.2f %16s\n' "${PATHS[$p]}" "$(label "$c")" \
            "$(median <"$TMP/hol.$p.$c.alone")" "$(median <"$TMP/hol.$p.$c.loaded")" \
            "$(median <"$TMP/hol.$p.$c.ratio")" "$(range <"$TMP/hol.$p.$c.ratio")"
    done
done
echo "(alone, loaded: medians of per-round p99s; ratio: the median of per-round loaded ÷ alone."
echo " inline/adaptive/offload: --offload-priority normal, nice 10 (the defaults); adaptive-idle: --offload-priority idle;"
echo " floor-nice19 / floor-idle: two CPU hogs that are not galleon, at nice 19 / in SCHED_IDLE, instead of the load;"
echo " the load's clients run at nice 19)"
echo "after: $(load)"
