# bench/pinning.sh: sourced (not run) by the HTTP bench scripts (pair.sh, http.sh, axum.sh): the
# pinned-core method. PIN=1 (the default): every server under `taskset -c 0`, the load generator
# (wrk, curl) under `taskset -c 1`, so each has a core of its own as with a client on another
# machine, and a server's CPU per response is its own work. PIN=0: both wherever the scheduler
# puts them (the runs before 2026-12-07). Fewer than 2 CPUs: unpinned, and said so.
# Sets SERVER_ON and CLIENT_ON (command prefixes, empty unpinned), PIN_NOTE (for a table's
# header), WRK_THREADS (1 pinned: the client has one core; 2 unpinned, as before); defines
# cpu_ticks and us_per_response.
# shellcheck shell=bash disable=SC2034
PIN=${PIN:-1}
SERVER_ON=()
CLIENT_ON=()
PIN_NOTE="unpinned (PIN=0)"
if [ "$PIN" = 1 ]; then
    if [ "$(nproc)" -lt 2 ]; then
        echo "$(basename "$0"): only $(nproc) CPU here: running unpinned" >&2
        PIN_NOTE="unpinned (only $(nproc) CPU)"
        PIN=0
    elif ! command -v taskset >/dev/null; then
        echo "$(basename "$0"): taskset is missing (util-linux), or PIN=0 for unpinned runs" >&2
        exit 1
    else
        SERVER_ON=(taskset -c 0)
        CLIENT_ON=(taskset -c 1)
        PIN_NOTE="servers on CPU 0, load generator on CPU 1"
    fi
elif [ "$PIN" != 0 ]; then
    echo "$(basename "$0"): PIN is 1 (pinned, the default) or 0, not $PIN" >&2
    exit 1
fi
if [ "$PIN" = 1 ]; then WRK_THREADS=${THREADS:-1}; else WRK_THREADS=${THREADS:-2}; fi

# CPU time (utime + stime, in clock ticks) process $1 has used so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
CLK_TCK=$(getconf CLK_TCK)

# Server CPU µs per response: ticks used over requests served ($1 $2), one decimal.
us_per_response() { awk -v d="$1" -v n="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", (n > 0 ? d / hz * 1e6 / n : 0) }'; }
