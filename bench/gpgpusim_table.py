#!/usr/bin/env python3
"""Table (and plot) of bench/gpgpusim_cycles.sh's CSV: modeled cycles per GEMM, GFLOP/s at the
model's core clock, each variant's ratio to the best at that shape. GPGPU-Sim cycle models, not
GPU measurements.  Usage: gpgpusim_table.py CSV OUT_DIR GPGPUSIM_HOME"""
import csv
import os
import re
import sys
from collections import defaultdict

CONFIG = {"qv100": "SM7_QV100", "rtx3070": "SM86_RTX3070"}


def variant_names():
    """Number -> name of every GEMM variant, from the registry (kernels/gemm/variants.h)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "gemm", "variants.h")
    with open(path) as f:
        return {int(n): name for n, name in re.findall(r"X\((\d+),\s*(\w+),", f.read())}


def core_mhz(home, model):
    """The core clock the model's gpgpusim.config sets (its -gpgpu_clock_domains' first field)."""
    path = os.path.join(home, "configs", CONFIG[model], "gpgpusim.config")
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*-gpgpu_clock_domains\s+([0-9.]+):", line)
            if m:
                return float(m.group(1))
    raise SystemExit(f"error: no -gpgpu_clock_domains in {path}")


def step_table(log, out, home, label="--gemm 4"):
    """Per-kernel modeled cycles of the first training step in a --model qv100 sim.log: the
    kernels up to the SGD update (the separate kernels, --fused off) or up to the dW1 GEMM that
    follows layer2_finish (the fused step, which has no SGD kernel at one rank)."""
    import subprocess
    kernels, name = [], None
    for line in open(log):
        m = re.match(r"kernel_name = (\S+)", line)
        if m:
            name = m.group(1)
        m = re.match(r"gpu_sim_cycle = (\d+)", line)
        if m and name:
            kernels.append((name, int(m.group(1))))
            name = None
    names = subprocess.run(["c++filt"], input="\n".join(k for k, _ in kernels), capture_output=True,
                           text=True).stdout.split("\n")
    step = []
    finished = False
    for (mangled, cyc), pretty in zip(kernels, names):
        short = re.sub(r"\(.*", "", pretty.replace("(anonymous namespace)::", "")).replace("void ", "")
        step.append((short, cyc))
        if "sgd_update" in short or (finished and "gemm" in short):
            break
        finished = finished or "layer2_finish" in short
    mhz = core_mhz(home, "qv100")
    total = sum(c for _, c in step)
    lines = ["", f"## One training step on the QV100 model (H=256, B=100, 1 rank, {label})", "",
             "**GPGPU-Sim cycle model, not a GPU measurement.** Kernels in launch order up to the SGD",
             f"update; {total:,} cycles in all = {total / mhz:.1f} us at {mhz:.0f} MHz.", "",
             "| # | kernel | cycles | share |", "|---|---|---|---|"]
    for i, (k, c) in enumerate(step, 1):
        lines.append(f"| {i} | `{k}` | {c:,} | {100.0 * c / total:.1f}% |")
    md = os.path.join(out, "gemm_cycles.md")
    with open(md, "a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    if sys.argv[1] == "--step":
        return step_table(*sys.argv[2:6])
    path, out, home = sys.argv[1:4]
    rows = [r for r in csv.DictReader(open(path)) if r["cycles"]]
    if not rows:
        raise SystemExit("error: no simulation finished; nothing to tabulate")
    registry = variant_names()
    NAMES = {v: registry.get(v, f"variant{v}") for v in sorted({int(r["variant"]) for r in rows})}
    groups = defaultdict(dict)
    for r in rows:
        key = (r["model"], int(r["H"]), int(r["b"]), r["gemm"], int(r["M"]), int(r["N"]), int(r["K"]))
        groups[key][int(r["variant"])] = int(r["cycles"])
    lines = ["# GEMM variants on GPGPU-Sim's cycle models",
             "",
             "**GPGPU-Sim cycle model, not a GPU measurement.** Cycles of one `nn::gemm` call (its",
             "kernels, with the model's kernel-launch latency) from `make bench-gpgpusim`; GFLOP/s =",
             "2MNK / cycles at the model's core clock; ratio = the best variant's cycles / this one's.",
             "",
             "| model | H | b | GEMM (M x N x K) | " + " | ".join(f"{v} {NAMES[v]}" for v in sorted(NAMES)) + " | best |",
             "|---|---|---|---|" + "---|" * len(NAMES) + "---|"]
    for key in sorted(groups):
        model, H, b, gemm, M, N, K = key
        cyc = groups[key]
        best = min(cyc.values())
        mhz = core_mhz(home, model)
        cells = []
        for v in sorted(NAMES):
            if v not in cyc:
                cells.append("-")
                continue
            gflops = 2.0 * M * N * K / (cyc[v] / (mhz * 1e6)) / 1e9
            cells.append(f"{cyc[v]:,} cyc, {gflops:.1f} GF/s, {best / cyc[v]:.2f}")
        winner = NAMES[min(cyc, key=cyc.get)]
        lines.append(f"| {model} ({mhz:.0f} MHz) | {H} | {b} | {gemm} ({M}x{N}x{K}) | " + " | ".join(cells) + f" | {winner} |")
    md = os.path.join(out, "gemm_cycles.md")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"table: {md}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib for this python: no plot)")
        return
    keys = sorted(groups)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(keys)), 4))
    width = 0.8 / len(NAMES)
    for i, v in enumerate(sorted(NAMES)):
        ys = [min(groups[k].values()) / groups[k][v] if v in groups[k] else 0 for k in keys]
        ax.bar([x + i * width for x in range(len(keys))], ys, width, label=f"{v} {NAMES[v]}")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))])
    ax.set_xticklabels([f"{k[0]}\nb={k[2]} {k[3].split('=')[0]}" for k in keys], fontsize=7)
    ax.set_ylabel("best cycles / variant cycles")
    ax.set_title("GEMM variants, GPGPU-Sim cycle model (not a GPU measurement)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    png = os.path.join(out, "gemm_cycles.png")
    fig.savefig(png, dpi=120)
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
