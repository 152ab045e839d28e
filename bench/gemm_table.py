#!/usr/bin/env python3
"""The GEMM table of kernels/gemm/README.md, made from one `gemm_bench --csv` run (standard
library only).

    python3 bench/gemm_table.py [--run DIR] [--write | --check]

DIR is a run folder under bench/results/ holding a file `gemm_table.txt` of `key: value` lines:
    csv: FILE        gemm_bench's CSV (--csv FILE), relative to DIR; it must hold 4096^3
                     (shape square4096) and the trainer's one-rank shapes (forward1/p1 ...)
    commit: HASH     the commit the binary was built from
    command: TEXT    the gemm_bench command line that wrote the CSV
Without --run, the folder whose gemm_table.txt names the CSV with the latest date (the CSV's
`date` column; then the folder name) is used.

The table has one row per variant of the registry (kernels/gemm/variants.h, in number
order; a variant missing from the CSV gets "-"), then the extra rows of variant 5 that gemm_bench
--tf32 writes (its wgmma kernel, plain TF32). Columns: the time, TFLOP/s and x cuBLAS (cuBLAS
SGEMM's time / the row's, from the CSV's `ratio`) at 4096^3, x cuBLAS at each of the trainer's
five GEMM shapes at one rank, and the error at 4096^3 (the CSV's `relerr`). Below the table one
provenance line: device, date, commit, command, the run's folder.

Prints the Markdown block. --write replaces the block between the markers BEGIN and END below
in kernels/gemm/README.md; --check exits 1 (printing FILE:LINE: why) when the README's block is
not what this script makes of the CSV, else 0. tests/build/check_docs.py runs the check.
"""
import argparse
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = "kernels/gemm/README.md"
RESULTS = "bench/results"
BEGIN = "<!-- BEGIN gemm table: made by bench/gemm_table.py --write from gemm_bench's CSV; do not edit -->"
END = "<!-- END gemm table -->"
VARIANT_RE = re.compile(r"^\s*X\((\d+),\s*([a-z0-9_]+),\s*(fused|plain)", re.M)

# The trainer's five GEMMs at one rank, in the order of a step (gemm_bench's shape names).
SHAPES = [("forward1/p1", "forward1"), ("forward2/p1", "forward2"), ("dA1/p1", "dA1"),
          ("dW1/p1", "dW1"), ("dW2/p1", "dW2")]
BIG = "square4096"
# Rows beyond one per variant: (CSV name, label).
EXTRA = [("tf32x3:wgmma128x128/plan", "5 `tf32x3`, its `wgmma` kernel at every shape (sm_90)"),
         ("tf32x1 (plain TF32)", "plain TF32, one product (for comparison: not FP32-accurate)")]
LABELS = {"cublas": "cuBLAS SGEMM, the baseline", "warptile": "the default",
          "tf32x3": "3 TF32 tensor-core products, `mma.sync`"}


def registry(root):
    with open(os.path.join(root, "kernels/gemm/variants.h"), encoding="utf-8") as f:
        return [(int(n), name) for n, name, _ in VARIANT_RE.findall(f.read())]


def read_meta(path):
    meta = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if sep and key.strip():
                meta[key.strip()] = value.strip()
    for key in ("csv", "commit", "command"):
        if not meta.get(key):
            raise ValueError(f"{path}: no '{key}:' line")
    return meta


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def find_run(root):
    """The run folder (relative to root) whose gemm_table.txt names the newest CSV."""
    best = None
    base = os.path.join(root, RESULTS)
    for name in sorted(os.listdir(base)):
        meta_path = os.path.join(base, name, "gemm_table.txt")
        if not os.path.isfile(meta_path):
            continue
        meta = read_meta(meta_path)
        date = read_rows(os.path.join(base, name, meta["csv"]))[0]["date"]
        if best is None or (date, name) > best[0]:
            best = ((date, name), f"{RESULTS}/{name}")
    if best is None:
        raise ValueError(f"no {RESULTS}/*/gemm_table.txt")
    return best[1]


def ratio(row):
    return f"{float(row['ratio']):.2f}" if row else "-"


def table(root, run):
    meta = read_meta(os.path.join(root, run, "gemm_table.txt"))
    rows = read_rows(os.path.join(root, run, meta["csv"]))
    by = {(r["shape"], r["name"]): r for r in rows}
    devices = sorted({r["device"] for r in rows})
    dates = sorted({r["date"] for r in rows})
    if len(devices) != 1 or len(dates) != 1:
        raise ValueError(f"{run}/{meta['csv']}: one device and one date expected, got {devices} {dates}")
    big = {r["name"] for (shape, _), r in by.items() if shape == BIG}
    if "cublas" not in big:
        raise ValueError(f"{run}/{meta['csv']}: no cuBLAS row at {BIG} (a GPU run of gemm_bench without --no-big)")
    dims = {label: next((f"{r['M']} x {r['N']} x {r['K']}" for (s, _), r in by.items() if s == shape), None)
            for shape, label in SHAPES}
    head = ["variant", "4096^3 ms", "TFLOP/s", "x cuBLAS"]
    head += [f"{label} {dims[label]}" if dims[label] else label for _, label in SHAPES]
    head += ["error at 4096^3"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def line(label, name):
        r = by.get((BIG, name))
        cells = [label]
        if r:
            cells += [f"{float(r['ms']):.3f}", f"{float(r['gflops']) / 1000:.1f}", ratio(r)]
        else:
            cells += ["-", "-", "-"]
        cells += [ratio(by.get((shape, name))) for shape, _ in SHAPES]
        cells += [f"{float(r['relerr']):.1e}" if r and r.get("relerr") else "-"]
        lines.append("| " + " | ".join(cells) + " |")

    for number, name in registry(root):
        label = f"{number} `{name}`" + (f" ({LABELS[name]})" if name in LABELS else "")
        line(label, name)
    for name, label in EXTRA:
        if (BIG, name) in by or any((s, name) in by for s, _ in SHAPES):
            line(label, name)
    folder = os.path.basename(run)
    link = os.path.relpath(os.path.join(root, run, "README.md"), os.path.join(root, os.path.dirname(README)))
    prov = (f"Provenance: {devices[0]}, {dates[0]}, at `{meta['commit']}`: `{meta['command']}` "
            f"([{folder}]({link})). Regenerate: `python3 bench/gemm_table.py --write`.")
    return "\n".join([BEGIN, "", *lines, "", prov, "", END])


def readme_block(text):
    """(first line number, block) of the README's marked block, or (None, None)."""
    start = text.find(BEGIN)
    end = text.find(END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None, None
    return text.count("\n", 0, start) + 1, text[start:end + len(END)]


def check(root, run=None):
    """Problems as 'FILE:LINE: why' strings (empty: the README's table is up to date)."""
    try:
        want = table(root, run or find_run(root))
    except (OSError, ValueError, KeyError) as e:
        return [f"{README}:1: the GEMM table cannot be made: {e}"]
    with open(os.path.join(root, README), encoding="utf-8") as f:
        line, have = readme_block(f.read())
    if have is None:
        return [f"{README}:1: no GEMM table between the markers '{BEGIN}' and '{END}'"]
    if have != want:
        return [f"{README}:{line}: the GEMM table is not what bench/gemm_table.py makes of its CSV: "
                "run `python3 bench/gemm_table.py --write`"]
    return []


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", help="the run folder, e.g. bench/results/NAME (default: the newest with gemm_table.txt)")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="write the table into " + README)
    what.add_argument("--check", action="store_true", help="exit 1 when the README's table differs")
    args = ap.parse_args(argv[1:])
    run = os.path.relpath(os.path.abspath(args.run), ROOT) if args.run else None
    if args.check:
        problems = check(ROOT, run)
        for p in problems:
            print(p)
        return 1 if problems else 0
    try:
        block = table(ROOT, run or find_run(ROOT))
    except (OSError, ValueError, KeyError) as e:
        print(f"gemm_table: {e}", file=sys.stderr)
        return 1
    if not args.write:
        print(block)
        return 0
    path = os.path.join(ROOT, README)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    _, old = readme_block(text)
    if old is None:
        print(f"gemm_table: {README} has no markers ({BEGIN} ... {END})", file=sys.stderr)
        return 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, block))
    print(f"gemm_table: wrote the table into {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
