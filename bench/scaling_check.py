#!/usr/bin/python3
"""The scaling model's predictions beside every run it can be checked against (bench/scaling_fit.py
check; docs/scaling.md "Checked against what runs"). Each row: the run (machine, shape, ranks,
strategy), its measured time a step, the model's, and the error. Measured: on a GPU the median
epoch after the first over its steps (what a user waits for); with --device cpu the median of the
steps (--report's batch phase), since the CPU runs are short (18-180 steps) or on a VM whose
other users' builds stall a rank now and then, and a stall of either rank stalls both. Two predictions where a rank's compute can come from two places: "lone" takes it from one
rank alone at the slice b = ceil(B/P) (the model's own input, what a GPU rank would see), "in run"
from the run's own --report (forward + backward, the part as the ranks computed it side by side).
"""
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_fit as sf  # noqa: E402
import scaling_model as sm  # noqa: E402

TOLERANCE = 0.25


def err(pred, meas):
    return (pred - meas) / meas if meas else float("nan")


def vm_rows(par):
    """This VM's --device cpu runs at 1 and 2 ranks (medians over the rounds)."""
    path = os.path.join(sf.VM, "runs_summary.csv")
    if "vm" not in par or not os.path.exists(path):
        return []
    vm = par["vm"]
    runs = [r for r in sf.read_csv(path) if r["kind"] == "run" and r["rc"] == "0" and r["step_us"]]
    lone = [r for r in sf.read_csv(path) if r["kind"] == "lone" and r["rc"] == "0" and r["step_us"]]
    groups = {}
    for r in runs:
        groups.setdefault((int(r["hidden"]), int(r["batch"]), int(r["ranks"]), r["strategy"], r["node_shared"]), []).append(r)
    out = []
    for h, b in sm.SHAPES:
        ones = [float(r["batch_median_us"]) for r in lone if int(r["hidden"]) == h and int(r["batch"]) == b]
        if ones:
            meas = statistics.median(ones)
            pred = sm.cpu_step_time(vm, h, b, 1)["total"]
            out.append(row("VM, --device cpu", h, b, 1, "one rank (calibration)", meas, pred, None, len(ones)))
        for (hh, bb, p, strat, ns), rs in sorted(groups.items()):
            if (hh, bb) != (h, b):
                continue
            meas = statistics.median(float(r["batch_median_us"]) for r in rs)
            shared = strat == "allreduce" and ns != "off"
            pred = sm.cpu_step_time(vm, h, b, p, strat, shared)["total"]
            corun = sm.cpu_step_time(vm, h, b, p, strat, shared, corun=True)["total"]
            inrun = statistics.median(sm.cpu_step_time(vm, h, b, p, strat, shared, compute=float(r["fb_us"]))["total"]
                                      for r in rs)
            what = strat + (" node-shared" if shared else (" (--node-shared off)" if strat == "allreduce" else ""))
            out.append(row("VM, --device cpu", h, b, p, what, meas, pred, inrun, len(rs), corun))
    return out


def h200_cpu_rows(par):
    """The H200 machine's host, 1-16 CPU ranks (node-shared, the default), 256:100 and 1024:1000."""
    out = []
    h2 = par["h200"]
    for h, b in ((256, 100), (1024, 1000)):
        for p in (1, 2, 4, 8, 16):
            _, fb, rep = sf.report_step(os.path.join(sf.H200, "scaling/scal_cpu_%d_%d_np%d.json" % (h, b, p)))
            step = sf.phase_us(rep, "batch")
            pred = sm.cpu_step_time(h2, h, b, p, "allreduce", p > 1)["total"]
            inrun = sm.cpu_step_time(h2, h, b, p, "allreduce", p > 1, compute=fb)["total"]
            what = "node-shared" + (" (j fitted here)" if (h, b) == (256, 100) else "") if p > 1 else "one rank (calibration)"
            out.append(row("H200 host, --device cpu", h, b, p, what, step, pred, inrun, 1))
    return out


def share_rows(par, sessions=()):
    h2 = par["h200"]
    out = []
    for h, b, p, t, src in sf.share_points(sessions):
        pred = sm.shared_gpu_step(h2, h, b, p)
        what = "%d ranks SHARING one GPU%s" % (p, " (s fitted here)" if p == 2 and "h200-2026-11-28" in src else "")
        out.append(row("H200, one GPU shared", h, b, p, what, t, pred, None, 1))
    for h, b in ((256, 100), (1024, 1000)):
        t = sf.report_step(os.path.join(sf.H200, "scaling/scal_gpu_%d_%d_np1.json" % (h, b)))[0]
        out.append(row("H200, one GPU", h, b, 1, "one rank (calibration)", t, sm.step_time(h2, h, b, 1)["total"], None, 1))
    return out


def row(machine, h, b, p, what, meas, pred, inrun, n, corun=None):
    return {"machine": machine, "shape": "%d:%d" % (h, b), "ranks": p, "what": what, "runs": n,
            "measured_us": meas, "model_us": pred, "error": err(pred, meas),
            "model_corun_us": corun, "error_corun": err(corun, meas) if corun is not None else None,
            "model_inrun_us": inrun, "error_inrun": err(inrun, meas) if inrun is not None else None}


def all_rows(par, sessions=()):
    return vm_rows(par) + h200_cpu_rows(par) + share_rows(par, sessions)


def pct(x):
    return "" if x is None else "%+.0f%%" % (100 * x)


def num_or_blank(x):
    return "" if x is None else "%.0f" % x


def print_rows(rows, markdown):
    cols = ["machine", "shape", "P", "run", "measured µs", "model: one rank's compute", "error",
            "model: co-run compute", "error", "model: the run's compute", "error"]
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    for r in rows:
        cells = [r["machine"], r["shape"], str(r["ranks"]), r["what"], "%.0f" % r["measured_us"],
                 "%.0f" % r["model_us"], pct(r["error"]), num_or_blank(r["model_corun_us"]), pct(r["error_corun"]),
                 num_or_blank(r["model_inrun_us"]), pct(r["error_inrun"])]
        if markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("%-24s %-10s %3s %-34s %8s %8s %5s %8s %5s %8s %5s" % tuple(cells))


def write_csv(rows, path):
    with open(path, "w") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main(a):
    par = sm.load(a.params)["machines"]
    rows = all_rows(par, getattr(a, "gpu_session", []) or [])
    print_rows(rows, a.markdown)
    for key, what in (("error", "one rank's compute"), ("error_corun", "co-run compute"),
                      ("error_inrun", "the run's own compute")):
        have = [r for r in rows if r[key] is not None]
        over = [r for r in have if abs(r[key]) > TOLERANCE]
        print("%s model with %s: %d rows, %d within %d%%; beyond: %s" % (
            "\n" if key == "error" else "", what, len(have), len(have) - len(over), 100 * TOLERANCE,
            "; ".join("%s %s P=%d %s (%s)" % (r["machine"], r["shape"], r["ranks"], r["what"], pct(r[key]))
                      for r in over) or "none"))
    if getattr(a, "csv", None):
        write_csv(rows, a.csv)
