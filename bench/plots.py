#!/usr/bin/python3
"""Plots of nn_train's measurements, as PNG (matplotlib, Agg backend).

    bench/plots.py all --sweep build/sweep/quick --metrics m.csv --report m.json \\
                       --gemm build/bench/gemm_emulator.csv --out build/plots
    bench/plots.py roofline --sweep DIR_OR_JSON...   -> roofline.png
    bench/plots.py phases   --sweep DIR_OR_JSON...   -> phases.png
    bench/plots.py training --metrics CSV [--report JSON | --device NAME] -> training.png
    bench/plots.py gemm     --gemm CSV [--metric gflops|ratio]            -> gemm.png

Inputs: nn_train --report JSON files (schema nn-report-1, one per sweep point; see
bench/sweep.sh), an nn_train --metrics CSV (epoch,loss,train_acc,val_acc,seconds,
images_per_s) and gemm_bench --csv output (device,date,shape,M,N,K,opA,opB,variant,name,
ms,gflops,ratio). Every title names the device; runs of the emulator build are marked
"emulator (CPU), not GPU performance". Missing or null values are skipped (and said so on
the plot), never fatal; a plot without any data still gets a PNG that says what is missing.
Needs /usr/bin/python3 with matplotlib (Debian: apt-get install python3-matplotlib).
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
except ImportError:
    sys.exit("error: matplotlib is not importable by %s "
             "(Debian: apt-get install python3-matplotlib)" % sys.executable)

EMU_NOTE = "emulator (CPU), not GPU performance"
PHASES = ["forward", "backward", "d2h", "allreduce", "h2d", "step"]
PHASE_COLORS = {"forward": "#4c72b0", "backward": "#55a868", "d2h": "#c44e52",
                "allreduce": "#8172b2", "h2d": "#ccb974", "step": "#64b5cd"}
DPI = 130


def warn(msg):  # named after the running script (bench/scaling_plot.py imports this)
    print("%s: warning: %s" % (os.path.basename(sys.argv[0]) or "plots.py", msg), file=sys.stderr)


def num(x):
    """x as a finite float, else None (null, missing, NaN, text)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def pos(x):
    v = num(x)
    return v if v is not None and v > 0 else None


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def is_emulator(device, build=None):
    return build == "emulator" or "emulator" in str(device or "").lower()


def device_title(pairs):
    """'device' or 'dev1; dev2', plus the emulator note when any run is an emulator run."""
    devices = sorted({str(d) for d, _ in pairs if d})
    text = "; ".join(devices) if devices else "device unknown"
    if any(is_emulator(d, b) for d, b in pairs):
        text += "\n" + EMU_NOTE
    return text


def human(v, unit=""):
    """1.2e13 -> '12 T' (with unit)."""
    if v is None:
        return "n/a"
    for div, pre in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return "%.3g %s%s" % (v / div, pre, unit)
    return "%.3g %s" % (v, unit)


def save(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print("wrote " + path)
    return path


def empty_plot(out_dir, name, title, message):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, wrap=True,
            transform=ax.transAxes)
    fig.suptitle(title, fontsize=12)
    warn("%s: %s" % (name, message))
    return save(fig, out_dir, name)


# ---- inputs -------------------------------------------------------------------------

def load_reports(paths):
    """Reports from JSON files and/or directories of them; unreadable ones are skipped."""
    files = []
    for p in paths or []:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.json")))
        elif os.path.exists(p):
            files.append(p)
        else:
            warn("%s: no such file or directory" % p)
    reports = []
    for f in files:
        try:
            with open(f) as fh:
                r = json.load(fh)
        except (OSError, ValueError) as e:
            warn("%s: skipped (%s)" % (f, e))
            continue
        if not isinstance(r, dict) or r.get("schema") != "nn-report-1":
            warn("%s: skipped (not an nn-report-1 JSON)" % f)
            continue
        r["_file"] = f
        reports.append(r)
    reports.sort(key=lambda r: (num(r.get("ranks")) or 0, num(get(r, "config", "hidden")) or 0,
                                num(get(r, "config", "batch")) or 0))
    return reports


def point_label(r, with_p):
    h, b, p = get(r, "config", "hidden"), get(r, "config", "batch"), r.get("ranks")
    text = "H%s/B%s" % (h if h is not None else "?", b if b is not None else "?")
    if with_p:
        text += "/p%s" % (p if p is not None else "?")
    return text


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ---- (a) roofline -------------------------------------------------------------------

def plot_roofline(reports, out_dir, source):
    name = "roofline.png"
    title_dev = device_title([(r.get("device"), r.get("build")) for r in reports])
    if not reports:
        return empty_plot(out_dir, name, "Roofline",
                          "no nn-report-1 JSON found in %s\n(run bench/sweep.sh first)" % source)
    pts = [(pos(r.get("arithmetic_intensity")), pos(get(r, "measured", "flops_per_s")), r)
           for r in reports]
    good = [(x, y, r) for x, y, r in pts if x and y]
    # The ceilings are measured per run (p_flops = F / median compute time, ...), so they
    # differ between configurations: the line is the median over the runs, the band min..max.
    def spread(vals):
        vals = [v for v in vals if v]
        return (statistics.median(vals), min(vals), max(vals)) if vals else (None, None, None)
    p_flops, f_lo, f_hi = spread([pos(get(r, "measured", "p_flops")) for r in reports])
    p_pci, c_lo, c_hi = spread([pos(get(r, "measured", "p_pci")) for r in reports])
    ranks = sorted({int(num(r.get("ranks")) or 0) for r in reports})
    multi_p = len(ranks) > 1
    p_mpi = {}  # MPI bandwidth depends on the rank count: one line per p
    for p in ranks:
        med, lo, hi = spread([pos(get(r, "measured", "p_mpi")) for r in reports
                              if int(num(r.get("ranks")) or 0) == p])
        if med:
            p_mpi[p] = (med, lo, hi)

    if not good and not p_flops:
        return empty_plot(out_dir, name, "Roofline -- " + title_dev,
                          "%d report(s), but none has arithmetic_intensity, flops_per_s or p_flops"
                          % len(reports))

    # x range: the points and the ridge points, a decade of margin.
    xs = [x for x, _, _ in good]
    for bw in [p_pci] + [m[0] for m in p_mpi.values()]:
        if bw and p_flops:
            xs.append(p_flops / bw)
    if not xs:
        xs = [1.0]
    xlo = 10 ** math.floor(math.log10(min(xs)) - 0.5)
    xhi = 10 ** math.ceil(math.log10(max(xs)) + 0.5)
    fig, ax = plt.subplots(figsize=(12.5, 7), dpi=DPI)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xline = [xlo * (xhi / xlo) ** (i / 200) for i in range(201)]
    handles = []
    def rng(lo, hi, unit):
        return "" if lo is None or hi <= lo * 1.0001 else " (%s..%s)" % (human(lo), human(hi, unit))
    if p_flops:
        ax.axhline(p_flops, color="black", lw=2)
        if f_hi > f_lo:
            ax.axhspan(f_lo, f_hi, color="black", alpha=0.07, lw=0)
        handles.append(Line2D([], [], color="black", lw=2, label="compute p_flops = %s%s"
                              % (human(p_flops, "FLOP/s"), rng(f_lo, f_hi, "FLOP/s"))))
    bw_lines = []
    if p_pci:
        bw_lines.append((p_pci, c_lo, c_hi, "PCIe p_pci = %s%s" % (human(p_pci, "B/s"),
                         rng(c_lo, c_hi, "B/s")), "#c44e52", "-"))
    styles = ["--", "-.", ":", (0, (5, 1))]
    for i, (p, (bw, lo, hi)) in enumerate(sorted(p_mpi.items())):
        bw_lines.append((bw, lo, hi, "MPI p_mpi (p=%d) = %s%s" % (p, human(bw, "B/s"),
                         rng(lo, hi, "B/s")), "#8172b2", styles[i % len(styles)]))
    cap = (lambda v: min(v, p_flops)) if p_flops else (lambda v: v)
    for bw, lo, hi, label, color, ls in bw_lines:
        ax.plot(xline, [cap(bw * x) for x in xline], color=color, ls=ls, lw=1.8)
        if hi > lo:
            ax.fill_between(xline, [cap(lo * x) for x in xline], [cap(hi * x) for x in xline],
                            color=color, alpha=0.08, lw=0)
        handles.append(Line2D([], [], color=color, ls=ls, lw=1.8, label=label))
    if not p_pci:
        handles.append(Line2D([], [], color="none", label="p_pci: n/a (no transfers at 1 rank)"))
    if not p_mpi:
        handles.append(Line2D([], [], color="none", label="p_mpi: n/a (1 rank or not measured)"))

    # Measured points: colour by H, marker by B; the model's prediction as a hollow marker.
    hs = sorted({get(r, "config", "hidden") for _, _, r in good}, key=lambda v: num(v) or 0)
    bs = sorted({get(r, "config", "batch") for _, _, r in good}, key=lambda v: num(v) or 0)
    cmap = plt.get_cmap("viridis")
    hcolor = {h: cmap(0.1 + 0.8 * i / max(1, len(hs) - 1)) for i, h in enumerate(hs)}
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    bmark = {b: markers[i % len(markers)] for i, b in enumerate(bs)}
    any_pred = False
    labels, preds = [], []
    for x, y, r in good:
        h, b = get(r, "config", "hidden"), get(r, "config", "batch")
        ax.scatter([x], [y], color=hcolor[h], marker=bmark[b], s=70, edgecolor="black", zorder=3)
        pred = pos(r.get("roofline_prediction_flops_per_s"))
        if pred:
            any_pred = True
            preds.append((x, pred))
            ax.scatter([x], [pred], facecolor="none", edgecolor=hcolor[h], marker=bmark[b], s=70,
                       zorder=3)
            ax.plot([x, x], [y, pred], color=hcolor[h], lw=0.8, alpha=0.6, zorder=2)
        labels.append((x, y, point_label(r, multi_p)))
    skipped = len(pts) - len(good)
    for h in hs:
        handles.append(Line2D([], [], color=hcolor[h], marker="o", ls="none", mec="black",
                              label="H = %s" % h))
    for b in bs:
        handles.append(Line2D([], [], color="grey", marker=bmark[b], ls="none", mec="black",
                              label="B = %s" % b))
    if any_pred:
        handles.append(Line2D([], [], color="grey", marker="o", mfc="none", ls="none",
                              label="roofline prediction"))
    if skipped:
        handles.append(Line2D([], [], color="none",
                              label="%d point(s) without AI or FLOP/s: not shown" % skipped))

    ys = [y for _, y, _ in good] + [pos(r.get("roofline_prediction_flops_per_s")) or 0 for r in reports]
    ys = [v for v in ys if v] + ([p_flops] if p_flops else [])
    ylo = 10 ** (math.log10(min(ys)) - 0.35)
    yhi = 10 ** (math.log10(max(ys)) + 0.35)
    ax.set_xlim(xlo, xhi)
    ax.set_ylim(ylo, yhi)
    ax.set_xlabel("arithmetic intensity AI = FLOP per batch / PCIe bytes per batch (FLOP/B)")
    ax.set_ylabel("FLOP/s")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0, frameon=False)
    precs = sorted({str(r.get("precision")) for r in reports if r.get("precision")})
    ax.set_title("%d sweep point(s), %s; filled: measured FLOP/s, hollow: the run's roofline "
                 "prediction;\nceilings measured per run: line = median, band = min..max"
                 % (len(good), ", ".join(precs) or "precision ?"), fontsize=9)
    fig.suptitle("Roofline -- " + title_dev, fontsize=12)
    fig.tight_layout()
    place_labels(fig, ax, labels, preds)
    return save(fig, out_dir, name)


def place_labels(fig, ax, items, obstacles=(), fontsize=7.5):
    """Point labels that overlap neither each other nor the markers: for each point (left to
    right, bottom to top) the first free spot among right/left of the marker, then higher
    and lower ones, with a leader line when the label had to move away. Call once the
    layout is final."""
    if not items:
        return
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    pts = sorted(((*ax.transData.transform((x, y)), text) for x, y, text in items),
                 key=lambda t: (t[0], t[1]))
    r = 7.0 * fig.dpi / 72.0  # marker radius in pixels, a little generous
    taken = [(px - r, py - r, px + r, py + r) for px, py, _ in pts]
    for x, y in obstacles:  # other markers (the predictions)
        ox, oy = ax.transData.transform((x, y))
        taken.append((ox - r, oy - r, ox + r, oy + r))

    def overlap(a, b):
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0.0

    for px, py, text in pts:
        t = ax.annotate(text, (px, py), xycoords="figure pixels", textcoords="figure pixels",
                        xytext=(px, py), fontsize=fontsize, color="#333333", va="center")
        bb = t.get_window_extent(renderer)
        w, h = bb.width, bb.height
        gap = r + 2
        # Right of the marker (also one line up or down) before the left side, then further.
        cands = [(px + gap, py + dy, "left") for dy in (0, h, -h)] + \
                [(px - gap, py + dy, "right") for dy in (0, h, -h)]
        for k in range(2, 12):
            for dy in (k * h, -k * h):
                cands += [(px + gap, py + dy, "left"), (px - gap, py + dy, "right")]
        best, best_cost = None, None
        for cx, cy, ha in cands:
            x0 = cx if ha == "left" else cx - w
            box = (x0, cy - h / 2, x0 + w, cy + h / 2)
            outside = box[0] < frame.x0 or box[2] > frame.x1 or box[1] < frame.y0 or box[3] > frame.y1
            cost = sum(overlap(box, o) for o in taken) + (1e6 if outside else 0)
            if cost == 0:
                best = (cx, cy, ha, box)
                break
            if best_cost is None or cost < best_cost:
                best, best_cost = (cx, cy, ha, box), cost
        cx, cy, ha, box = best
        t.set_position((cx, cy))
        t.set_ha(ha)
        if abs(cy - py) > 0.5:
            t.arrow_patch = None
            ax.annotate("", (px, py), xycoords="figure pixels", xytext=(cx, cy),
                        textcoords="figure pixels",
                        arrowprops=dict(arrowstyle="-", color="#aaaaaa", lw=0.5, shrinkA=0,
                                        shrinkB=r * 72.0 / fig.dpi))
        taken.append(box)


# ---- (d) phases ---------------------------------------------------------------------

def phase_time(r, ph, stat):
    """Seconds per batch of phase ph in report r: mean (total_s / batches) or the per-call
    median; None when the phase did not run (count 0, null, missing)."""
    d = get(r, "phases", ph)
    if not isinstance(d, dict):
        return None
    count = num(d.get("count"))
    if count is not None and count <= 0:
        return None
    batches = pos(get(r, "per_batch", "batches"))
    total, med = num(d.get("total_s")), num(d.get("median_s"))
    v = total / batches if (stat == "mean" and total is not None and batches) else med
    if v is None and total is not None and batches:
        v = total / batches
    return v if v is not None and v >= 0 else None


def plot_phases(reports, out_dir, source, stat="mean"):
    name = "phases.png"
    title_dev = device_title([(r.get("device"), r.get("build")) for r in reports])
    if not reports:
        return empty_plot(out_dir, name, "Time per batch by phase",
                          "no nn-report-1 JSON found in %s\n(run bench/sweep.sh first)" % source)
    multi_p = len({r.get("ranks") for r in reports}) > 1
    # Segments bottom to top. forward+backward: the per-batch sum the trainer times when it
    # cannot split them (emulator); used only when forward and backward are both absent.
    # untimed: the batch's time that no phase covers (--profile barrier waits, gaps), with
    # the mean statistic only (medians do not add up).
    segs = ["forward", "backward", "forward+backward", "d2h", "allreduce", "h2d", "step", "untimed"]
    colors = dict(PHASE_COLORS, **{"forward+backward": "#3f8f8a", "untimed": "#d9d9d9"})
    labels, data, measured = [], {sg: [] for sg in segs}, []
    for r in reports:
        row = {ph: phase_time(r, ph, stat) for ph in PHASES}
        if row["forward"] is None and row["backward"] is None:
            row["forward+backward"] = phase_time(r, "forward_backward", stat)
        whole = phase_time(r, "batch", stat)
        if all(v is None for v in row.values()):
            continue
        timed = sum(v for v in row.values() if v is not None)
        row["untimed"] = whole - timed if (stat == "mean" and whole is not None and whole > timed) else None
        h, b = get(r, "config", "hidden"), get(r, "config", "batch")
        labels.append("H%s\nB%s" % (h, b) + ("\np%s" % r.get("ranks") if multi_p else ""))
        for sg in segs:
            data[sg].append((row.get(sg) or 0.0) * 1e3)
        measured.append(whole * 1e3 if whole is not None else None)
    if not labels:
        return empty_plot(out_dir, name, "Time per batch by phase -- " + title_dev,
                          "%d report(s), none with phase times\n(nn_train --report; --profile "
                          "makes the phases attributable)" % len(reports))
    present = [sg for sg in segs if any(data[sg])]
    n = len(labels)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(8.0, 0.8 * n + 4.0), 8.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    xs = list(range(n))
    bottom = [0.0] * n
    tops = [sum(data[sg][i] for sg in present) for i in range(n)]
    for sg in present:
        label = "untimed (in the batch, no phase)" if sg == "untimed" else sg
        hatch = "//" if sg == "untimed" else None
        ax.bar(xs, data[sg], 0.7, bottom=bottom, color=colors[sg], label=label,
               edgecolor="white", lw=0.5, hatch=hatch)
        ax2.bar(xs, [100 * v / t if t else 0.0 for v, t in zip(data[sg], tops)], 0.7,
                bottom=[100 * bt / t if t else 0.0 for bt, t in zip(bottom, tops)],
                color=colors[sg], edgecolor="white", lw=0.5, hatch=hatch)
        bottom = [bt + v for bt, v in zip(bottom, data[sg])]
    if any(m is not None for m in measured):
        ax.scatter([x for x, m in zip(xs, measured) if m is not None],
                   [m for m in measured if m is not None], marker="_", s=500, color="black",
                   lw=2, zorder=3, label="whole batch (%s)" % stat)
    for x, t, m in zip(xs, tops, measured):
        ax.annotate("%.3g" % t, (x, max(t, m or 0)), textcoords="offset points", xytext=(0, 4),
                    ha="center", fontsize=7.5)
    ax.set_ylabel("ms per batch (%s)" % stat)
    ax.set_ylim(0, max(max(tops), max([m for m in measured if m] or [0])) * 1.15 or 1)
    ax.grid(True, axis="y", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    stacked = [i for i, nm in enumerate(names) if not nm.startswith("whole batch")]
    order = [i for i in range(len(names)) if i not in stacked] + stacked[::-1]  # as stacked
    ax.legend([handles[i] for i in order], [names[i] for i in order], fontsize=8,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    missing = [ph for ph in PHASES if ph not in present]
    ax.set_title("%s time per batch of each phase, rank 0 (number: their sum, ms)%s" % (
        "mean (total_s / batches)" if stat == "mean" else "median",
        "\nnot run or not timed: " + ", ".join(missing) if missing else ""), fontsize=9.5)
    ax2.set_ylabel("share of the batch (%)")
    ax2.set_ylim(0, 100)
    ax2.set_xlim(-0.6 - max(0, 3 - n) / 2, n - 0.4 + max(0, 3 - n) / 2)  # few bars: not too wide
    ax2.set_xticks(xs)
    ax2.set_xticklabels(labels, fontsize=8)
    ax2.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Time per batch by phase -- " + title_dev, fontsize=12)
    fig.tight_layout()
    return save(fig, out_dir, name)


# ---- (b) training -------------------------------------------------------------------

def plot_training(metrics, report, device, out_dir):
    name = "training.png"
    dev, build = device, None
    if report:
        try:
            with open(report) as fh:
                r = json.load(fh)
            dev, build = dev or r.get("device"), r.get("build")
        except (OSError, ValueError) as e:
            warn("%s: %s" % (report, e))
    title = "Training -- " + device_title([(dev, build)])
    if not metrics or not os.path.exists(metrics):
        return empty_plot(out_dir, name, title, "no --metrics CSV (%s)" % metrics)
    rows = read_csv(metrics)
    ep = [num(r.get("epoch")) for r in rows]
    cols = {k: [num(r.get(k)) for r in rows] for k in ("loss", "train_acc", "val_acc", "seconds",
                                                      "images_per_s")}
    if not any(e is not None for e in ep):
        return empty_plot(out_dir, name, title, "%s: no epochs" % metrics)

    def series(k):
        pts = [(e, v) for e, v in zip(ep, cols[k]) if e is not None and v is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.8))
    x, y = series("loss")
    ax1.plot(x, y, "o-", color="#4c72b0")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss (CE + L2)")
    ax1.set_title("loss")
    ax1.grid(True, alpha=0.3)
    for k, color, label in (("train_acc", "#55a868", "train (during the epoch)"),
                            ("val_acc", "#c44e52", "validation (after the epoch)")):
        x, y = series(k)
        if k == "val_acc" and y and not any(y):
            continue  # no validation set: nn_train writes 0
        ax2.plot(x, y, "o-", color=color, label=label)
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy")
    ax2.set_title("accuracy")
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=9, loc="lower right")
    for ax in (ax1, ax2):
        ax.xaxis.get_major_locator().set_params(integer=True)
    secs = [v for v in cols["seconds"] if v is not None]
    ips = [v for v in cols["images_per_s"] if v is not None]
    sub = "%d epochs" % len(rows)
    if secs:
        sub += ", median %.3g s/epoch" % statistics.median(secs)
    if ips:
        sub += ", %s images/s" % human(statistics.median(ips)).strip()
    fig.suptitle("%s\n%s (%s)" % (title, sub, os.path.basename(metrics)), fontsize=11)
    fig.tight_layout()
    return save(fig, out_dir, name)


# ---- (c) GEMM bench -----------------------------------------------------------------

def plot_gemm(path, metric, out_dir):
    name = "gemm.png"
    if not path or not os.path.exists(path):
        return empty_plot(out_dir, name, "GEMM lab", "no gemm_bench CSV (%s)" % path)
    rows = [r for r in read_csv(path) if r.get("shape")]
    if not rows:
        return empty_plot(out_dir, name, "GEMM lab", "%s: no rows" % path)
    devices = []
    for r in rows:
        if r.get("device") not in devices:
            devices.append(r.get("device"))
    fig, axes = plt.subplots(len(devices), 1, figsize=(14, 5.2 * len(devices)), squeeze=False)
    for ax, dev in zip(axes[:, 0], devices):
        sub = [r for r in rows if r.get("device") == dev]
        shapes, names = [], []
        for r in sub:
            if r["shape"] not in shapes:
                shapes.append(r["shape"])
        variants = {}
        for r in sub:
            key = r.get("name") or ("variant " + str(r.get("variant")))
            variants.setdefault(key, num(r.get("variant")))
        names = sorted(variants, key=lambda k: ((variants[k] if variants[k] is not None else 99), k))
        val = {(r["shape"], r.get("name") or ("variant " + str(r.get("variant")))): pos(r.get(metric))
               for r in sub}
        cmap = plt.get_cmap("tab10")
        # The emulator's cuBLAS is OpenBLAS on the host: gemm_bench keeps naive as its baseline.
        has_cublas = any(v == 0 for v in variants.values()) and not is_emulator(dev)
        baseline = next((nm for nm in names if variants[nm] == (0 if has_cublas else 1)), None)
        width = 0.8 / max(1, len(names))
        for i, nm in enumerate(names):
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(shapes))]
            ys = [val.get((s, nm)) for s in shapes]
            bx, by = [x for x, y in zip(xs, ys) if y], [y for y in ys if y]
            if metric == "ratio":  # bars grow up or down from the baseline's 1
                ax.bar(bx, [y - 1 for y in by], width, bottom=1, color=cmap(i % 10),
                       label=nm + (" (baseline = 1)" if nm == baseline else ""),
                       edgecolor="white", lw=0.4)
            else:
                ax.bar(bx, by, width, color=cmap(i % 10), label=nm, edgecolor="white", lw=0.4)
        ax.set_yscale("log")
        ax.set_xticks(range(len(shapes)))
        dims = {}
        for r in sub:
            dims.setdefault(r["shape"], "%sx%sx%s %s%s" % (r.get("M"), r.get("N"), r.get("K"),
                                                          r.get("opA", ""), r.get("opB", "")))
        ax.set_xticklabels(["%s\n%s" % (s, dims[s]) for s in shapes], fontsize=7.5, rotation=35,
                           ha="right", rotation_mode="anchor")
        for j in range(1, len(shapes)):
            ax.axvline(j - 0.5, color="grey", lw=0.4, alpha=0.4)
        ax.set_xlim(-0.5, len(shapes) - 0.5)
        if metric == "ratio":
            ax.axhline(1.0, color="black", lw=1)
            base = "cuBLAS" if has_cublas else "naive"
            ax.set_ylabel("speed relative to %s (log)" % base)
        else:
            ax.set_ylabel("GFLOP/s (2MNK / time, log)")
        ax.grid(True, axis="y", which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0,
                  frameon=False, title="variant", title_fontsize=8)
        date = sorted({r.get("date") for r in sub if r.get("date")})
        missing = sum(1 for s in shapes for nm in names if not val.get((s, nm)))
        note = "\n" + EMU_NOTE if is_emulator(dev) else ""
        ax.set_title("GEMM lab (gemm_bench) -- device: %s%s\n%s, %s%s" % (
            dev, note, "GFLOP/s per shape and variant" if metric == "gflops" else
            "speed per shape and variant relative to the baseline", ", ".join(date),
            ", %d shape/variant pair(s) not measured" % missing if missing else ""), fontsize=11)
    fig.tight_layout()
    return save(fig, out_dir, name)


# ---- command line -------------------------------------------------------------------

def plot_peer(path, out_dir):
    """make peer's CPU table (peer_compare.sh -> peer_cpu.csv, one row per shape, procs,
    threads and system): above, each system's time / ours' (ratio, > 1: ours faster) per shape
    and run; below, each system's share of the machine's FMA peak (peak_share), ours' GEMMs
    alone (blas-bound) included."""
    name = "peer.png"
    title = ("--device cpu vs PyTorch, JAX, TensorFlow "
             "(CPU measurements; median s/epoch, same threads per process)")
    title2 = title.replace(" (", "\n(", 1)  # two lines: empty_plot's figure is narrower
    try:
        rows = read_csv(path) if path and os.path.exists(path) else []
    except (OSError, ValueError, csv.Error) as e:
        return empty_plot(out_dir, name, title2, "%s: unreadable (%s)" % (path, e))
    if rows and "system" not in rows[0]:
        why = ("is from an older `make peer` (speedup column, no system column): run `make peer` again"
               if "speedup" in rows[0] else "is not a `make peer` table (no system column)")
        return empty_plot(out_dir, name, title2, "%s %s" % (path, why))
    rows = [r for r in rows if r.get("shape") and r.get("system")]
    if not rows:
        return empty_plot(out_dir, name, title2, "no peer table (run `make peer`: %s)" % (path or "--peer"))

    # Groups (shape, procs, threads) in the table's order; systems in a fixed order, then as met.
    groups, val = [], {}
    for r in rows:
        g = (r["shape"], (r.get("procs") or "?").strip(), (r.get("threads") or "?").strip())
        if g not in groups:
            groups.append(g)
        val.setdefault((g, r["system"]), r)
    known = ["ours", "torch", "torch2", "torch2-compile", "jax", "tf", "blas-bound"]
    met = list(dict.fromkeys(r["system"] for r in rows))
    systems = sorted(met, key=lambda s: (known.index(s) if s in known else
                                         (0.5 if s.startswith("ours") else len(known) - 0.5), met.index(s)))
    palette = {"ours": "#1f77b4", "torch": "#ff7f0e", "torch2": "#d62728", "torch2-compile": "#9467bd",
               "jax": "#2ca02c", "tf": "#8c564b", "blas-bound": "#b0b0b0"}
    extra = ["#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#aec7e8", "#98df8a"]
    color = {}
    for s in systems:
        color[s] = palette.get(s) or extra[len([c for c in color if c not in palette]) % len(extra)]
    version = {s: next((r.get("version") for r in rows if r["system"] == s and r.get("version")), "")
               for s in systems}

    def label(s):
        if s == "blas-bound":
            return "ours' library GEMMs alone (blas-bound, a lower bound on ours)"
        return "%s (%s)" % (s, version[s]) if version[s] else s

    def ratio(g, s):  # the table's ratio, else its time over ours' in the group
        r = val.get((g, s))
        if r is None:
            return None
        v = pos(r.get("ratio"))
        ref = val.get((g, "ours"))
        if v is None and ref is not None and pos(ref.get("s_per_epoch")):
            t = pos(r.get("s_per_epoch"))
            v = t / pos(ref.get("s_per_epoch")) if t else None
        return v

    def share(g, s):
        r = val.get((g, s))
        v = num(r.get("peak_share")) if r is not None else None
        return v if v is not None and v >= 0 else None

    def bars(ax, g_values, per_group, log_bottom=None):
        """One bar per system with a value, side by side per group, each with its value."""
        width = 0.84 / max(1, per_group)
        for j, g in enumerate(groups):
            present = [(s, v) for s, v in g_values(g) if v is not None]
            for i, (s, v) in enumerate(present):
                x = j + (i - (len(present) - 1) / 2) * width
                drawn.add(s)
                bottom = log_bottom or 0
                ax.bar(x, v - bottom, width * 0.92, bottom=bottom, color=color[s], edgecolor="black"
                       if s == "blas-bound" else "white", lw=0.4, hatch="///" if s == "blas-bound" else None)
                ax.annotate("%.2f" % v, (x, v), xytext=(0, 1.5), textcoords="offset points", ha="center",
                            va="bottom", rotation=90, fontsize=6.5,
                            bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.8))

    def frame(ax, ylabel):
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(["%s\np=%s t=%s" % g for g in groups], fontsize=8)
        for j in range(1, len(groups)):  # thicker between shapes, thin between runs
            same = groups[j][0] == groups[j - 1][0]
            ax.axvline(j - 0.5, color="grey", lw=0.4 if same else 1.0, alpha=0.35 if same else 0.7)
        ax.set_xlim(-0.72, len(groups) - 0.5)  # room on the left for the dashed lines' labels
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(True, axis="y", which="major", alpha=0.25)

    def hline(ax, y, text):
        ax.axhline(y, color="black", lw=0.9, ls="--")
        ax.annotate(text, (-0.7, y), xytext=(0, 2), textcoords="offset points", ha="left",
                    va="bottom", fontsize=8)

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(13, 8))
    drawn = {"ours"}  # ours' version belongs in the legend even as panel 1's line alone

    # (1) their time / ours: the peers and ours with other GEMM libraries.
    others = [s for s in systems if s not in ("ours", "blas-bound")]
    ratios = [v for g in groups for v in (ratio(g, s) for s in others) if v is not None]
    if ratios:
        per_group = max(sum(1 for s in others if ratio(g, s) is not None) for g in groups)
        lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
        log = hi / lo > 5
        if log:
            ax1.set_yscale("log")
            bottom = lo / 1.6
            bars(ax1, lambda g: [(s, ratio(g, s)) for s in others], per_group, log_bottom=bottom)
            ax1.set_ylim(bottom, hi * 2.2)
            ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500) if bottom <= t <= hi * 2.2]
            ax1.set_yticks(ticks)
            ax1.set_yticklabels(["%g" % t for t in ticks])
            ax1.minorticks_off()
        else:
            bars(ax1, lambda g: [(s, ratio(g, s)) for s in others], per_group)
            ax1.set_ylim(0, hi * 1.2)
        hline(ax1, 1.0, "ours")
        frame(ax1, "their time / ours%s\n(> 1: ours faster)" % (" (log)" if log else ""))
    else:
        ax1.axis("off")
        ax1.text(0.5, 0.5, "no ratios to draw: no other system measured next to ours in %s" % path,
                 ha="center", va="center", fontsize=11, transform=ax1.transAxes)
    ax1.set_title("their time / ours, per shape and run (p processes x t threads each)", fontsize=10)

    # (2) share of the FMA peak: every system, ours' GEMMs alone included.
    shares = [v for g in groups for v in (share(g, s) for s in systems) if v is not None]
    if shares:
        per_group = max(sum(1 for s in systems if share(g, s) is not None) for g in groups)
        bars(ax2, lambda g: [(s, share(g, s)) for s in systems], per_group)
        ax2.set_ylim(0, max(shares + [1.0]) * 1.12)
        hline(ax2, 0.8, "80%")
        frame(ax2, "share of the FMA peak\n(epoch GEMM FLOP/s / peak at p*t threads)")
    else:
        ax2.axis("off")
        ax2.text(0.5, 0.5, "no row has a peak_share: the FMA peak was not measured\n"
                 "(peer_compare.sh needs FMA_PEAK, build/cpu_gemm/bin/fma_peak)",
                 ha="center", va="center", fontsize=11, transform=ax2.transAxes)
    ax2.set_title("share of the FMA peak, per shape and run", fontsize=10)

    # One legend for both panels (a system keeps its color everywhere).
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=color[s], edgecolor="black" if s == "blas-bound"
                             else "white", hatch="///" if s == "blas-bound" else None, label=label(s))
               for s in systems if s in drawn]
    ncol = max(1, min(4, len(handles)))
    nrow = -(-len(handles) // ncol)
    fig.suptitle(title, fontsize=11.5, y=0.995)
    top = 1 - (0.2 + 0.19 * nrow) / 8
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.3 / 8), ncol=ncol,
               fontsize=8, frameon=False, columnspacing=1.5, handlelength=1.6)
    fig.tight_layout(rect=(0, 0, 1, top), h_pad=1.2)
    return save(fig, out_dir, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("what", choices=["all", "roofline", "phases", "training", "gemm", "peer"])
    ap.add_argument("--sweep", nargs="+", default=[], metavar="DIR_OR_JSON",
                    help="nn-report-1 JSON files or directories of them (roofline, phases)")
    ap.add_argument("--metrics", help="nn_train --metrics CSV (training)")
    ap.add_argument("--report", help="the --report JSON of the --metrics run: gives its device")
    ap.add_argument("--device", help="device name for training.png when there is no --report")
    ap.add_argument("--gemm", help="gemm_bench --csv output (gemm)")
    ap.add_argument("--metric", choices=["gflops", "ratio"], default="gflops",
                    help="gemm.png: GFLOP/s or speed relative to the baseline [gflops]")
    ap.add_argument("--phase-stat", choices=["mean", "median"], default="mean",
                    help="phases.png: mean per batch (total_s / batches; adds up) or per-call "
                         "median [mean]")
    ap.add_argument("--peer", default="build/peer/peer_cpu.csv",
                    help="make peer's CPU table (peer) [build/peer/peer_cpu.csv]; `all` draws it when it exists")
    ap.add_argument("--out", default="build/plots", help="output directory [build/plots]")
    a = ap.parse_args()
    src = " ".join(a.sweep) or "(no --sweep given)"
    if a.what in ("all", "roofline", "phases"):
        reports = load_reports(a.sweep)
        if a.what in ("all", "roofline"):
            plot_roofline(reports, a.out, src)
        if a.what in ("all", "phases"):
            plot_phases(reports, a.out, src, a.phase_stat)
    if a.what in ("all", "training"):
        plot_training(a.metrics, a.report, a.device, a.out)
    if a.what in ("all", "gemm"):
        plot_gemm(a.gemm, a.metric, a.out)
    if a.what == "peer" or (a.what == "all" and os.path.exists(a.peer)):
        plot_peer(a.peer, a.out)


if __name__ == "__main__":
    main()
