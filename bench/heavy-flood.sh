#!/usr/bin/env bash
# bench/heavy-flood.sh: do page renders keep their latency while clients flood the most expensive
# public job? For each page: its p50 alone, then its p50 while CLIENTS connections loop
# /hash?cost=MAX, as the ratio loaded/alone (issue 35's target: under 3x), and how many of the
# flood's requests were answered 200 or 503. Rounds alternate alone and loaded; medians.
#   bench/heavy-flood.sh
#   BIN=/path/to/other/galleon CLIENTS=16 ROUNDS=3 bench/heavy-flood.sh
# The server gets both cores (its pool has a thread per core); the page client is one connection.
# Needs wrk and curl; 127.0.0.1 only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p galleon
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/galleon
fi
CLIENTS=${CLIENTS:-64}; ROUNDS=${ROUNDS:-3}; DUR=${DUR:-4}; COST=${COST:-16}
PAGES=${PAGES:-/doom?iters=20000 /blah?iters=2000 /dynamic-strings?count=20000}
PORT=4331
$BIN serve --addr 127.0.0.1:$PORT --events off --trace-endpoint off --max-hash-cost "$COST" \
  2>/dev/null & PID=$!
TMP=$(mktemp -d)
trap 'kill $PID 2>/dev/null; kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$PORT/hash?cost=$COST" >/dev/null

ms() { # wrk's latency figure (us, ms or s) in ms
  awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; printf "%.2f", v}'
}
p50() { # target -> "p50_ms completed_requests" of one connection looping it for DUR seconds
  local out; out=$(wrk -t1 -c1 -d${DUR}s --timeout 60s --latency "http://127.0.0.1:$PORT$1")
  local n; n=$(echo "$out" | awk '/requests in/ {print $1}')
  if [ "${n:-0}" = 0 ]; then echo "inf 0"; return; fi
  echo "$(echo "$out" | awk '$1=="50%" {print $2}' | ms) $n"
}
flood() { # seconds -> starts CLIENTS connections looping /hash; prints wrk's output to $TMP/flood
  wrk -t1 -c$CLIENTS -d${1}s --timeout 60s "http://127.0.0.1:$PORT/hash?cost=$COST" > "$TMP/flood" 2>&1 &
  FLOOD=$!
}

echo "== $CLIENTS clients looping /hash?cost=$COST, $ROUNDS rounds of ${DUR}s, $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-22s %5s %10s %10s %7s\n' page round alone_ms loaded_ms ratio
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b=="inf") print "inf"; else printf "%.2f", b/a}'; }
for page in $PAGES; do
  for r in $(seq 1 "$ROUNDS"); do
    set -- $(p50 "$page"); alone=$1
    flood $((DUR + 2)); sleep 1
    set -- $(p50 "$page"); loaded=$1; served=$2
    wait "$FLOOD"
    ok=$(awk '/requests in/ {print $1}' "$TMP/flood"); bad=$(awk '/Non-2xx/ {print $NF}' "$TMP/flood")
    echo "$page $r $alone $loaded $(ratio "$alone" "$loaded")" >> "$TMP/rounds"
    printf '%-22s %5s %10s %10s %7s   %s pages served under load; flood: %s answered, %s of them 503\n' \
      "$page" "$r" "$alone" "$loaded" "$(ratio "$alone" "$loaded")" "$served" "${ok:-0}" "${bad:-0}"
  done
done
med() { sed 's/^inf$/1e99/' | sort -g | awk '{v[NR]=$1} END{print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
for page in $PAGES; do
  echo "median $page: alone $(awk -v p="$page" '$1==p {print $3}' "$TMP/rounds" | med) ms, loaded $(awk -v p="$page" '$1==p {print $4}' "$TMP/rounds" | med) ms, ratio $(awk -v p="$page" '$1==p {print $5}' "$TMP/rounds" | med)"
done
