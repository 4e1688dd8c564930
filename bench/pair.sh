#!/usr/bin/env bash
# bench/pair.sh: one page, galleon (this tree) vs an older galleon build vs hyper-peer, as ratios
# per round. On these shared VMs throughput jumps between speed modes from one run to the next,
# so a median of per-round ratios (each round runs the three back to back, in a rotating order)
# is steadier than a ratio of medians.
#
#   BASELINE=/path/to/older/galleon bench/pair.sh                 # /blah?iters=10, 15 rounds of 2 s
#   BASELINE=... ROUNDS=21 DUR=3 TARGET='/blah?iters=1000' bench/pair.sh
#   OLD_ARGS='--stats off' bench/pair.sh     # one build, statistics on (new) vs off (old)
#
# Needs wrk and curl; 127.0.0.1 only. Without BASELINE the older build is this tree's too.
set -euo pipefail
ROUNDS=${ROUNDS:-15}
DUR=${DUR:-2}
TARGET=${TARGET:-/blah?iters=10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
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
"$NEW" serve --addr 127.0.0.1:4301 --events off --trace-endpoint off ${NEW_ARGS:-} 2>/dev/null & PIDS+=($!)
# shellcheck disable=SC2086
"$OLD" serve --addr 127.0.0.1:4302 --events off --trace-endpoint off ${OLD_ARGS:-} 2>/dev/null & PIDS+=($!)
wait_port 4301; wait_port 4302
curl -sf "http://127.0.0.1:4301$TARGET" -o "$TMP/body"
"$HYPER_PEER" 127.0.0.1:4303 "$TMP/body" 2>/dev/null & PIDS+=($!)
wait_port 4303
for port in 4302 4303; do
    cmp -s <(curl -sf "http://127.0.0.1:$port$TARGET") "$TMP/body" || { echo "port $port serves different bytes" >&2; exit 1; }
done
rps() { wrk -t2 -c50 -d"${DUR}s" "http://127.0.0.1:$1$TARGET" | awk '/^Requests\/sec/ {print $2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
echo "== $TARGET, $ROUNDS rounds of ${DUR}s, $(nproc) cores, $(date -u +%FT%TZ), baseline $OLD"
printf '%5s %12s %12s %12s %10s %10s %10s\n' round new old hyper new/hyper old/hyper new/old
for r in $(seq 1 "$ROUNDS"); do
    case $((r % 3)) in
    0) n=$(rps 4301); o=$(rps 4302); h=$(rps 4303) ;;
    1) h=$(rps 4303); n=$(rps 4301); o=$(rps 4302) ;;
    2) o=$(rps 4302); h=$(rps 4303); n=$(rps 4301) ;;
    esac
    printf '%5s %12s %12s %12s %10s %10s %10s\n' "$r" "$n" "$o" "$h" "$(ratio "$n" "$h")" "$(ratio "$o" "$h")" "$(ratio "$n" "$o")"
done | tee "$TMP/rounds"
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf 'median of per-round ratios: new/hyper %s, old/hyper %s, new/old %s\n' \
    "$(awk '{print $5}' "$TMP/rounds" | median)" "$(awk '{print $6}' "$TMP/rounds" | median)" "$(awk '{print $7}' "$TMP/rounds" | median)"
