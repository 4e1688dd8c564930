#!/usr/bin/env python3
"""bench/slow_readers.py: can cheap slow clients exhaust galleon? (issue 13's benchmark)

Starts `galleon serve` (release build), measures the latency of `GET /static/robots.txt` and
`GET /streams/bench-1` alone, then while N clients (default 1,000) each download `/doom`
reading about 1 KB a second, then watches the server's RSS return after they leave, then
measures alone once more (the unloaded figures pool both quiet rounds). Prints one table.
Loopback only; every loop is bounded in count and time.

The loaded figures come in two phases. While the readers connect, the server fills each one's
socket buffers as fast as the kernel takes them (a few MB per connection on loopback, seconds
of CPU for 1,000): that is 1,000 fast downloads, measured as "opening". Once the buffers are
full the readers are slow, and the server only tops them up: "slow", the target's phase, is
measured after the server's CPU has settled.

    python3 bench/slow_readers.py                 # 1,000 readers
    READERS=200 python3 bench/slow_readers.py
    GALLEON=/path/to/galleon python3 bench/slow_readers.py   # that build, not this checkout's
"""
import asyncio
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READERS = int(os.environ.get("READERS", "1000"))
# What the slow readers download: /doom (streamed) by default; a whole page such as
# /dynamic-strings?count=50000 (3.9 MB of 65-byte strings) checks per-connection buffers.
PAGE = os.environ.get("PAGE", "/doom")
# The most seconds the readers stay (they leave as soon as the slow phase is measured).
LOAD_SECS = float(os.environ.get("LOAD_SECS", "120"))
# Requests per path measured while the readers connect (the opening burst).
OPENING_SAMPLES = int(os.environ.get("OPENING_SAMPLES", "200"))
# The slow phase starts once the server uses less than this share of a core over half a second.
SETTLED_CPU = float(os.environ.get("SETTLED_CPU", "0.10"))
# Requests per path per measurement. p99 is the 10th-slowest of 1,000: with 300 (the first
# version) it was the 3rd-slowest, and the ratio swung 0.9-3.0x from run to run.
SAMPLES = int(os.environ.get("SAMPLES", "1000"))
PORT = int(os.environ.get("PORT", "4501"))
READ_BYTES_PER_SEC = 1024
# Seconds RSS is watched after the readers leave (tokio lets idle blocking threads go after 10 s).
AFTER_SECS = int(os.environ.get("AFTER_SECS", "15"))
# Extra `galleon serve` flags, e.g. SERVE_ARGS="--offload offload".
SERVE_ARGS = os.environ.get("SERVE_ARGS", "").split()
# Where cargo puts the build (CARGO_TARGET_DIR, as cargo reads it).
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
# A galleon binary to run instead of building this checkout (to compare builds in one session).
GALLEON = os.environ.get("GALLEON", "")


def cpu_secs(pid):
    """User + system CPU seconds of process `pid` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def get(path, body=None, method="GET", headers=""):
    """One request on a fresh connection; returns (status, seconds)."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", PORT), timeout=30) as s:
        req = f"{method} {path} HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n{headers}"
        if body is not None:
            req += f"content-length: {len(body)}\r\n\r\n{body}"
        else:
            req += "\r\n"
        s.sendall(req.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return int(data[9:12] or 0), time.perf_counter() - t0


def measure(label, n):
    """`n` requests of each path on one keep-alive connection, as a browser sends them.
    Returns the latencies (seconds) per path and the error count."""
    import http.client
    lat = {"/static/robots.txt": [], "/streams/bench-1": []}
    errors = 0
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    for _ in range(n):
        for path in lat:
            try:
                t0 = time.perf_counter()
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                lat[path].append(time.perf_counter() - t0)
                if resp.status != 200:
                    errors += 1
            except (OSError, http.client.HTTPException):
                errors += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    conn.close()
    return lat, errors


def p50_p99(xs):
    """Median and 99th percentile of `xs` (seconds), in milliseconds."""
    xs = sorted(xs)
    if not xs:
        return float("nan"), float("nan")
    return xs[len(xs) // 2] * 1000, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000


async def slow_reader(stop_at, stop, stats):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
    except OSError:
        stats["refused"] += 1
        return
    writer.write(f"GET {PAGE} HTTP/1.1\r\nhost: bench\r\n\r\n".encode())
    await writer.drain()
    stats["open"] += 1
    try:
        while time.monotonic() < stop_at and not stop.is_set():
            data = await asyncio.wait_for(reader.read(READ_BYTES_PER_SEC), timeout=5)
            if not data:
                stats["closed_by_server"] += 1
                break
            await asyncio.sleep(1)
    except (asyncio.TimeoutError, OSError):
        stats["errors"] += 1
    finally:
        writer.close()


async def slow_readers(n, secs, stats):
    """`n` readers until standard input closes (the measuring process says so) or `secs` pass."""
    stop_at = time.monotonic() + secs
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)),
                     daemon=True).start()
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(slow_reader(stop_at, stop, stats)))
        if i % 50 == 49:
            await asyncio.sleep(0.05)
    await asyncio.gather(*tasks)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if not GALLEON:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "galleon"], cwd=ROOT, check=True)
    data = tempfile.mkdtemp()
    server = subprocess.Popen(
        [GALLEON or os.path.join(TARGET, "release/galleon"), "serve", "--addr", f"127.0.0.1:{PORT}",
         "--events", f"sqlite:{data}/events.db", "--max-connections", str(READERS + 200)]
        + SERVE_ARGS,
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        get("/streams/bench-1", body='[{"type":"Bench","data":{"n":1}}]', method="POST")
        cold_rss = rss_kib(server.pid)
        a0 = (cpu_secs(server.pid), time.monotonic())
        alone, errs_alone = measure("alone", SAMPLES)
        a1 = (cpu_secs(server.pid), time.monotonic())
        # Idle = warmed up by the measurements alone, nothing in flight.
        time.sleep(1)
        idle_rss = rss_kib(server.pid)
        # The readers run in a process of their own, so the measuring client shares no
        # interpreter lock with them.
        readers = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--readers",
                                    str(READERS), str(LOAD_SECS)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        started = time.monotonic()
        time.sleep(0.5)
        opening, errs_opening = measure("opening", OPENING_SAMPLES)
        # Wait (bounded) for the burst to end: the server's CPU under SETTLED_CPU of a core.
        settled = None
        while time.monotonic() - started < LOAD_SECS / 2:
            c0, t0 = cpu_secs(server.pid), time.monotonic()
            time.sleep(0.5)
            if (cpu_secs(server.pid) - c0) / (time.monotonic() - t0) < SETTLED_CPU:
                settled = time.monotonic() - started
                break
        cpu0 = (cpu_secs(server.pid), cpu_secs(readers.pid), time.monotonic())
        loaded, errs_loaded = measure("slow", SAMPLES)
        cpu1 = (cpu_secs(server.pid), cpu_secs(readers.pid), time.monotonic())
        wall = cpu1[2] - cpu0[2]
        peak_rss = rss_kib(server.pid)
        still_there = readers.poll() is None
        stats = readers.communicate(input="", timeout=LOAD_SECS + 120)[0].strip()
        after = []
        for _ in range(AFTER_SECS):
            time.sleep(1)
            after.append(rss_kib(server.pid))
        # A second unloaded round, after the readers left and RSS was read: the unloaded p99 is
        # the pooled samples of both rounds, so one unlucky quiet round does not set the bar.
        again, errs_again = measure("alone again", SAMPLES)
        errs_alone += errs_again
        for path in alone:
            alone[path] += again[path]
        print(f"== bench/slow_readers.py: {READERS} readers of {PAGE} at ~1 KB/s, {SAMPLES} slow-phase, "
              f"{OPENING_SAMPLES} opening and 2x{SAMPLES} unloaded samples per path (before and after the load), "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
        print(f"{'path':<22} {'p50 alone':>10} {'p99 alone':>10} {'p99 opening':>12} {'ratio':>6} "
              f"{'p50 slow':>9} {'p99 slow':>9} {'p99 ratio':>10}")
        for path in alone:
            a50, a99 = p50_p99(alone[path])
            _, o99 = p50_p99(opening[path])
            l50, l99 = p50_p99(loaded[path])
            print(f"{path:<22} {a50:>9.2f}ms {a99:>9.2f}ms {o99:>10.2f}ms {o99 / a99:>5.2f}x "
                  f"{l50:>7.2f}ms {l99:>7.2f}ms {l99 / a99:>9.2f}x")
        settle = f"{settled:.1f} s after the readers started" if settled is not None else \
            f"NOT within {LOAD_SECS / 2:.0f} s (the slow phase was measured anyway)"
        print(f"server CPU settled under {SETTLED_CPU:.0%} of a core {settle}; during the slow phase "
              f"({wall:.1f} s): server {(cpu1[0] - cpu0[0]) / wall * 100:.0f}% of a core, "
              f"slow-reader client {(cpu1[1] - cpu0[1]) / wall * 100:.0f}% (server alone: "
              f"{(a1[0] - a0[0]) / (a1[1] - a0[1]) * 100:.0f}% over {a1[1] - a0[1]:.1f} s)")
        if not still_there:
            print("WARNING: the readers left before the slow phase was measured (raise LOAD_SECS)")
        print(f"errors: {errs_alone} alone, {errs_opening} opening, {errs_loaded} slow; readers: {stats}")
        print(f"RSS: at start {cold_rss / 1024:.1f} MiB, idle after the measurements alone {idle_rss / 1024:.1f} MiB, under load {peak_rss / 1024:.1f} MiB, "
              f"after they left (1..{AFTER_SECS} s): {' '.join(f'{r / 1024:.1f}' for r in after)} MiB "
              f"({after[-1] / idle_rss:.2f}x idle)")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def readers_main(n, secs):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stats = {"open": 0, "refused": 0, "closed_by_server": 0, "errors": 0}
    asyncio.run(slow_readers(n, secs, stats))
    print(stats)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--readers":
        readers_main(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit(main())
