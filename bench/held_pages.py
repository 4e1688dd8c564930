#!/usr/bin/env python3
"""bench/held_pages.py: what clients that read nothing pin of whole pages (issue 35, cause 8).

Starts `galleon serve` (release build) once per configuration, then READERS clients each send
PIPELINE requests for PAGE at once and read nothing, while a probe fetches /static/robots.txt on
a new connection every 100 ms (light traffic beside, as a health check makes). Prints the
server's RSS idle, under the load, and for AFTER_SECS seconds after the clients close. The
configurations alternate, ROUNDS times: `--max-whole-pages` at its default, and at 1 TiB
(no budget: every page up to --full-body-max rendered whole, as before the budget).
Loopback only; every loop is bounded in count and time.

    python3 bench/held_pages.py
    READERS=40 PIPELINE=4 ROUNDS=3 python3 bench/held_pages.py
"""
import os
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READERS = int(os.environ.get("READERS", "80"))
PIPELINE = int(os.environ.get("PIPELINE", "20"))
PAGE = os.environ.get("PAGE", "/dynamic-strings?count=50000")
ROUNDS = int(os.environ.get("ROUNDS", "2"))
LOAD_SECS = float(os.environ.get("LOAD_SECS", "4"))
AFTER_SECS = int(os.environ.get("AFTER_SECS", "8"))
PORT = int(os.environ.get("PORT", "4502"))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
GALLEON = os.environ.get("GALLEON", os.path.join(TARGET, "release", "galleon"))
CONFIGS = [("default budget", []), ("no budget", ["--max-whole-pages", str(1 << 40)])]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def wait_up(proc):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"galleon exited: {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("galleon did not start")


def probe(stop):
    """A request on a new connection every 100 ms until `stop` (at most 10 minutes)."""
    deadline = time.time() + 600
    while not stop.is_set() and time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", PORT), timeout=5) as s:
                s.sendall(b"GET /static/robots.txt HTTP/1.1\r\nhost: b\r\nconnection: close\r\n\r\n")
                while s.recv(65536):
                    pass
        except OSError:
            pass
        stop.wait(0.1)


def run(name, flags):
    proc = subprocess.Popen(
        [GALLEON, "serve", "--addr", f"127.0.0.1:{PORT}", "--events", "off", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_up(proc)
        # Warm up: one full read of the page.
        with socket.create_connection(("127.0.0.1", PORT), timeout=30) as s:
            s.sendall(f"GET {PAGE} HTTP/1.1\r\nhost: b\r\nconnection: close\r\n\r\n".encode())
            while s.recv(1 << 20):
                pass
        time.sleep(0.5)
        idle = rss_mib(proc.pid)
        stop = threading.Event()
        prober = threading.Thread(target=probe, args=(stop,))
        prober.start()
        request = f"GET {PAGE} HTTP/1.1\r\nhost: b\r\n\r\n".encode() * PIPELINE
        clients = []
        for _ in range(READERS):
            c = socket.create_connection(("127.0.0.1", PORT), timeout=30)
            c.sendall(request)
            clients.append(c)
        peak = 0.0
        end = time.time() + LOAD_SECS
        while time.time() < end:
            peak = max(peak, rss_mib(proc.pid))
            time.sleep(0.1)
        for c in clients:
            c.close()
        after = []
        for _ in range(AFTER_SECS):
            time.sleep(1)
            after.append(rss_mib(proc.pid))
        stop.set()
        prober.join()
        per = (peak - idle) / READERS
        print(
            f"{name:<15} idle {idle:6.1f}  loaded {peak:6.1f} ({per:4.2f}/reader)  "
            f"after (1..{AFTER_SECS} s): {' '.join(f'{a:.1f}' for a in after)} MiB "
            f"({after[-1] / idle:.2f}x idle)",
            flush=True,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    if not os.environ.get("GALLEON"):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "galleon"], cwd=ROOT, check=True)
    print(
        f"== bench/held_pages.py: {READERS} clients x {PIPELINE} pipelined GET {PAGE}, reading "
        f"nothing, a probe every 100 ms; {ROUNDS} rounds, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
    )
    for _ in range(ROUNDS):
        for name, flags in CONFIGS:
            run(name, flags)


if __name__ == "__main__":
    main()
