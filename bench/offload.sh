#!/usr/bin/env bash
# bench/offload.sh: where offloading CPU work pays (issue 14, seed 001), in one run, loopback only.
#
#   bench/offload.sh                      # 3 rounds of 3 s per cell (about 6 minutes)
#   ROUNDS=5 DUR=5 bench/offload.sh       # longer
#   HOL=0 bench/offload.sh                # only the /seal table
#   HOPS=0 bench/offload.sh               # without the hop table (part 1)
#   SEAL=0 bench/offload.sh               # without the /seal table (part 2)
#
# 1. The hop itself: `cargo bench -p galleon-offload --features peers --bench hops` (galleon's
#    pool vs spawn_blocking vs rayon + oneshot, and the two one-way hops), its table printed first;
# 2. /seal?bytes=N (XChaCha20-Poly1305 of N bytes, the seed's libsodium secretbox case) at 64 B,
#    1 KB, 8 KB, 64 KB and 1 MB, served by three galleons that differ only in `--offload`
#    (inline, offload, adaptive), wrk -t2 -c8, cells interleaved round-robin, medians of rounds;
#    then adaptive / the better of the other two, and the size where adaptive switches (from the
#    adaptive server's loopback-only /_galleon/offload).
# 3. Head-of-line: p99 of /blah?iters=1 and /static/robots.txt (wrk -t1 -c2 --latency) alone,
#    then while other clients keep /hash?cost=1 (Argon2id, ~10+ ms a job) and /blah?iters=1000
#    (410 KB pages) busy; per policy, loaded p99 / unloaded p99.
#
# Needs cargo, wrk and curl (Debian: apt-get install wrk curl).
set -euo pipefail
DUR=${DUR:-3}
ROUNDS=${ROUNDS:-3}
HOL=${HOL:-1}
SIZES=${SIZES:-"64 1024 8192 65536 1048576"}
POLICIES=(inline offload adaptive)
PORT0=${PORT0:-4401}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
for tool in wrk curl cargo; do
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

if [ "${HOPS:-1}" = 1 ]; then
    echo "== 1. the hop itself (cargo bench -p galleon-offload --features peers --bench hops)"
    cargo bench -q -p galleon-offload --features peers --bench hops 2>/dev/null |
        sed -n '1,/^target:/p'
    echo
fi

echo "== building (release)" >&2
cargo build --release -q -p galleon
GALLEON=$ROOT/target/release/galleon

wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench/offload.sh: nothing listening on port $1" >&2
    exit 1
}

port_of() { # policy index
    echo $((PORT0 + $1))
}

for i in "${!POLICIES[@]}"; do
    "$GALLEON" serve --addr "127.0.0.1:$(port_of "$i")" --events off --offload "${POLICIES[$i]}" \
        2>"$TMP/galleon.$i.log" &
    PIDS+=($!)
done
for i in "${!POLICIES[@]}"; do wait_port "$(port_of "$i")"; done

rps() { # port path
    wrk -t2 -c8 -d"${DUR}s" "http://127.0.0.1:$1$2" | awk '/^Requests\/sec/ {print $2}'
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

if [ "${SEAL:-1}" = 1 ]; then
echo "== /seal, $ROUNDS rounds of ${DUR}s per cell, wrk -t2 -c8, $(nproc) cores, $(date -u +%FT%TZ), $(git rev-parse --short HEAD)"
# Warm up: every server sees every size, so adaptive has estimates before it is measured.
for size in $SIZES; do
    for i in "${!POLICIES[@]}"; do
        wrk -t1 -c2 -d1s "http://127.0.0.1:$(port_of "$i")/seal?bytes=$size" >/dev/null
    done
done
for r in $(seq 1 "$ROUNDS"); do
    for size in $SIZES; do
        # Rotate the order per round so no policy always runs first.
        for k in 0 1 2; do
            i=$(((k + r) % 3))
            rps "$(port_of "$i")" "/seal?bytes=$size" >>"$TMP/seal.$size.$i"
        done
    done
    echo "   round $r done" >&2
done
printf '%10s %12s %12s %12s %22s\n' bytes inline offload adaptive 'adaptive / better'
for size in $SIZES; do
    m=()
    for i in 0 1 2; do m+=("$(median <"$TMP/seal.$size.$i")"); done
    printf '%10s %12.0f %12.0f %12.0f %22s\n' "$size" "${m[0]}" "${m[1]}" "${m[2]}" \
        "$(awk -v a="${m[2]}" -v b="${m[0]}" -v c="${m[1]}" 'BEGIN { m = b > c ? b : c; printf "%.3f", a / m }')"
done
echo "adaptive's switch point for seal (bytes; smaller sizes run inline):"
curl -sf "http://127.0.0.1:$(port_of 2)/_galleon/offload" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); [print("  ", k["name"], k.get("switch_point")) for k in d["kinds"] if k["name"] == "seal"]'

fi

[ "$HOL" = 1 ] || exit 0

p99() { # port path -> ms
    wrk -t1 -c2 -d"${DUR}s" --latency "http://127.0.0.1:$1$2" |
        awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 } print v }'
}

echo
echo "== head-of-line: p99 (ms) of light routes alone and while /hash?cost=1 (4 clients) and /blah?iters=1000 (2 clients) run"
printf '%-22s %-9s %10s %10s %8s\n' route policy alone loaded ratio
for i in 0 2 1; do
    port=$(port_of "$i")
    for path in "/blah?iters=1" "/static/robots.txt"; do
        alone=()
        loaded=()
        for r in $(seq 1 "$ROUNDS"); do
            alone+=("$(p99 "$port" "$path")")
            # The load's clients run at nice 19: they stand for machines elsewhere, and on these
            # 2 cores the measuring client would otherwise wait for them, not for the server.
            nice -n 19 wrk -t1 -c4 -d$((DUR + 2))s "http://127.0.0.1:$port/hash?cost=1" >/dev/null &
            l1=$!
            nice -n 19 wrk -t1 -c2 -d$((DUR + 2))s "http://127.0.0.1:$port/blah?iters=1000" >/dev/null &
            l2=$!
            sleep 1
            loaded+=("$(p99 "$port" "$path")")
            wait "$l1" "$l2"
        done
        a=$(printf '%s\n' "${alone[@]}" | median)
        l=$(printf '%s\n' "${loaded[@]}" | median)
        printf '%-22s %-9s %10.3f %10.3f %8s\n' "$path" "${POLICIES[$i]}" "$a" "$l" \
            "$(awk -v a="$a" -v l="$l" 'BEGIN { printf "%.2f", l / a }')"
    done
done

# The floor: the same light routes while two CPU hogs that are not galleon (nice 19, bounded)
# keep both cores busy. Any CPU-bound work on these 2 cores costs the light routes this much;
# what a policy adds on top of it is galleon's.
port=$(port_of 2)
for path in "/blah?iters=1" "/static/robots.txt"; do
    alone=()
    loaded=()
    for r in $(seq 1 "$ROUNDS"); do
        alone+=("$(p99 "$port" "$path")")
        hogs=()
        for _ in 1 2; do
            timeout $((DUR + 2)) nice -n 19 python3 -c 'while True: pass' &
            hogs+=($!)
        done
        sleep 1
        loaded+=("$(p99 "$port" "$path")")
        wait "${hogs[@]}" || true
    done
    a=$(printf '%s\n' "${alone[@]}" | median)
    l=$(printf '%s\n' "${loaded[@]}" | median)
    printf '%-22s %-9s %10.3f %10.3f %8s\n' "$path" "floor" "$a" "$l" \
        "$(awk -v a="$a" -v l="$l" 'BEGIN { printf "%.2f", l / a }')"
done
echo "(floor: two nice-19 CPU hogs that are not galleon instead of the load; the load's clients run at nice 19)"
