#!/usr/bin/env python3
"""How close variant 4's plan comes to the fastest (tile, k-slices) pair, per shape.

    python3 bench/splits_report.py CSV [CSV ...]

Each CSV is what `gemm_bench --variants 0,4 --configs --splits 1,2,3,4,6,8,12,16 --csv F`
wrote: per shape a row for cuBLAS (variant 0), one for `warptile` (the plan's choice, as the
trainer runs it) and one per `warptile:CFG/sS` pair. Prints, per shape, the plan's time, the
fastest pair and its time, plan / fastest, and per file and over all files the geometric mean
of plan / fastest: the number to watch when `warptile_plan` (kernels/gemm/4_warptile_plan.cu)
changes. Times of one run are noisy by a few percent: compare plans measured in one call.
"""
import csv
import math
import sys


def read(path):
    shapes = {}
    for r in csv.DictReader(open(path, newline="")):
        s = shapes.setdefault(r["shape"], {"dims": (r["M"], r["N"], r["K"]), "pairs": {}})
        us = float(r["ms"]) * 1e3
        if r["variant"] == "0":
            s["cublas"] = us
        elif r["name"] == "warptile":
            s["plan"] = us
        elif r["name"].startswith("warptile:"):
            s["pairs"][r["name"].split(":", 1)[1]] = us
    return shapes


def main(paths):
    if not paths:
        sys.exit("usage: splits_report.py CSV [CSV ...] (gemm_bench --configs --splits ... --csv)")
    logs = []
    for path in paths:
        try:
            shapes = read(path)
        except (OSError, KeyError, ValueError) as e:
            sys.exit(f"splits_report.py: {path}: not a gemm_bench CSV ({e})")
        rows = [(name, s) for name, s in shapes.items() if "plan" in s and s["pairs"]]
        if not rows:
            sys.exit(f"splits_report.py: {path}: no shape has both the plan's row and --splits rows")
        print(f"== {path}")
        print(f"{'shape':14s} {'M x N x K':>16s} {'plan us':>8s} {'fastest pair':>14s} {'us':>7s} "
              f"{'plan/fastest':>12s} {'cuBLAS us':>9s}")
        file_logs = []
        for name, s in rows:
            pair, best = min(s["pairs"].items(), key=lambda kv: kv[1])
            best = min(best, s["plan"])  # the plan's own run counts too
            ratio = s["plan"] / best
            file_logs.append(math.log(ratio))
            cub = f"{s['cublas']:9.1f}" if "cublas" in s else f"{'-':>9s}"
            print(f"{name:14s} {'x'.join(s['dims']):>16s} {s['plan']:8.1f} {pair:>14s} "
                  f"{s['pairs'][pair]:7.1f} {ratio:12.3f} {cub}")
        print(f"geometric mean plan/fastest: {math.exp(sum(file_logs) / len(file_logs)):.3f} "
              f"over {len(file_logs)} shapes; worst {math.exp(max(file_logs)):.3f}")
        logs += file_logs
    if len(paths) > 1:
        print(f"== all: geometric mean plan/fastest {math.exp(sum(logs) / len(logs)):.3f} "
              f"over {len(logs)} shapes; worst {math.exp(max(logs)):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
