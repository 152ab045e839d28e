#!/usr/bin/python3
"""The scaling model beside every committed multi-rank run (docs/scaling.md "Checked against what
runs"): one row a run, model / measured, each within [1 - TOLERANCE, 1 + TOLERANCE]; a run left out
of the verdict is listed with the reason. Exit 1 where a checked run misses.

    bench/scaling_check.py [--markdown] [--csv OUT]     # make scaling-check

Measured: on a GPU the median epoch after the first over its steps; with --device cpu the median
step (--report's batch phase). The model's inputs are the parts measured apart from the run: one
rank's compute at the slice b = ceil(B/P) (on each 2-core VM, the co-run compute of P one-rank runs
started together: ranks there share the cores with each other, and on the Intel VM with other
users; on the H200 host, the chance that a rank shares a core's two threads), the exchange's parts
and the fitted terms. Each VM's runs are modelled on that VM's own parts: the Intel Xeon VM's
(machine "vm"), the AMD EPYC VM's (machine "vm_epyc"; also its --exact off cost runs at 2 ranks).
Nothing of a VM is fitted to its runs; on the H200 host j and t are fitted to the 256:100 runs, and
s to the 2-rank runs sharing the GPU (the rows say so).

The Intel VM's runs (LOADED_VM) are not in the verdict: that VM's two cores were shared with other
users' compile jobs. They are left out with the reason (LOADED_VM_WHY) and their ratios printed
after the verdict for reference; the parameters fitted on that VM ("vm": its parts and one-rank
runs) serve those reference rows and the plots, nothing in the verdict.
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_fit as sf  # noqa: E402
import scaling_model as sm  # noqa: E402

TOLERANCE = 0.25
RESULTS = os.path.join(sf.ROOT, "bench/results")
H200C = os.path.join(RESULTS, "h200-2026-11-28c")


def row(machine, h, b, p, what, meas, pred, source):
    return {"machine": machine, "shape": "%d:%d" % (h, b), "ranks": p, "run": what, "measured_us": meas,
            "model_us": pred, "ratio": pred / meas, "source": source}


# The 2-core VMs measured with bench/scaling_parts.sh: (key in the parameters, folder, name in the rows).
VMS = (("vm", sf.VM, "Intel VM, --device cpu"), ("vm_epyc", sf.VM_EPYC, "EPYC VM, --device cpu"))
EPYC_STUDY = os.path.join(RESULTS, "cpu-2026-11-23")
# Measured while other users' jobs shared the VM's cores: every multi-rank run of it is left out of
# the verdict (exclusions) and its rows printed for reference (reference_rows), misses marked.
LOADED_VM = VMS[0]
LOADED_VM_WHY = ("measured on a VM whose two cores were shared with other users' compile jobs (load average "
                 "6.5-13); the model's CPU rank owns its core and has no term for a rank descheduled where the "
                 "ranks wait for each other; the same configurations measured on an idle VM "
                 "(cpu-2026-12-05-scaling) are checked instead")
EXACT = os.path.join(RESULTS, "exact/cost.csv")


def vm_rows(par):
    """Each 2-core VM's --device cpu runs at 2 ranks (median over the rounds), on its own parts."""
    out = []
    for key, folder, machine in VMS:
        path = os.path.join(folder, "runs_summary.csv")
        if key not in par or not os.path.exists(path):
            continue
        vm, groups = par[key], {}
        for r in sf.read_csv(path):
            if r["kind"] == "run" and r["rc"] == "0" and r["step_us"]:
                groups.setdefault((int(r["hidden"]), int(r["batch"]), int(r["ranks"]), r["strategy"], r["node_shared"]),
                                  []).append(r)
        for (h, b, p, strat, ns), rs in sorted(groups.items()):
            meas = statistics.median(float(r["batch_median_us"]) for r in rs)
            shared = strat == "allreduce" and ns != "off"
            pred = sm.cpu_step_time(vm, h, b, p, strat, shared, corun=True)["total"]
            what = strat + (" node-shared" if shared else (" (--node-shared off)" if strat == "allreduce" else ""))
            out.append(row(machine, h, b, p, what, meas, pred, sf.rel(path)))
    return out


def epyc_rows(par):
    """The AMD EPYC VM's --exact off rows of exact/cost.csv at 2 ranks (--device cpu, one thread a
    rank on a core of its own, node-shared), on the parts measured on that VM (sf.VM_EPYC)."""
    if "vm_epyc" not in par or not os.path.exists(EXACT):
        return []
    out = []
    for r in sf.read_csv(EXACT):
        if r["device"] == "cpu" and r["exact"] == "off" and r["ranks"] == "2":
            h, b = int(r["hidden"]), int(r["batch"])
            pred = sm.cpu_step_time(par["vm_epyc"], h, b, 2, "allreduce", True, corun=True)["total"]
            out.append(row(VMS[1][2], h, b, 2, "allreduce node-shared (--exact off)", 1e3 * float(r["batch_median_ms"]),
                           pred, sf.rel(EXACT)))
    return out


def epyc_study_why(par):
    """Why the AMD EPYC VM's scaling study (EPYC_STUDY) is left out, with its one-rank
    forward+backward against the compute measured on that VM since (sf.VM_EPYC)."""
    path = os.path.join(EPYC_STUDY, "scaling.csv")
    if "vm_epyc" not in par:
        return "the AMD EPYC 2-core VM: none of its parts was measured (no inputs), and the code predates node-shared weights"
    ones = sorted({(int(r["hidden"]), int(r["batch"]), float(r["phase_forward_backward_ms"]))
                   for r in sf.read_csv(path) if r["p"] == "1" and r["strategy"] == "allreduce"}, key=lambda x: -x[1])
    cmp = ", ".join("%d:%d %.2f ms against %.2f, %.2fx" % (h, b, t, c / 1e3, 1e3 * t / c)
                    for h, b, t in ones for c in [sm.compute_time(par["vm_epyc"], h, b, "cpu")])
    return ("its code ran the GEMMs in OpenBLAS (oneDNN is the default since 7695aab) and predates "
            "node-shared weights: one rank's forward+backward then was not the compute measured on this VM now "
            "(%s), and the model has no parts for that code" % cmp)


def h200_cpu_rows(par):
    """The H200 machine's host, 2-16 CPU ranks (node-shared, the default)."""
    out, h2 = [], par["h200"]
    for h, b in ((256, 100), (1024, 1000)):
        for p in (2, 4, 8, 16):
            path = os.path.join(sf.H200, "scaling/scal_cpu_%d_%d_np%d.json" % (h, b, p))
            _, _, rep = sf.report_step(path)
            pred = sm.cpu_step_time(h2, h, b, p, "allreduce", True)["total"]
            what = "node-shared" + (" (j, t fitted here)" if (h, b) == (256, 100) else "")
            out.append(row("H200 host, --device cpu", h, b, p, what, sf.phase_us(rep, "batch"), pred, sf.rel(path)))
    return out


def pieces_of(rep):
    return int((rep.get("exchange") or {}).get("pieces") or 1)


def shared_gpu_rows(par):
    """Ranks sharing the one H200: the scaling runs (one piece), scalcal_share and xchg_* (pieces
    as each run's --report gives them)."""
    h2, out = par["h200"], []
    paths = sorted(glob.glob(os.path.join(sf.H200, "scaling/scal_gpu_*_np[2-9].json")))
    paths += sorted(glob.glob(os.path.join(H200C, "scalcal/scalcal_share_*_np*.json")))
    paths += sorted(glob.glob(os.path.join(H200C, "session/xchg_*_np*.json")))
    for path in paths:
        step, _, rep = sf.report_step(path)
        cfg = rep["config"]
        h, b, p = int(cfg["hidden"]), int(cfg["batch"]), int(rep["ranks"])
        n = pieces_of(rep)
        fitted = " (s fitted here)" if p == 2 and "/scaling/" in path else ""
        what = "%d ranks SHARING one GPU, %d piece%s%s" % (p, n, "s" if n > 1 else "", fitted)
        out.append(row("H200, one GPU shared", h, b, p, what, step, sm.shared_gpu_step(h2, h, b, p, n), sf.rel(path)))
    return out


def exclusions(par):
    """Committed multi-rank runs the model does not describe, with the reason."""
    out, epyc = [], "vm_epyc" in par
    path = os.path.join(LOADED_VM[1], "runs_summary.csv")
    if os.path.exists(path):  # every multi-rank configuration of it, whatever the parameters
        n = len({(r["hidden"], r["batch"], r["ranks"], r["strategy"], r["node_shared"])
                 for r in sf.read_csv(path) if r["kind"] == "run" and int(r["ranks"]) > 1})
        out.append(("%s (the Intel VM, 2 ranks, each run the median of its rounds)" % sf.rel(path), n, LOADED_VM_WHY))
    for path in sorted(glob.glob(os.path.join(RESULTS, "emulator-*/scaling/*.csv"))):
        n = sum(1 for r in sf.read_csv(path) if int(r["p"]) > 1)
        out.append((sf.rel(path), n, "the SIMT emulator on the CPU: its step time is the emulator's, no GPU's or core's"))
    exact = os.path.join(RESULTS, "exact/cost.csv")
    if os.path.exists(exact):
        rows = [r for r in sf.read_csv(exact) if int(r["ranks"]) > 1]
        out.append((sf.rel(exact) + " (--exact on)", sum(r["exact"] == "on" for r in rows),
                    "--exact on sums fixed-point words (16 bytes a value) with its own threads: not in the model"))
        out.append((sf.rel(exact) + " (emulator)", sum(r["exact"] == "off" and r["device"] == "gpu" for r in rows),
                    "the SIMT emulator's step time"))
        cpu_off = [r for r in rows if r["exact"] == "off" and r["device"] == "cpu"]
        if epyc:  # the 2-rank rows are checked (epyc_rows)
            out.append((sf.rel(exact) + " (--device cpu, --exact off, 3-4 ranks)", sum(int(r["ranks"]) > 2 for r in cpu_off),
                        "3 and 4 ranks on the VM's 2 cores: the model's CPU rank has a core of its own (its co-run "
                        "compute is 2 ranks on 2 cores)"))
        else:
            out.append((sf.rel(exact) + " (--device cpu, --exact off)", len(cpu_off),
                        "the AMD EPYC 2-core VM: none of its parts (all-reduce, reduction, co-run compute) was measured, "
                        "so the model has no inputs for it"))
    for name in ("scaling.csv", "variants.csv"):
        path = os.path.join(EPYC_STUDY, name)
        if os.path.exists(path):
            out.append((sf.rel(path), sum(int(r["p"]) > 1 for r in sf.read_csv(path)), epyc_study_why(par)))
    logs = sorted(glob.glob(os.path.join(RESULTS, "**/*verify_np[2-9]*.log"), recursive=True))
    if logs:
        out.append(("%d --verify logs (%s, ...)" % (len(logs), sf.rel(logs[0])), len(logs),
                    "--verify runs: one epoch whose time includes the CPU reference's replay, a correctness check"))
    return out


def vm_ps_evidence(par):
    """What the 2-core VM's --strategy ps runs show beside --node-shared off (docs/scaling.md,
    "Checked against what runs"): lines of text, every number from the committed files."""
    path = os.path.join(sf.VM, "runs_summary.csv")
    if "vm" not in par or not os.path.exists(path):
        return []
    runs = [r for r in sf.read_csv(path) if r["kind"] == "run" and r["rc"] == "0" and r["step_us"]
            and r["node_shared"] == "off" and r["strategy"] in ("ps", "allreduce")]
    by = {}
    for r in sorted(runs, key=lambda r: r["round"]):
        by.setdefault((int(r["hidden"]), int(r["batch"]), r["strategy"]), []).append(r)
    return _rounds(by) + _phases(par["vm"], by) + _waits(par["vm"], by) + _lightly_loaded(par["vm"]) + _idle_epyc(par)


def _idle_epyc(par):
    """The same configuration on the idle AMD EPYC VM, checked on its own parts."""
    rows = [r for r in vm_rows(par) if r["machine"] == VMS[1][2] and r["run"] == "ps"]
    if not rows:
        return []
    return ["the AMD EPYC VM, idle (%s), --strategy ps at 2 ranks on its own parts, model / measured: %s"
            % (os.path.dirname(rows[0]["source"]), ", ".join("%s %.2f" % (r["shape"], r["ratio"]) for r in rows))]


def _rounds(by):
    """Each round's median step against the sum of its phases' medians."""
    out = ["rank 0's median step / the sum of its phases' medians (forward+backward, exchange, step: the update "
           "and the 8-byte agreement), round by round (runs_summary.csv):"]
    for h, b in sm.SHAPES:
        cells = []
        for strat, label in (("ps", "ps"), ("allreduce", "--node-shared off")):
            sums = [(float(r["batch_median_us"]), float(r["fb_us"]) + float(r["allreduce_us"]) + float(r["step_phase_us"]))
                    for r in by.get((h, b, strat), [])]
            cells.append(label + " " + " ".join("%.0f/%.0f (%.2f)" % (t, ph, t / ph) for t, ph in sums))
        out.append("  %d:%d: %s" % (h, b, "; ".join(cells)))
    return out


def _phases(vm, by):
    """Rank 0's forward+backward and exchange phases (medians of the rounds) against the model's parts."""
    out = ["rank 0's phases, medians of the rounds: forward+backward under ps / --node-shared off / the co-run "
           "compute; ps's exchange / the two sums the model prices:"]
    for h, b in sm.SHAPES:
        if not by.get((h, b, "ps")) or not by.get((h, b, "allreduce")):
            continue
        med = {s: {k: statistics.median(float(r[k]) for r in by[(h, b, s)]) for k in ("fb_us", "allreduce_us")}
               for s in ("ps", "allreduce")}
        parts = sm.cpu_step_time(vm, h, b, 2, "ps", False, corun=True)
        fb, ex = med["ps"]["fb_us"], med["ps"]["allreduce_us"]
        out.append("  %d:%d: forward+backward %.0f / %.0f / %.0f us (%.2fx, %.2fx); exchange %.0f / %.0f us (%.2fx)" % (
            h, b, fb, med["allreduce"]["fb_us"], parts["compute"], fb / med["allreduce"]["fb_us"], fb / parts["compute"],
            ex, parts["allreduce"], ex / parts["allreduce"]))
    return out


def _waits(vm, by):
    """A straggler's wait at each meeting of the ranks, fitted to the --node-shared off runs (one
    meeting a step: layer 2's MPI_Iallreduce does not block), counted twice for ps (layer 2's
    blocking sum in the backward pass, then layer 1's); three forms of the wait in the compute c."""
    meas = {k: statistics.median(float(r["batch_median_us"]) for r in rs) for k, rs in by.items()}
    forms = {"linear in the compute": lambda c, n: c, "square root of it": lambda c, n: n * math.sqrt(c / n),
             "constant": lambda c, n: float(n)}
    out = []
    for name, g in forms.items():
        num = den = 0.0
        for h, b in sm.SHAPES:
            t = meas.get((h, b, "allreduce"))
            if t:
                parts = sm.cpu_step_time(vm, h, b, 2, "allreduce", False, corun=True)
                x = g(parts["compute"], 1)
                num, den = num + x * (t - parts["total"]) / t ** 2, den + x * x / t ** 2
        k = num / den if den else 0.0
        ps = ["%d:%d %.2f" % (h, b, (parts["total"] + k * g(parts["compute"], 2)) / meas[(h, b, "ps")])
              for h, b in sm.SHAPES if (h, b, "ps") in meas
              for parts in [sm.cpu_step_time(vm, h, b, 2, "ps", False, corun=True)]]
        out.append("a wait at each meeting %s, fitted to the --node-shared off runs, twice for ps: %s" % (name, ", ".join(ps)))
    return out


def _lightly_loaded(vm):
    """The AMD EPYC VM's 2-rank ps and allreduce (the whole gradient: the code predates node-shared
    weights), lightly loaded, against the model's ratio on the 2-core VM's parts."""
    path = os.path.join(RESULTS, "cpu-2026-11-23", "scaling.csv")
    if not os.path.exists(path):
        return []
    rows = {(r["mode"], r["strategy"]): r for r in sf.read_csv(path) if r["p"] == "2"}
    a, q = rows.get(("strong", "allreduce")), rows.get(("strong", "ps"))
    if not a or not q:
        return []
    h, b = int(a["hidden"]), int(a["batch"])
    model = (sm.cpu_step_time(vm, h, b, 2, "ps", False, corun=True)["total"]
             / sm.cpu_step_time(vm, h, b, 2, "allreduce", False, corun=True)["total"])
    return ["the AMD EPYC VM, lightly loaded (%s), %d:%d at 2 ranks: ps / allreduce %.3f (step %s / %s ms, "
            "forward+backward %s / %s ms); the model on the Intel VM's parts: %.3f"
            % (sf.rel(path), h, b, float(q["step_ms"]) / float(a["step_ms"]), q["step_ms"], a["step_ms"],
               q["phase_forward_backward_ms"], a["phase_forward_backward_ms"], model)]


def reference_rows(par):
    """The loaded Intel VM's rows: printed for reference, not in the verdict."""
    return [r for r in vm_rows(par) if r["machine"] == LOADED_VM[2]]


def all_rows(par):
    """The rows of the verdict: every VM's but the loaded one's, and the H200 machine's."""
    vms = [r for r in vm_rows(par) if r["machine"] != LOADED_VM[2]]
    return vms + epyc_rows(par) + h200_cpu_rows(par) + shared_gpu_rows(par)


def print_rows(rows, markdown, miss="miss"):
    cols = ["machine", "shape", "P", "run", "measured µs", "model µs", "model / measured"]
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    for r in rows:
        cells = [r["machine"], r["shape"], str(r["ranks"]), r["run"], "%.0f" % r["measured_us"], "%.0f" % r["model_us"],
                 ("%.2f" if abs(r["ratio"] - 1) <= TOLERANCE else "**%.2f (" + miss + ")**") % r["ratio"]]
        if markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("%-24s %-10s %3s %-40s %8s %8s %6s" % tuple(cells))


def check(par):
    """(rows, misses, exclusions)."""
    rows = all_rows(par)
    return rows, [r for r in rows if abs(r["ratio"] - 1) > TOLERANCE], exclusions(par)


def main(a):
    par = sm.load(a.params)["machines"]
    rows, misses, excl = check(par)
    print_rows(rows, a.markdown)
    print("\n%d multi-rank runs checked, %d within %.2f-%.2f; misses: %s" % (
        len(rows), len(rows) - len(misses), 1 - TOLERANCE, 1 + TOLERANCE,
        "; ".join("%s %s P=%d %s (%.2f)" % (r["machine"], r["shape"], r["ranks"], r["run"], r["ratio"]) for r in misses)
        or "none"))
    print("left out of the verdict (%d runs), each with the reason:" % sum(n for _, n, _ in excl))
    for what, n, why in excl:
        print("  %s: %d run%s: %s" % (what, n, "" if n == 1 else "s", why))
    ref = reference_rows(par)
    if ref:
        would = [r for r in ref if abs(r["ratio"] - 1) > TOLERANCE]
        print("\nfor reference, not in the verdict: the %d runs of %s (left out above), model / measured: "
              "%d within %.2f-%.2f, %d would miss%s\n" % (
                  len(ref), os.path.dirname(ref[0]["source"]), len(ref) - len(would), 1 - TOLERANCE, 1 + TOLERANCE,
                  len(would), "".join((": " if i == 0 else ", ") + "%s %s %.2f" % (r["shape"], r["run"], r["ratio"])
                                      for i, r in enumerate(would))))
        print_rows(ref, a.markdown, "would miss")
        if any(r["run"] == "ps" for r in would):
            print("\nthe Intel VM's --strategy ps would miss, not understood (docs/scaling.md); what its runs show:")
            for line in vm_ps_evidence(par):
                print("  " + line)
    if getattr(a, "csv", None) and rows:
        with open(a.csv, "w") as f:
            w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    return 1 if misses else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default=sm.PARAMS)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("--gpu-session", action="append", default=[], help="accepted for make scaling; unused")
    sys.exit(main(ap.parse_args()))
