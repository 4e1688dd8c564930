#!/usr/bin/env bash
# bench/pair.sh: one page, galleon (this tree) vs an older galleon build vs hyper-peer, pinned:
# the three servers on CPU 0 and wrk on CPU 1 (bench/pinning.sh; PIN=0: unpinned, wrk -t2, as
# before 2026-12-07). Each round runs the three back to back in a rotating order; per round
# each one's req/s and server CPU µs per response (utime + stime from /proc/PID/stat over the
# requests it served), and the ratios within the round. On these shared VMs throughput jumps
# between speed modes from one run to the next, so a median of per-round ratios is steadier
# than a ratio of medians; the server's CPU per response is steadier still.
#
#   BASELINE=/path/to/older/galleon bench/pair.sh                 # /blah?iters=10, 15 rounds of 2 s
#   BASELINE=... ROUNDS=21 DUR=3 TARGET='/blah?iters=1000' bench/pair.sh
#   OLD_ARGS='--stats off' bench/pair.sh     # one build, statistics on (new) vs off (old)
#   INSTR=1 bench/pair.sh     # and callgrind user instructions per request (bench/instructions.sh)
#   PIN=0 bench/pair.sh       # unpinned
#   HYPER_ARGS=--current-thread bench/pair.sh   # the hyper peer on a current-thread runtime
#
# Needs wrk, curl, taskset (valgrind and python3 for INSTR=1); 127.0.0.1 only. Without BASELINE
# the older build is this tree's too. (bench/pair-pinned.sh, its pinned twin, is folded in here.)
set -euo pipefail
ROUNDS=${ROUNDS:-15}
DUR=${DUR:-2}
CONNS=${CONNS:-50}
TARGET=${TARGET:-/blah?iters=10}
INSTR=${INSTR:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/pinning.sh
source "$ROOT/bench/pinning.sh"
for tool in wrk curl cargo; do
    command -v "$tool" >/dev/null || { echo "bench/pair.sh: $tool is missing" >&2; exit 1; }
done
cargo build --release -q -p galleon
cargo build --release -q --manifest-path bench/peers/hyper-peer/Cargo.toml
# Where cargo puts the builds (CARGO_TARGET_DIR, as cargo reads it).
NEW=${CARGO_TARGET_DIR:-$ROOT/target}/release/galleon
HYPER_PEER=${CARGO_TARGET_DIR:-bench/peers/hyper-peer/target}/release/hyper-peer
OLD=${BASELINE:-$NEW}
TMP=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$TMP"' EXIT
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; exit 1; }
# A port something else already listens on would be measured instead of ours: refuse.
for port in 4301 4302 4303; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is taken by another process; stop it first" >&2; exit 1
    fi
done
# NEW_ARGS / OLD_ARGS: extra `serve` flags of either side (word-split on purpose).
# shellcheck disable=SC2086
"${SERVER_ON[@]}" "$NEW" serve --addr 127.0.0.1:4301 --events off --trace-endpoint off ${NEW_ARGS:-} 2>/dev/null & PIDS+=($!)
P_NEW=$!
# shellcheck disable=SC2086
"${SERVER_ON[@]}" "$OLD" serve --addr 127.0.0.1:4302 --events off --trace-endpoint off ${OLD_ARGS:-} 2>/dev/null & PIDS+=($!)
P_OLD=$!
wait_port 4301; wait_port 4302
curl -sf "http://127.0.0.1:4301$TARGET" -o "$TMP/body"
# HYPER_ARGS: the peer's flags (`--current-thread`: a current-thread runtime, as galleon runs
# one worker; word-split on purpose).
# shellcheck disable=SC2086
"${SERVER_ON[@]}" "$HYPER_PEER" 127.0.0.1:4303 "$TMP/body" ${HYPER_ARGS:-} 2>/dev/null & PIDS+=($!)
P_HYPER=$!
wait_port 4303
for port in 4302 4303; do
    cmp -s <(curl -sf "http://127.0.0.1:$port$TARGET") "$TMP/body" || { echo "port $port serves different bytes" >&2; exit 1; }
done
# One wrk run against port $1 (server pid $2): "req/s cpu-us-per-response". A non-2xx answer or
# a broken connection stops the run.
run() {
    local t0 t1 out
    t0=$(cpu_ticks "$2")
    out=$("${CLIENT_ON[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" "http://127.0.0.1:$1$TARGET")
    t1=$(cpu_ticks "$2")
    local errs
    errs=$(awk '/Non-2xx/ || (/Socket errors/ && ($4 + $6 + $8) > 0)' <<<"$out" | tr -d ',')
    [ -z "$errs" ] || { echo "bench/pair.sh: port $1: $errs" >&2; exit 1; }
    echo "$(awk '/^Requests\/sec/ {print $2}' <<<"$out") $(us_per_response $((t1 - t0)) "$(awk '/requests in/ {print $1}' <<<"$out")")"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else printf "-" }'; }
echo "== $TARGET, $ROUNDS rounds of ${DUR}s, wrk -t$WRK_THREADS -c$CONNS, $PIN_NOTE, $(nproc) cores, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), baseline $OLD"
printf '%5s %9s %9s %9s %7s %7s %7s | %9s %9s %9s | %9s %9s\n' round new old hyper new_us old_us hyp_us \
    rps_n/h rps_o/h rps_n/o cpu_n/h cpu_n/o
for r in $(seq 1 "$ROUNDS"); do
    case $((r % 3)) in
    0) n=$(run 4301 "$P_NEW"); o=$(run 4302 "$P_OLD"); h=$(run 4303 "$P_HYPER") ;;
    1) h=$(run 4303 "$P_HYPER"); n=$(run 4301 "$P_NEW"); o=$(run 4302 "$P_OLD") ;;
    2) o=$(run 4302 "$P_OLD"); h=$(run 4303 "$P_HYPER"); n=$(run 4301 "$P_NEW") ;;
    esac
    read -r nr nc <<<"$n"; read -r or oc <<<"$o"; read -r hr hc <<<"$h"
    printf '%5s %9.0f %9.0f %9.0f %7s %7s %7s | %9s %9s %9s | %9s %9s\n' "$r" "$nr" "$or" "$hr" "$nc" "$oc" "$hc" \
        "$(ratio "$nr" "$hr")" "$(ratio "$or" "$hr")" "$(ratio "$nr" "$or")" "$(ratio "$nc" "$hc")" "$(ratio "$nc" "$oc")"
done | tee "$TMP/rounds"
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$1" '{ print $c }' "$TMP/rounds" | median; }
printf 'medians: req/s new %.0f, old %.0f, hyper %.0f; CPU µs/response new %.1f, old %.1f, hyper %.1f\n' \
    "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)"
printf 'median of per-round ratios: req/s new/hyper %s, old/hyper %s, new/old %s; CPU/response new/hyper %s, new/old %s\n' \
    "$(col 9)" "$(col 10)" "$(col 11)" "$(col 13)" "$(col 14)"
if [ "$INSTR" = 1 ]; then
    # Deterministic, unlike the two above: user-space instructions per request under callgrind.
    kill "${PIDS[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    PIDS=()
    BASELINE=$OLD TARGET=$TARGET N=${INSTR_N:-2000} bench/instructions.sh
fi
