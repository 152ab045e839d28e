#!/usr/bin/python3
"""The scaling model's plots: modelled curves from 1 to 64 GPUs beside every measured point
(bench/scaling_model.py, bench/scaling_check.py; drawn by `make scaling`).

    bench/scaling_model_plot.py --out DIR [--params FILE] [--gpu-session DIR]

  scaling_model_strong.png  speedup T(1)/T(P) at a fixed global batch, one panel a shape, one
                            curve a configuration (host MPI, parameter server, model parallelism,
                            NCCL); the measured points: one GPU, and 2-4 ranks SHARING one GPU
                            (with the model of sharing), which are not multi-GPU runs
  scaling_model_weak.png    images a second against one GPU, P ranks of B images each
  scaling_model_cpu.png     --device cpu ranks: measured time a step beside the model's
Needs matplotlib (bench/plots.py's setup).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plots import plt, save  # noqa: E402
import scaling_check as sc  # noqa: E402
import scaling_model as sm  # noqa: E402

LINES = {"host": ("#4c72b0", "-", "--comm host (default; 512 KiB pieces)"),
         "device": ("#dd8452", ":", "--comm device (CUDA-aware MPI)"),
         "ps": ("#c44e52", "-", "parameter server (--strategy ps)"),
         "model": ("#55a868", "-", "model parallelism (--strategy model)"),
         "nccl": ("#8172b2", "--", "--comm nccl (published NCCL figures)")}
NOTE = ("Model, not a measurement: %d GPUs a node, %s across nodes;\nparts measured on an NVIDIA H200 and "
        "its 16-core host (bench/results/h200-2026-11-28), published interconnect figures (docs/scaling.md)")


def axes_grid(title):
    fig, axes = plt.subplots(1, 4, figsize=(18, 5.2), sharey=True)
    fig.suptitle(title, fontsize=11)
    return fig, axes


def p_axis(ax):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(sm.RANKS)
    ax.set_xticklabels([str(p) for p in sm.RANKS])
    ticks = [2.0 ** k for k in range(-8, 7)]
    ax.set_yticks(ticks)
    ax.set_yticklabels([("%gx" % t) if t >= 0.125 else "1/%dx" % round(1 / t) for t in ticks], fontsize=8)
    ax.set_ylim(1 / 256, 80)
    ax.set_xlabel("GPUs (MPI ranks, one GPU each)")
    ax.grid(True, which="both", alpha=0.3)


def model_panels(par, mode, a):
    label = "speedup T(1)/T(P), same global batch" if mode == "strong" else "images/s against one GPU (B a rank)"
    fig, axes = axes_grid("%s scaling of nn_train, modelled: %s\n%s" % (
        mode.capitalize(), label, NOTE % (a.per_node, sm.FABRICS[a.fabric]["label"])))
    for ax, (h, b) in zip(axes, sm.SHAPES):
        ax.plot(sm.RANKS, sm.RANKS, ":", color="black", alpha=0.5, label="ideal")
        ax.axhline(1.0, color="black", lw=0.8, alpha=0.6)
        for cfg, (color, style, lab) in LINES.items():
            ys = [sm.speedup(par, h, b, p, config=cfg, mode=mode, per_node=a.per_node, fabric=a.fabric)
                  for p in sm.RANKS]
            ax.plot(sm.RANKS, ys, style, color=color, marker="o", ms=3, label=lab)
        ax.plot([1], [1.0], "k*", ms=11, label="measured: one GPU (the baseline)")
        if mode == "strong":
            shared_points(ax, par, h, b, a)
        ax.set_title("%d:%d (H:B%s)" % (h, b, "" if mode == "strong" else " a rank"), fontsize=10)
        p_axis(ax)
    axes[0].set_ylabel(label)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    save(fig, a.out, "scaling_model_%s.png" % mode)


def shared_points(ax, par, h, b, a):
    """2-4 ranks time-slicing the one H200: measured and modelled, labelled as sharing."""
    t1 = sm.step_time(par, h, b, 1)["total"]
    pts = [(p, t) for hh, bb, p, t, _ in sc.sf.share_points(a.gpu_session) if (hh, bb) == (h, b)]
    ps = [1, 2, 4]
    ax.plot(ps, [t1 / sm.shared_gpu_step(par, h, b, p) if p > 1 else 1.0 for p in ps], "-.", color="gray",
            lw=1, label="model: ranks SHARING one GPU")
    if pts:
        ax.plot([p for p, _ in pts], [t1 / t for _, t in pts], "x", color="black", ms=8,
                label="measured: ranks SHARING one H200 (not multi-GPU)")


def cpu_panel(par, a):
    rows = sc.h200_cpu_rows(par) + sc.vm_rows(par)
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    fig.suptitle("--device cpu ranks, one core each: measured time a step and the model's (CPU measurement "
                 "and model)\nH200 machine's 16-core host (bench/results/h200-2026-11-28) and the 2-core VM "
                 "(bench/results/cpu-2026-11-28-scaling)", fontsize=11)
    for ax, shape in zip(axes[:2], ("256:100", "1024:1000")):
        sel = [r for r in rows if r["machine"].startswith("H200 host") and r["shape"] == shape]
        ps = [r["ranks"] for r in sel]
        ax.plot(ps, [r["measured_us"] for r in sel], "ko", label="measured median step (node-shared, the default)")
        ax.plot(ps, [r["model_us"] for r in sel], "-", color="#4c72b0", label="model")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ps)
        ax.set_xticklabels([str(p) for p in ps])
        ax.set_xlabel("CPU ranks")
        ax.set_ylabel("us a step")
        ax.set_title("H200 host, %s" % shape, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    vm = [r for r in rows if r["machine"] == sc.VMS[0][2] and r["ranks"] == 2]  # the Intel VM's
    ax = axes[2]
    if vm:
        xs = range(len(vm))
        ax.bar([x - 0.27 for x in xs], [r["measured_us"] for r in vm], 0.27, color="#444444", label="measured (median step)")
        ax.bar([x for x in xs], [r["model_us"] for r in vm], 0.27, color="#55a868", label="model, co-run compute")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(["%s\n%s" % (r["shape"], r["run"].replace(" (--node-shared off)", "\nns off")) for r in vm],
                           fontsize=6, rotation=90)
        ax.set_yscale("log")
        ax.set_ylabel("us a step")
        ax.legend(fontsize=8)
    ax.set_title("2-core VM (Intel), 2 ranks", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    save(fig, a.out, "scaling_model_cpu.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", default="build/scaling/model")
    ap.add_argument("--params", default=sm.PARAMS)
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--fabric", default="ib_ndr", choices=["ib_hdr", "ib_ndr"])
    ap.add_argument("--gpu-session", action="append", default=[])
    a = ap.parse_args()
    machines = sm.load(a.params)["machines"]
    for mode in ("strong", "weak"):
        model_panels(machines["h200"], mode, a)
    cpu_panel(machines, a)


if __name__ == "__main__":
    main()
