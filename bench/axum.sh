#!/usr/bin/env bash
# bench/axum.sh: galleon templates inside axum, against axum + askama and axum + minijinja, on
# loopback only.
#
#   bench/axum.sh                    # 5 s per cell, 5 rounds (about 10 minutes in all)
#   DUR=10 ROUNDS=7 bench/axum.sh    # longer
#   DOOM=0 STRACE=0 INSTR=0 bench/axum.sh    # req/s and CPU per response only
#   PIN=0 bench/axum.sh              # unpinned, wrk -t2 (the default before 2026-12-07)
#
# Servers (all axum 0.8 on hyper 1.x, release builds with fat LTO, TCP_NODELAY, 127.0.0.1):
#   - galleon: crates/axum/examples/site (galleon-axum: a render as a few owned Bytes frames
#     referencing the templates' text, content-length from the body's exact size);
#   - galleon-compiled: the same binary (a second process), its `/compiled/...` routes: the same
#     templates compiled into Rust by `#[derive(Template)]` (as askama compiles its own);
#   - askama, minijinja: bench/peers/axum-peers (render to a String, return Html(String)).
# Rows: /blah?iters=1000 (410 KB), /blah?iters=10 (4.1 KB), /big-table (100x100 integers).
# First every page is fetched from every server and compared: same status, same body bytes,
# same content-type and content-length; the run stops if any differs.
# Then wrk -t1 -c50 (pinned; -t2 unpinned) for DUR seconds per cell, the three servers interleaved within each round
# (their order rotating), ROUNDS rounds; the table shows median req/s, the median of the
# per-round ratios (each round's three cells run back to back, so a ratio within a round is
# steadier than a ratio of medians on a shared machine), and the server's CPU time per request
# (utime + stime from /proc over the same runs).
# Pinned by default (bench/pinning.sh): every server runs under `taskset -c 0` and wrk under
# `taskset -c 1`, so the client's cost (reading 410 KB a response costs it about as much as
# sending costs a server) comes from its own core and not from the server's, as with a client on
# another machine; PIN=0 (or fewer than 2 CPUs): wrk and the server share both cores and req/s
# mixes the two costs.
# Writes per response (STRACE=1): `strace -f -c` attached to each server while `wrk -t1 -c1`
# runs 2 s against it; the write-family calls (write, writev, sendto, sendmsg) over the
# requests wrk completed.
# User-space instructions per request (INSTR=1, needs valgrind): each server under callgrind,
# INSTR_N keep-alive requests per page after a warm-up; deterministic, unlike req/s here.
# Doom (DOOM=1): /doom?iters=10000000 (3.01 GB, streamed chunked) downloaded once with curl from a
# fresh galleon-axum process; its peak RSS (VmHWM) before and after.
#
# Needs: cargo, wrk, curl, taskset, strace, valgrind (Debian: apt-get install wrk curl strace
# valgrind).
set -euo pipefail

DUR=${DUR:-5}
ROUNDS=${ROUNDS:-5}
CONNS=50
DOOM=${DOOM:-1}
DOOM_ITERS=${DOOM_ITERS:-10000000}
STRACE=${STRACE:-1}
INSTR=${INSTR:-1}
INSTR_N=${INSTR_N:-300}
P_INSTR=${P_INSTR:-4205}
P_GALLEON=${P_GALLEON:-4201}
P_ASKAMA=${P_ASKAMA:-4202}
P_JINJA=${P_JINJA:-4203}
P_DOOM=${P_DOOM:-4204}
P_COMPILED=${P_COMPILED:-4206}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/pinning.sh
source "$ROOT/bench/pinning.sh"
THREADS=$WRK_THREADS
for tool in wrk curl cargo; do
    command -v "$tool" >/dev/null || { echo "bench/axum.sh: $tool is missing" >&2; exit 1; }
done
if [ "$STRACE" = 1 ] && ! command -v strace >/dev/null; then
    echo "bench/axum.sh: strace is missing (or STRACE=0)" >&2
    exit 1
fi
if [ "$INSTR" = 1 ] && ! command -v valgrind >/dev/null; then
    echo "bench/axum.sh: valgrind is missing (or INSTR=0)" >&2
    exit 1
fi

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
cargo build --release -q -p galleon-axum --example site
cargo build --release -q --manifest-path bench/peers/axum-peers/Cargo.toml \
    --target-dir "$ROOT/bench/peers/axum-peers/target"
GALLEON_AXUM=$TARGET_DIR/release/examples/site
PEERS=$ROOT/bench/peers/axum-peers/target/release/axum-peers

wait_port() { # port
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench/axum.sh: nothing listening on port $1" >&2
    exit 1
}

declare -A PORT PID
start() { # name port command...
    local name=$1 port=$2
    shift 2
    "${SERVER_ON[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.log" &
    PID[$name]=$!
    PIDS+=("$!")
    PORT[$name]=$port
    wait_port "$port"
}
start galleon "$P_GALLEON" "$GALLEON_AXUM" "127.0.0.1:$P_GALLEON" "$ROOT/site"
start askama "$P_ASKAMA" "$PEERS" askama "127.0.0.1:$P_ASKAMA" "$ROOT/site"
start minijinja "$P_JINJA" "$PEERS" minijinja "127.0.0.1:$P_JINJA" "$ROOT/site"
start galleon-compiled "$P_COMPILED" "$GALLEON_AXUM" "127.0.0.1:$P_COMPILED" "$ROOT/site"
SERVERS=(galleon galleon-compiled askama minijinja)
# Where each server has the rows' pages: the compiled ones under /compiled.
declare -A PREFIX=([galleon]="" [galleon-compiled]=/compiled [askama]="" [minijinja]="")

ROWS=("Blah 400 KB|/blah?iters=1000" "Blah 4 KB|/blah?iters=10" "big-table|/big-table")

echo "== checking that every server sends the same bytes" >&2
for row in "${ROWS[@]}"; do
    target=${row#*|}
    for s in "${SERVERS[@]}"; do
        curl -s -D "$TMP/$s.head" -o "$TMP/$s.body" "http://127.0.0.1:${PORT[$s]}${PREFIX[$s]}$target"
        # Status line and headers but date, lowercased, sorted.
        tr -d '\r' <"$TMP/$s.head" | grep -v '^$' | tr '[:upper:]' '[:lower:]' | grep -v '^date:' | sort >"$TMP/$s.hdrs"
        grep -q '^date:' <(tr -d '\r' <"$TMP/$s.head" | tr '[:upper:]' '[:lower:]') \
            || { echo "bench/axum.sh: $s sends no date header on $target" >&2; exit 1; }
    done
    for s in galleon-compiled askama minijinja; do
        if ! cmp -s "$TMP/galleon.body" "$TMP/$s.body"; then
            echo "bench/axum.sh: $s's body for $target differs from galleon's:" >&2
            cmp "$TMP/galleon.body" "$TMP/$s.body" >&2 || true
            exit 1
        fi
        if ! diff -u "$TMP/galleon.hdrs" "$TMP/$s.hdrs" >&2; then
            echo "bench/axum.sh: $s's headers for $target differ from galleon's" >&2
            exit 1
        fi
    done
    printf '%-14s %-18s %8d bytes, identical; headers: %s\n' "${row%%|*}" "$target" \
        "$(stat -c %s "$TMP/galleon.body")" "$(cut -d: -f1 "$TMP/galleon.hdrs" | tr '\n' ' ')date" >&2
done

ticks() { cpu_ticks "$1"; } # bench/pinning.sh
HZ=$CLK_TCK

declare -A RPS CPU RATIO_A RATIO_M RATIO_CA LAST
TIMEOUTS=""
for round in $(seq 1 "$ROUNDS"); do
    for row in "${ROWS[@]}"; do
        name=${row%%|*}
        target=${row#*|}
        # Rotate the order each round, so no server always runs first (or after a given one).
        k=$((round % ${#SERVERS[@]}))
        order=("${SERVERS[@]:$k}" "${SERVERS[@]:0:$k}")
        for s in "${order[@]}"; do
            t0=$(ticks "${PID[$s]}")
            "${CLIENT_ON[@]}" wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" "http://127.0.0.1:${PORT[$s]}${PREFIX[$s]}$target" >"$TMP/wrk.out"
            t1=$(ticks "${PID[$s]}")
            rps=$(awk '/^Requests\/sec:/ { print $2 }' "$TMP/wrk.out")
            reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.out")
            # A wrong answer or a broken connection stops the run; a timeout (a request over
            # wrk's 2 s, which a machine shared with other work can cause) is reported.
            errs=$(awk '/Non-2xx/ || (/Socket errors/ && ($4 + $6 + $8) > 0)' "$TMP/wrk.out" | tr -d ',')
            [ -z "$errs" ] || { echo "bench/axum.sh: $s $target: $errs" >&2; exit 1; }
            timeouts=$(awk '/Socket errors/ { print $10 }' "$TMP/wrk.out")
            [ -z "$timeouts" ] || TIMEOUTS+="  round $round, $name, $s: $timeouts requests timed out (over 2 s)"$'\n'
            RPS["$name|$s"]+=" $rps"
            CPU["$name|$s"]+=" $(awk -v d=$((t1 - t0)) -v n="$reqs" -v hz="$HZ" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }')"
            printf 'round %d  %-12s %-16s %10.1f req/s\n' "$round" "$name" "$s" "$rps" >&2
            LAST[$s]=$rps
        done
        RATIO_A["$name"]+=" $(awk -v x="${LAST[galleon]}" -v y="${LAST[askama]}" 'BEGIN { printf "%.3f", x / y }')"
        RATIO_M["$name"]+=" $(awk -v x="${LAST[galleon]}" -v y="${LAST[minijinja]}" 'BEGIN { printf "%.3f", x / y }')"
        RATIO_CA["$name"]+=" $(awk -v x="${LAST[galleon-compiled]}" -v y="${LAST[askama]}" 'BEGIN { printf "%.3f", x / y }')"
    done
done

declare -A WRITES
if [ "$STRACE" = 1 ]; then
    echo "== write calls per response (strace -f -c, wrk -t1 -c1 -d2s)" >&2
    for row in "${ROWS[@]}"; do
        name=${row%%|*}
        target=${row#*|}
        for s in "${SERVERS[@]}"; do
            strace -f -qq -c -e trace=write,writev,sendto,sendmsg -o "$TMP/strace.out" -p "${PID[$s]}" &
            st=$!
            sleep 1
            "${CLIENT_ON[@]}" wrk -t1 -c1 -d2s "http://127.0.0.1:${PORT[$s]}${PREFIX[$s]}$target" >"$TMP/wrk.out"
            kill -INT "$st"
            wait "$st" || true
            reqs=$(awk '/requests in/ { print $1 }' "$TMP/wrk.out")
            calls=$(awk '$NF ~ /^(write|writev|sendto|sendmsg)$/ { n += $4 } END { print n + 0 }' "$TMP/strace.out")
            detail=$(awk '$NF ~ /^(write|writev|sendto|sendmsg)$/ { printf "%s%s %s", sep, $NF, $4; sep = ", " }' "$TMP/strace.out")
            WRITES["$name|$s"]=$(awk -v c="$calls" -v n="$reqs" 'BEGIN { printf "%.2f", c / n }')
            printf '%-12s %-16s %6d requests, %7d calls (%s): %s per response\n' \
                "$name" "$s" "$reqs" "$calls" "$detail" "${WRITES["$name|$s"]}" >&2
        done
    done
fi

declare -A INSTRS
if [ "$INSTR" = 1 ]; then
    echo "== user-space instructions per request (callgrind, $INSTR_N keep-alive requests)" >&2
    # N requests on one keep-alive connection, each read to the end of its content-length.
    client() { # n target
        python3 - "$1" "$2" "$P_INSTR" <<'PY'
import socket, sys
n, target, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
req = f"GET {target} HTTP/1.1\r\nhost: bench\r\n\r\n".encode()
for _ in range(n):
    s.sendall(req)
    got = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            sys.exit("connection closed")
        got += chunk
        end = got.find(b"\r\n\r\n")
        if end >= 0:
            head = got[:end].lower()
            length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
            if len(got) >= end + 4 + length:
                break
PY
    }
    for s in "${SERVERS[@]}"; do
        case $s in
            galleon | galleon-compiled) cmd=("$GALLEON_AXUM" "127.0.0.1:$P_INSTR" "$ROOT/site") ;;
            *) cmd=("$PEERS" "$s" "127.0.0.1:$P_INSTR" "$ROOT/site") ;;
        esac
        for row in "${ROWS[@]}"; do
            name=${row%%|*}
            target=${PREFIX[$s]}${row#*|}
            rm -f "$TMP"/cg.*
            valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" "${cmd[@]}" >/dev/null 2>"$TMP/vg.log" &
            vpid=$!
            up=0
            for _ in $(seq 1 300); do
                curl -sf -o /dev/null "http://127.0.0.1:$P_INSTR$target" && { up=1; break; }
                sleep 0.2
            done
            [ "$up" = 1 ] || { echo "bench/axum.sh: $s under valgrind did not answer" >&2; exit 1; }
            client 100 "$target"
            callgrind_control -z "$vpid" >/dev/null 2>&1
            client "$INSTR_N" "$target"
            callgrind_control -d "$vpid" >/dev/null 2>&1
            kill "$vpid"
            wait "$vpid" 2>/dev/null || true
            total=$(cat "$TMP"/cg.*.1 | awk '/^summary:/ { s += $2 } END { print s }')
            INSTRS["$name|$s"]=$((total / INSTR_N))
            printf '%-12s %-16s %9d instructions per request\n' "$name" "$s" "${INSTRS["$name|$s"]}" >&2
        done
    done
fi

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
median3() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "axum 0.8 + hyper 1.x, wrk -t$THREADS -c$CONNS, ${DUR} s a cell, $ROUNDS rounds interleaved, medians, $PIN_NOTE; $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates/axum crates/iolist bench/peers/axum-peers 2>/dev/null || echo ' + uncommitted changes')"
echo
printf '| page | axum+galleon req/s | axum+galleon compiled req/s | axum+askama req/s | axum+minijinja req/s | galleon ÷ askama | compiled ÷ askama | galleon ÷ minijinja | CPU µs/req (galleon / compiled / askama / minijinja) | user instructions/req (galleon / compiled / askama / minijinja) | writes/response (galleon / compiled / askama / minijinja) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for row in "${ROWS[@]}"; do
    name=${row%%|*}
    g=$(median "${RPS["$name|galleon"]}")
    c=$(median "${RPS["$name|galleon-compiled"]}")
    a=$(median "${RPS["$name|askama"]}")
    m=$(median "${RPS["$name|minijinja"]}")
    printf '| %s | %s | %s | %s | %s | %.2fx (%.2fx) | %.2fx (%.2fx) | %.2fx (%.2fx) | %s / %s / %s / %s | %s / %s / %s / %s | %s / %s / %s / %s |\n' "$name" "$g" "$c" "$a" "$m" \
        "$(median3 "${RATIO_A["$name"]}")" "$(awk -v x="$g" -v y="$a" 'BEGIN { print x / y }')" \
        "$(median3 "${RATIO_CA["$name"]}")" "$(awk -v x="$c" -v y="$a" 'BEGIN { print x / y }')" \
        "$(median3 "${RATIO_M["$name"]}")" "$(awk -v x="$g" -v y="$m" 'BEGIN { print x / y }')" \
        "$(median "${CPU["$name|galleon"]}")" "$(median "${CPU["$name|galleon-compiled"]}")" "$(median "${CPU["$name|askama"]}")" "$(median "${CPU["$name|minijinja"]}")" \
        "${INSTRS["$name|galleon"]:--}" "${INSTRS["$name|galleon-compiled"]:--}" "${INSTRS["$name|askama"]:--}" "${INSTRS["$name|minijinja"]:--}" \
        "${WRITES["$name|galleon"]:--}" "${WRITES["$name|galleon-compiled"]:--}" "${WRITES["$name|askama"]:--}" "${WRITES["$name|minijinja"]:--}"
done
echo
echo "Ratios: median of the per-round ratios (in parentheses: ratio of the median req/s)."
[ -z "$TIMEOUTS" ] || printf 'wrk timeouts:\n%s' "$TIMEOUTS"
echo "req/s of each round, and the per-round ratios:"
for row in "${ROWS[@]}"; do
    for s in "${SERVERS[@]}"; do
        printf '  %-12s %-10s %s\n' "${row%%|*}" "$s" "${RPS["${row%%|*}|$s"]}"
    done
    printf '  %-12s %-10s %s\n' "${row%%|*}" "÷ askama" "${RATIO_A["${row%%|*}"]}"
    printf '  %-12s %-10s %s\n' "${row%%|*}" "÷ minijinja" "${RATIO_M["${row%%|*}"]}"
    printf '  %-12s %-10s %s\n' "${row%%|*}" "compiled ÷ askama" "${RATIO_CA["${row%%|*}"]}"
done

if [ "$DOOM" = 1 ]; then
    echo
    start doom "$P_DOOM" "$GALLEON_AXUM" "127.0.0.1:$P_DOOM" "$ROOT/site"
    # Warm up: the runtime's threads, the blocking pool, one streamed page.
    curl -s -o /dev/null "http://127.0.0.1:$P_DOOM/doom?iters=100000"
    hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/${PID[doom]}/status"; }
    before=$(hwm)
    out=$("${CLIENT_ON[@]}" curl -s -o /dev/null -w '%{http_code} %{size_download} %{time_total}' \
        "http://127.0.0.1:$P_DOOM/doom?iters=$DOOM_ITERS")
    after=$(hwm)
    read -r code size secs <<<"$out"
    [ "$code" = 200 ] || { echo "bench/axum.sh: /doom answered $code" >&2; exit 1; }
    awk -v it="$DOOM_ITERS" -v size="$size" -v secs="$secs" -v b="$before" -v a="$after" 'BEGIN {
        printf "/doom?iters=%d through axum + galleon: %d bytes in %.2f s (%.1f MB/s), peak RSS %.1f MiB before, %.1f MiB after (+%.1f MiB)\n",
            it, size, secs, size / secs / 1e6, b / 1024, a / 1024, (a - b) / 1024 }'
    [ "$size" = "$((DOOM_ITERS * 301))" ] || { echo "bench/axum.sh: /doom sent $size bytes, not $((DOOM_ITERS * 301))" >&2; exit 1; }
fi
