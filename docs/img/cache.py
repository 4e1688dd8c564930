#!/usr/bin/env python3
"""Draws docs/img/cache.png from the newest saved run of `galleon bench cache` (bench/runs/*.json).

The matrix does not fit `galleon bench graph`'s one chart per benchmark over runs, so this draws
one run: sender CPU per response against the working set, per string length, for copy and for
reference (counts off and on), and the HTTP rows as req/s relative to each server's /dynamic.
Needs python3-matplotlib (Debian). Usage: python3 docs/img/cache.py [RUN.json] [-o OUT.png]
"""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETS = ["L1-sized", "L2-sized", "L3-sized", "beyond L3"]
LENGTHS = [16, 65, 256, 1024, 4096]


def newest_cache_run():
    runs = sorted(glob.glob(os.path.join(ROOT, "bench", "runs", "*.json")))
    for path in reversed(runs):
        with open(path) as f:
            run = json.load(f)
        if "cache" in run.get("suites", []) and not run.get("quick"):
            return path, run
    sys.exit("no full run of the cache suite in bench/runs")


def main():
    args = sys.argv[1:]
    out = os.path.join(ROOT, "docs", "img", "cache.png")
    if "-o" in args:
        i = args.index("-o")
        out = args[i + 1]
        del args[i : i + 2]
    if args:
        path = args[0]
        with open(path) as f:
            run = json.load(f)
    else:
        path, run = newest_cache_run()
    med = {b["name"]: b["median"] for b in run["benchmarks"] if b["suite"] == "cache"}

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    for ax, policy, title in [
        (axes[0], "copy", "copy everything (user-space reads)"),
        (axes[1], "ref", "reference everything (kernel reads in writev)"),
    ]:
        for k, length in enumerate(LENGTHS):
            color = f"C{k}"
            for rc, style in [("", "-"), (" +rc", ":")]:
                ys = [med.get(f"{s} set, {length} B strings, {policy}{rc}: cpu") for s in SETS]
                if any(y is None for y in ys):
                    continue
                ax.plot(
                    range(len(SETS)),
                    ys,
                    style,
                    marker="o",
                    color=color,
                    label=f"{length} B" + (" +rc" if rc else ""),
                )
        ax.set_xticks(range(len(SETS)))
        ax.set_xticklabels(SETS)
        ax.set_yscale("log")
        ax.set_ylabel("sender CPU µs per 32 KiB response")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)

    ax = axes[2]
    rows = [
        ("galleon", "galleon /static-strings?count=500", "galleon /dynamic-strings?count=500"),
        ("BEAM", "beam /static?count=500", "beam /dynamic?count=500"),
    ]
    labels, vals = [], []
    for server, st, dy in rows:
        s, d = med.get(f"{st} req/s"), med.get(f"{dy} req/s")
        if s and d:
            labels.append(server)
            vals.append(s / d)
    ax.bar(labels, vals, color=["C0", "C3"][: len(vals)])
    ax.axhline(1.0, color="k", lw=0.8)
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.2f}x", ha="center", va="bottom")
    ax.set_ylabel("req/s of /static ÷ /dynamic")
    ax.set_title("the seed's experiment over HTTP", fontsize=10)
    fig.suptitle(
        f"galleon bench cache, {run['date']} at {run['commit'][:10]} ({run['machine'].get('cpu_model', '')})",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out} from {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
