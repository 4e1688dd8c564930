#!/usr/bin/env bash
# bench/pair-pinned.sh: this tree vs an older galleon build, the server pinned to core 0 and wrk
# to core 1, per round req/s and the server's CPU µs per response (utime+stime from /proc/PID/stat
# over the requests served); new and old alternate which goes first.
#   BASELINE=/path/to/older/galleon bench/pair-pinned.sh
#   BASELINE=... TARGET='/blah?iters=1000' ROUNDS=9 bench/pair-pinned.sh
# Needs wrk, curl, taskset; 127.0.0.1 only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
cargo build --release -q -p galleon
NEW=${CARGO_TARGET_DIR:-$ROOT/target}/release/galleon
OLD=${BASELINE:?set BASELINE to the older galleon binary}
TARGET=${TARGET:-/blah?iters=10}; ROUNDS=${ROUNDS:-7}; DUR=${DUR:-3}
taskset -c 0 $NEW serve --addr 127.0.0.1:4311 --events off --trace-endpoint off 2>/dev/null & PN=$!
taskset -c 0 $OLD serve --addr 127.0.0.1:4312 --events off --trace-endpoint off 2>/dev/null & PO=$!
TMP=$(mktemp -d)
trap 'kill $PN $PO 2>/dev/null; rm -rf "$TMP"' EXIT
sleep 1.5
cmp <(curl -sf "http://127.0.0.1:4311$TARGET") <(curl -sf "http://127.0.0.1:4312$TARGET")
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
run() { # port pid -> "rps us"
  local c0=$(cpu $2); local out=$(taskset -c 1 wrk -t1 -c50 -d${DUR}s "http://127.0.0.1:$1$TARGET")
  local c1=$(cpu $2)
  local n=$(echo "$out" | awk '/requests in/ {print $1}'); local r=$(echo "$out" | awk '/^Requests\/sec/ {print $2}')
  awk -v r=$r -v n=$n -v d=$((c1-c0)) -v t=$tck 'BEGIN{printf "%.0f %.2f", r, d/t*1e6/n}'
}
echo "== $TARGET pinned, $ROUNDS rounds of ${DUR}s, $(date -u +%FT%TZ)"
printf '%5s %10s %8s %10s %8s %8s %8s\n' round new_rps new_us old_rps old_us rps_n/o us_n/o
for r in $(seq 1 $ROUNDS); do
  if [ $((r%2)) = 1 ]; then a=$(run 4311 $PN); b=$(run 4312 $PO); else b=$(run 4312 $PO); a=$(run 4311 $PN); fi
  set -- $a $b
  printf '%5s %10s %8s %10s %8s %8.3f %8.3f\n' $r $1 $2 $3 $4 $(awk -v a=$1 -v b=$3 'BEGIN{print a/b}') $(awk -v a=$2 -v b=$4 'BEGIN{print a/b}')
done | tee "$TMP/rounds"
med() { sort -g | awk '{v[NR]=$1} END{print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
echo "median new/old: req/s $(awk '{print $6}' "$TMP/rounds" | med), CPU/response $(awk '{print $7}' "$TMP/rounds" | med)"
