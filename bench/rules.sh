#!/usr/bin/env bash
# The rules example of seed 003 (issue 15): req/s, p99 latency and peak RSS of `galleon serve`
# answering GET /rules/match from 5,000 rules x 27 fields in each --rules-mode (shared: a snapshot,
# pool: a copy per worker thread, copy: a deep copy per request, the Elixir Agent pattern), at 200
# connections, then the in-process time of one match (`galleon rules-bench`). One table, one run.
#
# Loopback only, bounded: each mode runs DUR seconds (default 10) after a 2-second warm-up.
# Needs wrk (apt-get install wrk). Options: DUR, CONNS (200), THREADS (wrk's, 2), PORT (4815),
# GALLEON (a built binary; default: cargo build --release), RULES (default site/data/rules.json).
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${DUR:-10}
CONNS=${CONNS:-200}
THREADS=${THREADS:-2}
PORT=${PORT:-4815}
RULES=${RULES:-site/data/rules.json}
if [[ -z "${GALLEON:-}" ]]; then
    cargo build --release -q -p galleon
    GALLEON="${CARGO_TARGET_DIR:-target}/release/galleon"
fi
command -v wrk >/dev/null || { echo "rules.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d)
server=""
cleanup() {
    if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The query mix: 64 queries of 1 to 4 fields, values taken from rules spread over the set (the
# shapes of `galleon rules-bench`), each request the next one.
python3 - "$RULES" > "$work/mix.lua" <<'EOF'
import json, sys, urllib.parse
rules = json.load(open(sys.argv[1]))["rules"]
shapes = [["country", "channel", "tier"], ["product"], ["category", "active", "device"],
          ["currency", "segment", "new_customer", "min_age"]]
paths = []
for k in range(64):
    r = rules[(k * 7919) % len(rules)]
    q = []
    for f in shapes[k % len(shapes)]:
        v = r[f]
        v = ("true" if v else "false") if isinstance(v, bool) else str(v)
        q.append((f, v))
    paths.append("/rules/match?" + urllib.parse.urlencode(q))
print("local paths = {" + ",".join(json.dumps(p) for p in paths) + "}")
print("local i = 0")
print("request = function() i = i + 1; return wrk.format('GET', paths[i % #paths + 1]) end")
EOF

echo "# bench/rules.sh: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
echo "# $RULES ($(stat -c %s "$RULES") bytes); wrk -t$THREADS -c$CONNS -d${DUR}s, 64-query mix; server: galleon serve --events off"
declare -A rps p99 rss errs
for mode in shared pool copy; do
    "$GALLEON" serve --events off --addr "127.0.0.1:$PORT" --rules "$RULES" --rules-mode "$mode" \
        --rules-poll-ms 0 2> "$work/$mode.log" &
    server=$!
    for _ in $(seq 100); do
        grep -q "at http://" "$work/$mode.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "at http://" "$work/$mode.log" || { cat "$work/$mode.log" >&2; exit 1; }
    wrk -t"$THREADS" -c"$CONNS" -d2s -s "$work/mix.lua" "http://127.0.0.1:$PORT" > /dev/null
    wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency -s "$work/mix.lua" "http://127.0.0.1:$PORT" > "$work/$mode.wrk"
    rps[$mode]=$(awk '/^Requests\/sec/ {print $2}' "$work/$mode.wrk")
    p99[$mode]=$(awk '$1 == "99%" {print $2}' "$work/$mode.wrk")
    errs[$mode]=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$work/$mode.wrk")
    rss[$mode]=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$server/status")
    kill "$server"; wait "$server" 2>/dev/null || true; server=""
done

bench=$("$GALLEON" rules-bench --rules "$RULES")
match_us=$(sed -n 's/^per match, indexed[^:]*: \([0-9.]*\) us.*/\1/p' <<< "$bench")
scan_us=$(sed -n 's/^per match, scanning every rule instead: \([0-9.]*\) us/\1/p' <<< "$bench")
copy_ms=$(sed -n 's/^deep copy of the whole set[^:]*: \([0-9.]*\) ms/\1/p' <<< "$bench")

echo
printf '| mode | req/s | p99 latency | peak RSS (MB) | errors + non-2xx | req/s ÷ copy |\n'
printf '|---|---|---|---|---|---|\n'
for mode in shared pool copy; do
    ratio=$(awk -v a="${rps[$mode]}" -v b="${rps[copy]}" 'BEGIN {printf "%.0fx", a / b}')
    printf '| %s | %s | %s | %s | %s | %s |\n' "$mode" "${rps[$mode]}" "${p99[$mode]}" "${rss[$mode]}" "${errs[$mode]}" "$ratio"
done
echo
printf '| per match, in-process | time | vs the BEAM (persistent_term + match, 140 us) |\n'
printf '|---|---|---|\n'
printf '| indexed (read the query + intersect) | %s us | %sx faster |\n' "$match_us" "$(awk -v m="$match_us" 'BEGIN {printf "%.0f", 140 / m}')"
printf '| scan of every rule (no index) | %s us | %sx faster |\n' "$scan_us" "$(awk -v m="$scan_us" 'BEGIN {printf "%.1f", 140 / m}')"
printf '| deep copy of the set (what copy pays per request) | %s ms | |\n' "$copy_ms"
echo
echo "$bench" | sed 's/^/# /'
