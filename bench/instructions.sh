#!/usr/bin/env bash
# bench/instructions.sh: user-space instructions per request, galleon vs hyper-peer (and an older
# galleon build), counted by valgrind's callgrind over a fixed number of keep-alive requests.
# Unlike req/s on a shared 2-core VM, the count is the same from run to run, so it shows a
# change of a few percent in the request path that wrk's noise hides. Kernel work (recv, writev)
# is not counted: it is the same for both servers (one recv and one writev per request).
#
#   bench/instructions.sh                                   # /blah?iters=10, 4,000 requests
#   BASELINE=/path/to/older/galleon N=2000 TARGET='/blah?iters=1000' bench/instructions.sh
#   STATS_OFF=1 HYPER=0 bench/instructions.sh   # galleon with statistics on and off, no hyper
#
# Needs valgrind (Debian) and python3; serves on 127.0.0.1:4601 only.
set -euo pipefail
N=${N:-4000}
TARGET=${TARGET:-/blah?iters=10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p galleon
[ "${HYPER:-1}" = 0 ] || cargo build --release -q --manifest-path bench/peers/hyper-peer/Cargo.toml
TMP=$(mktemp -d)
VPID=""
trap '[ -z "$VPID" ] || kill "$VPID" 2>/dev/null || true; rm -rf "$TMP"' EXIT
"${CARGO_TARGET_DIR:-target}"/release/galleon serve --addr 127.0.0.1:4600 --events off 2>/dev/null & pid=$!
for _ in $(seq 200); do curl -sf "http://127.0.0.1:4600$TARGET" -o "$TMP/body" && break; sleep 0.05; done
kill "$pid"; wait "$pid" 2>/dev/null || true

# Requests on one keep-alive connection, each read to the end of its content-length.
client() {
    python3 - "$1" "$TARGET" <<'PY'
import socket, sys
n, target = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", 4601))
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

# count NAME CMD...: starts CMD under callgrind, warms up, zeroes the counters, sends N requests,
# dumps, prints the instructions per request.
count() {
    local name=$1; shift
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$name.%p" "$@" >/dev/null 2>"$TMP/vg.$name.log" &
    local vpid=$!
    VPID=$vpid
    for _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/4601) 2>/dev/null && break; sleep 0.1; done
    client 300
    callgrind_control -z "$vpid" >/dev/null 2>&1
    client "$N"
    callgrind_control -d "$vpid" >/dev/null 2>&1
    kill "$vpid"; wait "$vpid" 2>/dev/null || true
    local total
    total=$(cat "$TMP"/cg."$name".*.1 | awk '/^summary:/ {s += $2} END {print s}')
    printf '%-10s %8d instructions per request\n' "$name" $((total / N))
}

echo "== $TARGET, $N keep-alive requests, user-space instructions (callgrind), $(date -u +%FT%TZ)"
[ "${HYPER:-1}" = 0 ] || count hyper "${CARGO_TARGET_DIR:-bench/peers/hyper-peer/target}"/release/hyper-peer 127.0.0.1:4601 "$TMP/body"
count galleon "${CARGO_TARGET_DIR:-target}"/release/galleon serve --site "$ROOT/site" --addr 127.0.0.1:4601 --events off
if [ -n "${STATS_OFF:-}" ]; then
    count stats-off "${CARGO_TARGET_DIR:-target}"/release/galleon serve --site "$ROOT/site" --addr 127.0.0.1:4601 --events off --stats off
fi
if [ -n "${BASELINE:-}" ]; then
    count baseline "$BASELINE" serve --site "$ROOT/site" --addr 127.0.0.1:4601 --events off
fi
