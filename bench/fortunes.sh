#!/usr/bin/env bash
# bench/fortunes.sh: TechEmpower's Fortunes (test type 4), galleon against axum + askama +
# tokio-postgres, pinned, on loopback only.
#
#   bench/fortunes.sh                          # 5 rounds of 4 s per contender
#   ROUNDS=7 DUR=10 CONNS=256 bench/fortunes.sh
#   PG_URL=postgres://postgres@127.0.0.1:5432/test PG_CONNS=1 bench/fortunes.sh
#
# Contenders (release builds, fat LTO, one request worker each: `taskset -c 0` leaves them one
# core, and both tokio runtimes size themselves by the affinity mask):
#   - galleon-pg:     `galleon serve --fortunes-db $PG_URL` (tokio-postgres, one prepared
#                     statement per connection, $PG_CONNS connections, queries pipelined);
#   - axum-pg:        bench/peers/axum-peers `fortunes` (axum + askama + tokio-postgres, the same
#                     work: $PG_CONNS connections, one prepared statement each);
#   - galleon-sqlite: `galleon serve` with its default, embedded SQLite in memory.
# galleon runs with `--events off` (no event store file) and otherwise its defaults (statistics
# on); $GALLEON_FLAGS adds flags to both galleon contenders.
# First each contender's page is fetched and compared with crates/site/tests/fixtures/
# fortunes.html (after mapping `&#34;` `&#60;` `&#62;` to `&quot;` `&lt;` `&gt;`: askama writes
# the numeric forms, galleon the named ones, and TechEmpower's verifier normalizes both to the
# named ones), and its `server`, `date`, `content-type` and
# `content-length` headers are checked; the run stops on any difference.
# Then `wrk -t1 -c$CONNS -d${DUR}s` from core 1 (`taskset -c 1`) per contender, the contenders
# interleaved (order rotating) over ROUNDS rounds. Per cell: req/s, the server's CPU per
# response (utime + stime of its process from /proc/PID/stat around the run, over the requests
# wrk completed), and PostgreSQL's (every `postgres` process's utime + stime, same way).
# PostgreSQL is not pinned: it shares both cores with the server and wrk, and sets the req/s of
# every contender on it, so the server's CPU per response is the figure to compare. The table
# shows medians and the median of the per-round ratios axum-pg CPU / galleon-pg CPU.
#
# Needs: cargo, wrk, curl, taskset, a PostgreSQL at $PG_URL (the `fortune` table is created and
# seeded there by galleon if missing).
set -euo pipefail

DUR=${DUR:-4}
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-50}
PG_URL=${PG_URL:-postgres://postgres@127.0.0.1:5432/test}
PG_CONNS=${PG_CONNS:-1}
GALLEON_FLAGS=${GALLEON_FLAGS:-}
P_GPG=${P_GPG:-4301}
P_AXUM=${P_AXUM:-4302}
P_GSQL=${P_GSQL:-4303}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
for tool in wrk curl cargo taskset; do
    command -v "$tool" >/dev/null || { echo "bench/fortunes.sh: $tool is missing" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "bench/fortunes.sh: needs 2 cores (server on 0, wrk on 1)" >&2; exit 1; }
EXPECTED=$ROOT/crates/site/tests/fixtures/fortunes.html

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
echo "== building (release)" >&2
cargo build --release -q -p galleon
cargo build --release -q --manifest-path bench/peers/axum-peers/Cargo.toml \
    --target-dir "$ROOT/bench/peers/axum-peers/target"
GALLEON=$TARGET_DIR/release/galleon
PEERS=$ROOT/bench/peers/axum-peers/target/release/axum-peers

wait_page() { # port
    for _ in $(seq 1 300); do
        curl -sf -o /dev/null "http://127.0.0.1:$1/fortunes" && return 0
        sleep 0.05
    done
    echo "bench/fortunes.sh: nothing answers /fortunes on port $1" >&2
    exit 1
}

declare -A PORT PID
start() { # name port command...
    local name=$1 port=$2
    shift 2
    taskset -c 0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.log" &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    wait_page "$port"
}
# shellcheck disable=SC2086 # GALLEON_FLAGS is a list of flags
start galleon-pg "$P_GPG" "$GALLEON" serve --addr "127.0.0.1:$P_GPG" --site "$ROOT/site" \
    --events off --fortunes-db "$PG_URL" --fortunes-connections "$PG_CONNS" $GALLEON_FLAGS
# The peer reads the table galleon-pg made sure of.
start axum-pg "$P_AXUM" "$PEERS" fortunes "127.0.0.1:$P_AXUM" "$PG_URL" "$PG_CONNS"
# shellcheck disable=SC2086
start galleon-sqlite "$P_GSQL" "$GALLEON" serve --addr "127.0.0.1:$P_GSQL" --site "$ROOT/site" \
    --events off $GALLEON_FLAGS
SERVERS=(galleon-pg axum-pg galleon-sqlite)

echo "== checking every contender's page against $(basename "$EXPECTED")" >&2
for s in "${SERVERS[@]}"; do
    curl -s -D "$TMP/$s.head" -o "$TMP/$s.body" "http://127.0.0.1:${PORT[$s]}/fortunes"
    sed 's/&#34;/\&quot;/g; s/&#60;/\&lt;/g; s/&#62;/\&gt;/g' "$TMP/$s.body" >"$TMP/$s.norm"
    if ! cmp -s "$EXPECTED" "$TMP/$s.norm"; then
        echo "bench/fortunes.sh: $s's page differs from the expected page:" >&2
        cmp "$EXPECTED" "$TMP/$s.norm" >&2 || true
        exit 1
    fi
    head=$(tr -d '\r' <"$TMP/$s.head" | tr 'A-Z' 'a-z')
    for h in server date "content-type: text/html; charset=utf-8" "content-length: $(stat -c %s "$TMP/$s.body")"; do
        grep -q "^$h" <<<"$head" || { echo "bench/fortunes.sh: $s: no \"$h\" header" >&2; exit 1; }
    done
    printf '%-15s %5d bytes, the expected page; %s\n' "$s" "$(stat -c %s "$TMP/$s.body")" \
        "$(grep -E '^(server|content-type):' <<<"$head" | tr '\n' ' ')" >&2
done

ticks() { # pid: utime + stime in clock ticks
    awk '{ print $14 + $15 }' "/proc/$1/stat"
}
pg_ticks() { # every postgres process's utime + stime
    local sum=0 p t
    for p in $(pgrep -x postgres || true); do
        t=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)
        sum=$((sum + t))
    done
    echo "$sum"
}
HZ=$(getconf CLK_TCK)
per_response() { # ticks requests
    awk -v d="$1" -v n="$2" -v hz="$HZ" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }'
}

declare -A RPS CPU PGCPU LAST
RATIO=""
TIMEOUTS=""
for round in $(seq 1 "$ROUNDS"); do
    k=$((round % ${#SERVERS[@]}))
    order=("${SERVERS[@]:$k}" "${SERVERS[@]:0:$k}")
    for s in "${order[@]}"; do
        t0=$(ticks "${PID[$s]}")
        p0=$(pg_ticks)
        taskset -c 1 wrk -t1 -c"$CONNS" -d"${DUR}s" "http://127.0.0.1:${PORT[$s]}/fortunes" >"$TMP/wrk.out"
        t1=$(ticks "${PID[$s]}")
        p1=$(pg_ticks)
        rps=$(awk '/^Requests\/sec:/ { print $2 }' "$TMP/wrk.out")
        reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.out")
        errs=$(awk '/Non-2xx/ || (/Socket errors/ && ($4 + $6 + $8) > 0)' "$TMP/wrk.out" | tr -d ',')
        [ -z "$errs" ] || { echo "bench/fortunes.sh: $s: $errs" >&2; exit 1; }
        timeouts=$(awk '/Socket errors/ { print $10 }' "$TMP/wrk.out")
        [ -z "$timeouts" ] || TIMEOUTS+="  round $round, $s: $timeouts requests timed out (over 2 s)"$'\n'
        cpu=$(per_response $((t1 - t0)) "$reqs")
        RPS[$s]+=" $rps"
        CPU[$s]+=" $cpu"
        PGCPU[$s]+=" $(per_response $((p1 - p0)) "$reqs")"
        LAST[$s]=$cpu
        printf 'round %d  %-15s %9.1f req/s  %6.1f us CPU/response\n' "$round" "$s" "$rps" "$cpu" >&2
    done
    RATIO+=" $(awk -v a="${LAST[axum-pg]}" -v g="${LAST[galleon-pg]}" 'BEGIN { printf "%.3f", a / g }')"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "Fortunes: wrk -t1 -c$CONNS, ${DUR}s x $ROUNDS interleaved rounds, server on core 0, wrk on core 1,"
echo "PostgreSQL unpinned ($PG_CONNS connection(s) per PostgreSQL contender); medians (all rounds)"
echo
printf '| %-15s | %9s | %22s | %18s |\n' contender "req/s" "server CPU us/response" "PostgreSQL CPU us/r"
printf '|-%-15s-|-%9s-|-%22s-|-%18s-|\n' --------------- --------- ---------------------- ------------------
for s in "${SERVERS[@]}"; do
    printf '| %-15s | %9.0f | %22s | %18s |\n' "$s" "$(median <<<"${RPS[$s]}")" \
        "$(median <<<"${CPU[$s]}") ($(echo "${CPU[$s]}" | xargs))" "$(median <<<"${PGCPU[$s]}")"
done
echo
echo "axum-pg CPU / galleon-pg CPU per response, median of the rounds' ratios: $(median <<<"$RATIO") ($(echo "$RATIO" | xargs))"
[ -z "$TIMEOUTS" ] || printf 'timeouts:\n%s' "$TIMEOUTS"
