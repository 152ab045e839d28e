#!/usr/bin/python3
"""Plots of bench/scaling.sh's CSV files, as PNG (matplotlib, Agg backend).

    bench/scaling_plot.py build/scaling                 # reads DIR/scaling.csv, DIR/variants.csv
    bench/scaling_plot.py --scaling a.csv --variants b.csv --out DIR

Writes into the output directory (default: the input directory):
  scaling_strong.png  strong scaling, fixed global batch B: time per epoch t(p), speedup
                      S(p) = t(1)/t(p) and parallel efficiency E(p) = S(p)/p, one line per
                      strategy, ideal (S = p, E = 1) dashed
  scaling_weak.png    weak scaling, global batch B0 * p (the same work per rank and step):
                      time per step t(p), efficiency E(p) = t(1)/t(p) (ideal 1, dashed) and
                      throughput in images/s
  variants.png        median step time and host-queue time per step of each variant at one p
                      (error bars: min..max over the repeats), ratios to plain allreduce
When a strategy has no p = 1 run its smallest p is the baseline (S(p0) = p0, said in the
legend). Rows marked oversubscribed (more ranks than cores or GPUs) are drawn hollow. Runs of
the CUDA build get the scaling model's speedup beside them (dotted, "model": bench/scaling_model.py
with bench/scaling_params.json, one GPU a rank, --model-params to change; docs/scaling.md).
Titles name the build and device; emulator runs say "emulator (CPU), not GPU performance".
A plot without data still gets a PNG that says what is missing.
"""
import argparse
import os
import statistics
import sys

# The helpers shared with bench/plots.py (matplotlib setup with the Agg backend, number
# parsing, saving, the "no data" PNG, the emulator note) live there.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plots import EMU_NOTE, empty_plot, num, plt, save  # noqa: E402
import plots  # noqa: E402

STYLE = {"allreduce": ("#4c72b0", "o"), "ps": ("#c44e52", "s"), "model": ("#55a868", "^")}
MODEL_CONFIG = {"allreduce": "host", "ps": "ps", "model": "model"}
MODEL_PARAMS = None  # set by --model-params (default: bench/scaling_params.json)
EXTRA = [("#8172b2", "D"), ("#ccb974", "v"), ("#64b5cd", "P")]


warn = plots.warn


def read_csv(path):
    """Rows of a CSV file; [] with a warning when it does not exist (a partial study)."""
    if not path or not os.path.exists(path):
        if path:
            warn("%s: not found" % path)
        return []
    return plots.read_csv(path)


def label_of(rows):
    """'build build, device' (one per distinct pair) plus the emulator note."""
    pairs = sorted({(r.get("build") or "unknown", r.get("device") or "device unknown") for r in rows})
    text = "; ".join(("--device cpu (host BLAS, CPU measurement), %s" % p[1]) if p[0] == "cpu"
                     else "%s build, %s" % p for p in pairs) if pairs else "device unknown"
    if any(b == "emulator" or "emulator" in d.lower() for b, d in pairs):
        text += "\n" + EMU_NOTE
    return text


def style(strategy, index):
    return STYLE.get(strategy, EXTRA[index % len(EXTRA)])


def series(rows, key):
    """{strategy: [(p, median value, oversubscribed, batch)]}, sorted by p."""
    acc = {}
    for r in rows:
        p, v = num(r.get("p")), num(r.get(key))
        if p is None or v is None or v <= 0:
            continue
        acc.setdefault(r.get("strategy") or "?", {}).setdefault(int(p), []).append(r)
    out = {}
    for s, by_p in acc.items():
        pts = []
        for p in sorted(by_p):
            rs = by_p[p]
            pts.append((p, statistics.median(num(r[key]) for r in rs),
                        any(r.get("oversubscribed") == "1" for r in rs), rs[0].get("batch", "")))
        out[s] = pts
    return out


def p_axis(ax, ps):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ps)
    ax.set_xticklabels([str(p) for p in ps])
    ax.set_xlabel("MPI ranks p")
    ax.grid(True, which="both", alpha=0.3)


def draw(ax, pts, ys, color, marker, label):
    xs = [p for p, _, _, _ in pts]
    ax.plot(xs, ys, "-", color=color, label=label)
    for (p, _, over, _), y in zip(pts, ys):
        ax.plot([p], [y], marker=marker, color=color, markersize=7, linestyle="none",
                markerfacecolor="none" if over else color)


def common_config(rows):
    def one(key):
        vals = sorted({r.get(key, "") for r in rows if r.get(key, "")})
        return "/".join(vals) if vals else "?"
    return "H=%s, %s epochs, %s training images" % (one("hidden"), one("epochs"), one("train_images"))


def oversub_note(fig, rows):
    if any(r.get("oversubscribed") == "1" for r in rows):
        fig.text(0.01, 0.01, "hollow markers: oversubscribed (more ranks than cores/GPUs here), "
                 "not a scaling measurement", fontsize=8, color="#555555")


def model_overlay(ax, rows, strategy, mode, color, ps):
    """The scaling model's speedup for the study's shape (CUDA build only: the model is of GPU
    ranks), dotted; nothing when the rows are not GPU runs or the model cannot be loaded."""
    if not rows or any(r.get("build") != "cuda" for r in rows) or strategy not in MODEL_CONFIG:
        return
    try:
        import scaling_model as sm
        par = sm.load(MODEL_PARAMS or sm.PARAMS)["machines"]["h200"]
    except (ImportError, OSError, KeyError, ValueError) as e:
        warn("no model overlay: %s" % e)
        return
    h = int(num(rows[0].get("hidden")) or 0)
    b = int(num(rows[0].get("batch")) or 0) if mode == "strong" else int(num(rows[0].get("batch")) / num(rows[0].get("p")))
    if not h or not b:
        return
    ys = [sm.speedup(par, h, b, p, config=MODEL_CONFIG[strategy], mode=mode) for p in ps]
    ax.plot(ps, ys, ":", color=color, lw=1.5, label="%s, model" % strategy)


def plot_strong(rows, out_dir):
    rows = [r for r in rows if r.get("mode") == "strong"]
    name = "scaling_strong.png"
    data = series(rows, "seconds_per_epoch")
    if not data:
        return empty_plot(out_dir, name, "Strong scaling", "no strong-scaling rows with "
                          "seconds_per_epoch in scaling.csv")
    ps = sorted({p for pts in data.values() for p, _, _, _ in pts})
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2))
    for i, (s, pts) in enumerate(data.items()):
        color, marker = style(s, i)
        p0, t0 = pts[0][0], pts[0][1]
        lab = s if p0 == 1 else "%s (baseline p=%d)" % (s, p0)
        speed = [p0 * t0 / t for _, t, _, _ in pts]
        draw(axes[0], pts, [t for _, t, _, _ in pts], color, marker, lab)
        draw(axes[1], pts, speed, color, marker, lab)
        draw(axes[2], pts, [sp / p for sp, (p, _, _, _) in zip(speed, pts)], color, marker, lab)
        model_overlay(axes[1], [r for r in rows if r.get("strategy") == s], s, "strong", color, [p for p, _, _, _ in pts])
    axes[1].plot(ps, ps, "--", color="black", alpha=0.6, label="ideal S = p")
    axes[2].axhline(1.0, linestyle="--", color="black", alpha=0.6, label="ideal E = 1")
    axes[0].set_ylabel("seconds per epoch (median, epochs 2..E)")
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylabel("speedup S(p) = t(1) / t(p)")
    axes[2].set_ylabel("parallel efficiency E(p) = S(p) / p")
    axes[2].set_ylim(bottom=0)
    axes[0].set_title("time per epoch")
    axes[1].set_title("speedup")
    axes[2].set_title("efficiency")
    for ax in axes:
        p_axis(ax, ps)
        ax.legend(fontsize=8)
    batches = sorted({r.get("batch", "") for r in rows})
    fig.suptitle("Strong scaling: fixed global batch B=%s, %s\n%s"
                 % ("/".join(batches), common_config(rows), label_of(rows)), fontsize=11)
    oversub_note(fig, rows)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    save(fig, out_dir, name)


def plot_weak(rows, out_dir):
    rows = [r for r in rows if r.get("mode") == "weak"]
    name = "scaling_weak.png"
    data = series(rows, "step_ms")
    if not data:
        return empty_plot(out_dir, name, "Weak scaling", "no weak-scaling rows with step_ms "
                          "in scaling.csv")
    thr = series(rows, "images_per_s")
    ps = sorted({p for pts in data.values() for p, _, _, _ in pts})
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2))
    for i, (s, pts) in enumerate(data.items()):
        color, marker = style(s, i)
        p0, t0 = pts[0][0], pts[0][1]
        lab = s if p0 == 1 else "%s (baseline p=%d)" % (s, p0)
        draw(axes[0], pts, [t for _, t, _, _ in pts], color, marker, lab)
        draw(axes[1], pts, [t0 / t for _, t, _, _ in pts], color, marker, lab)
        sel = [r for r in rows if r.get("strategy") == s]
        if sel and all(r.get("build") == "cuda" for r in sel):
            weak_model(axes[1], sel, s, color, [p for p, _, _, _ in pts])
        if s in thr:
            draw(axes[2], thr[s], [v for _, v, _, _ in thr[s]], color, marker, lab)
    axes[1].axhline(1.0, linestyle="--", color="black", alpha=0.6, label="ideal E = 1")
    axes[0].set_ylabel("time per step, ms (median batch)")
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylabel("weak efficiency E(p) = t(1) / t(p)")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylabel("images / s (training, per epoch)")
    axes[2].set_ylim(bottom=0)
    axes[0].set_title("time per step")
    axes[1].set_title("weak-scaling efficiency")
    axes[2].set_title("throughput")
    for ax in axes:
        p_axis(ax, ps)
        ax.legend(fontsize=8)
    b0 = sorted({int(num(r["batch"]) / num(r["p"])) for r in rows
                 if num(r.get("batch")) and num(r.get("p"))})
    fig.suptitle("Weak scaling: global batch B = %s x p (same work per rank and step), %s\n%s"
                 % ("/".join(str(b) for b in b0), common_config(rows), label_of(rows)),
                 fontsize=11)
    oversub_note(fig, rows)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    save(fig, out_dir, name)


def weak_model(ax, rows, strategy, color, ps):
    """The model's weak-scaling efficiency T(1)/T(P) (its images/s over P)."""
    try:
        import scaling_model as sm
        par = sm.load(MODEL_PARAMS or sm.PARAMS)["machines"]["h200"]
    except (ImportError, OSError, KeyError, ValueError):
        return
    h = int(num(rows[0].get("hidden")) or 0)
    b0 = int(num(rows[0].get("batch")) / num(rows[0].get("p")))
    ys = [sm.speedup(par, h, b0, p, config=MODEL_CONFIG[strategy], mode="weak") / p for p in ps]
    ax.plot(ps, ys, ":", color=color, lw=1.5, label="%s, model" % strategy)


RATIOS = [("overlap / no-overlap", "allreduce", "allreduce_no_overlap"),
          ("ps / allreduce", "ps", "allreduce"),
          ("model / allreduce", "model", "allreduce"),
          ("graph / no-graph", "allreduce_graph", "allreduce"),
          ("ps graph / ps", "ps_graph", "ps"),
          ("model graph / model", "model_graph", "model")]


def plot_variants(rows, out_dir):
    name = "variants.png"
    rows = [r for r in rows if num(r.get("step_ms")) is not None]
    if not rows:
        return empty_plot(out_dir, name, "Variants", "no rows with step_ms in variants.csv")
    names = [r["variant"] for r in rows]
    by = {r["variant"]: r for r in rows}
    base = by.get("allreduce")
    emu = any(r.get("build") == "emulator" or "emulator" in (r.get("device") or "").lower()
              for r in rows)
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.6), gridspec_kw={"width_ratios": [3, 3, 1.7]})
    for ax, key, lo, hi, unit in ((axes[0], "step_ms", "step_ms_min", "step_ms_max", "ms"),
                                  (axes[1], "host_queue_us_per_step", "host_queue_us_min",
                                   "host_queue_us_max", "us")):
        vals = [num(r.get(key)) for r in rows]
        lows = [num(r.get(lo)) for r in rows]
        highs = [num(r.get(hi)) for r in rows]
        err = [[v - l if v is not None and l is not None else 0 for v, l in zip(vals, lows)],
               [h - v if v is not None and h is not None else 0 for v, h in zip(vals, highs)]]
        colors = [style(r.get("strategy", ""), i)[0] for i, r in enumerate(rows)]
        bars = ax.bar(range(len(rows)), [v or 0 for v in vals], color=colors, yerr=err,
                      capsize=4, alpha=0.85)
        for bar, r in zip(bars, rows):
            if r.get("graph") == "1":
                bar.set_hatch("//")
            elif r.get("overlap") == "0" and r.get("strategy") != "model":
                bar.set_hatch("..")
        b = num(base.get(key)) if base else None
        for i, v in enumerate(vals):
            if v is None:
                ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8)
                continue
            txt = ("%.0f" % v if v >= 100 else "%.3g" % v) + " " + unit
            if b and names[i] != "allreduce":
                txt += "\n%.2fx allreduce" % (v / b)
            ax.text(i, highs[i] if highs[i] is not None else v, txt, ha="center",
                    va="bottom", fontsize=8)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([n.replace("_", "\n") for n in names], fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.15)
    axes[0].set_ylabel("ms per step (median batch)")
    axes[0].set_title("step time (median of runs; whiskers min..max)", fontsize=10)
    axes[1].set_ylabel("us per step")
    axes[1].set_title("host time queueing a step's device work", fontsize=10)
    lines = []
    for label, x, y in RATIOS:
        if x in by and y in by:
            parts = []
            for key in ("step_ms", "host_queue_us_per_step"):
                a, b = num(by[x].get(key)), num(by[y].get(key))
                parts.append("%.3f" % (a / b) if a is not None and b else "n/a")
            lines.append("%s\n  step %s, queue %s" % (label, parts[0], parts[1]))
    axes[2].axis("off")
    text = "ratios (< 1: the first\nis faster)\n\n" + "\n".join(lines) if lines else "no ratios"
    text += ("\n\nhatched: --graph\ndotted: --no-overlap")
    if emu:
        text += ("\n\nemulator: kernels run\nwhen queued (all work is\nsynchronous), so the host\n"
                 "queue time includes\nthe compute")
    axes[2].text(0.0, 1.0, text, fontsize=8.5, family="monospace", va="top",
                 transform=axes[2].transAxes)
    r0 = rows[0]
    fig.suptitle("Variants at p=%s, B=%s, %s (median of %s runs each)\n%s"
                 % (r0.get("p", "?"), r0.get("batch", "?"), common_config(rows),
                    r0.get("repeats", "?"), label_of(rows)), fontsize=11)
    fig.tight_layout()
    save(fig, out_dir, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("dir", nargs="?", default="build/scaling",
                    help="directory holding scaling.csv and variants.csv (default build/scaling)")
    ap.add_argument("--scaling", help="scaling CSV (default DIR/scaling.csv)")
    ap.add_argument("--variants", help="variants CSV (default DIR/variants.csv)")
    ap.add_argument("--out", help="output directory (default DIR)")
    ap.add_argument("--model-params", help="the scaling model's parameters (default bench/scaling_params.json)")
    a = ap.parse_args()
    global MODEL_PARAMS
    MODEL_PARAMS = a.model_params
    sc = read_csv(a.scaling or os.path.join(a.dir, "scaling.csv"))
    va = read_csv(a.variants or os.path.join(a.dir, "variants.csv"))
    out = a.out or a.dir
    plot_strong(sc, out)
    plot_weak(sc, out)
    plot_variants(va, out)


if __name__ == "__main__":
    main()
