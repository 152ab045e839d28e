#!/usr/bin/python3
"""The scaling model's parameters fitted to the measured parts, and its predictions checked
against every run there is (docs/scaling.md; the model: bench/scaling_model.py).

    bench/scaling_fit.py fit [--gpu-session DIR]...   # -> bench/scaling_params.json
    bench/scaling_fit.py check [--markdown]           # predicted vs measured, with % error
    bench/scaling_fit.py summarize DIR OUT.csv        # bench/scaling_parts.sh's runs, one row each

Inputs (committed results folders, named below as H200, H200_27, VM and VM_EPYC): the exchange's
parts on the H200 machine, the trainer at 1-16 CPU ranks and 1-4 ranks sharing its GPU (H200); one
GPU's step at the four shapes (H200_27); each 2-core VM's parts and 1-2 rank runs (VM: the Intel
Xeon VM, machine "vm"; VM_EPYC: the AMD EPYC VM, machine "vm_epyc"); and each
--gpu-session DIR, the logs of tests/cuda/gpu_session.sh's scalcal_* steps, which add measured
points (the per-rank compute at B/P, the host all-reduce at more sizes, copies, runs sharing the
GPU) and replace the estimates they cover. Standard library only.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_model as sm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(ROOT, "bench/results/h200-2026-11-28")
H200_27 = os.path.join(ROOT, "bench/results/h200-2026-11-27/call4")
VM = os.path.join(ROOT, "bench/results/cpu-2026-11-28-scaling")          # the Intel Xeon 2-core VM
VM_EPYC = os.path.join(ROOT, "bench/results/cpu-2026-12-05-scaling")     # the AMD EPYC 2-core VM
# The 2-core VMs measured with bench/scaling_parts.sh: their key in scaling_params.json's machines.
VMS = (("vm", VM), ("vm_epyc", VM_EPYC))
# The second H200 call's separate-kernel steps (--fused off: no persistent step, no PDL), always
# used; its scalcal_gpu_* steps ran the persistent step or PDL on, not the fused step of a rank
# among P, so they are left out of the fit (tests/cuda/gpu_session.sh now runs them as described).
SCALCAL = os.path.join(ROOT, "bench/results/h200-2026-11-28c/scalcal")
ALGOS = {"0": "default", "3": "recursive_doubling", "4": "ring", "6": "rabenseifner", "default": "default"}
FORM_OF = {"default": "rabenseifner", "ring": "ring", "rabenseifner": "rabenseifner",
           "recursive_doubling": "recursive_doubling"}


def rel(path):
    return os.path.relpath(path, ROOT)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


# ---- fits -------------------------------------------------------------------------------------
def line_fit(xs, ys, relative=True):
    """(a, b) of y = a + b x, least squares (relative errors when asked); exact for two points."""
    w = [1 / y ** 2 if relative else 1.0 for y in ys]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, xs))
    sy = sum(wi * y for wi, y in zip(w, ys))
    sxx = sum(wi * x * x for wi, x in zip(w, xs))
    sxy = sum(wi * x * y for wi, x, y in zip(w, xs, ys))
    det = sw * sxx - sx * sx
    if len(xs) < 2 or abs(det) < 1e-30:
        return 0.0, (sum(ys) / sum(xs)) if sum(xs) else 0.0
    b = (sw * sxy - sx * sy) / det
    return (sy - b * sx) / sw, b


def fit_alpha_beta(points, form):
    """alpha >= 0.05 us and beta of a collective's form (gamma folded into beta) minimising the
    relative squared error over points [(bytes, p, us)]: a grid over alpha, beta closed-form."""
    f = sm.FORMS[form]
    best = None
    for i in range(0, 121):
        alpha = 0.05 * 10 ** (i / 40)  # 0.05 .. 50 us
        num = den = 0.0
        for m, p, t in points:
            n = f(0, p, 1.0, 0.0)  # the form's message count
            x = f(m, p, 0.0, 1.0)  # its bytes term
            num += x * (t - alpha * n) / t ** 2
            den += x * x / t ** 2
        beta = max(num / den, 1e-9) if den else 1e-9
        err = sum(((f(m, p, alpha, beta) - t) / t) ** 2 for m, p, t in points)
        if best is None or err < best[0]:
            best = (err, alpha, beta)
    _, alpha, beta = best
    res = [[p, m, t, round(f(m, p, alpha, beta), 1)] for m, p, t in points]
    return {"form": form, "alpha_us": round(alpha, 3), "beta_us_per_byte": beta, "residuals": res}


def fit_joint(points):
    """alpha >= 0.05 us, beta (a byte moved) and gamma (a byte reduced) shared by every algorithm,
    points [(algorithm, bytes, p, us)] of ring, Rabenseifner and recursive doubling: the three
    move and reduce bytes in different ratios, which separates beta from gamma."""
    best = None
    for i in range(0, 121):
        alpha = 0.05 * 10 ** (i / 40)
        s = [[0.0] * 2 for _ in range(2)]
        y = [0.0, 0.0]
        for algo, m, p, t in points:
            f = sm.FORMS[FORM_OF[algo]]
            x = (f(m, p, 0.0, 1.0, 0.0), f(m, p, 0.0, 0.0, 1.0))
            r = t - f(0, p, alpha, 0.0)
            for j in range(2):
                y[j] += x[j] * r / t ** 2
                for k in range(2):
                    s[j][k] += x[j] * x[k] / t ** 2
        det = s[0][0] * s[1][1] - s[0][1] * s[1][0]
        if abs(det) < 1e-40:
            return None
        beta = max((y[0] * s[1][1] - y[1] * s[0][1]) / det, 1e-9)
        gamma = max((s[0][0] * y[1] - s[1][0] * y[0]) / det, 1e-9)
        err = sum(((sm.FORMS[FORM_OF[a]](m, p, alpha, beta, gamma) - t) / t) ** 2 for a, m, p, t in points)
        if best is None or err < best[0]:
            best = (err, alpha, beta, gamma)
    _, alpha, beta, gamma = best
    res = [[a, p, m, t, round(sm.FORMS[FORM_OF[a]](m, p, alpha, beta, gamma), 1)] for a, m, p, t in points]
    return {"alpha_us": round(alpha, 3), "beta_us_per_byte": beta, "gamma_us_per_byte": gamma, "residuals": res}


def parts_rows(paths):
    rows = []
    for p in paths:
        if os.path.exists(p):
            rows += [dict(r, source=rel(p)) for r in read_csv(p)]
    return rows


def median_rows(rows, key):
    """One row per key (the median of repeated measurements)."""
    acc = {}
    for r in rows:
        acc.setdefault(key(r), []).append(float(r["median_us"]))
    return {k: statistics.median(v) for k, v in acc.items()}


def fit_copies(rows):
    out = {}
    for d in ("d2h", "h2d"):
        pts = median_rows([r for r in rows if r["part"] == d and r["ranks"] == "1"], lambda r: int(r["bytes"]))
        ms = sorted(pts)
        a, b = line_fit(ms, [pts[m] for m in ms])
        out[d] = {"alpha_us": round(max(a, 0.5), 3), "beta_us_per_byte": b,
                  "points": [[m, round(pts[m], 2)] for m in ms]}
    out["source"] = "pinned cudaMemcpyAsync, one rank, median of 200 (exchange_parts): " + \
        ", ".join(sorted({r["source"] for r in rows if r["part"] in ("d2h", "h2d")}))
    return out


def fit_reduce(rows):
    pts = median_rows([r for r in rows if r["part"] == "reduce"], lambda r: int(r["bytes"]))
    ms = sorted(m for m in pts if m >= 4096) or sorted(pts)
    a, b = line_fit(ms, [pts[m] for m in ms], relative=False)
    return {"alpha_us": round(max(a, 0.0), 3), "beta_us_per_byte": b, "points": [[m, round(pts[m], 2)] for m in ms],
            "source": "y += x on one core, median (exchange_parts --parts reduce): " +
                      ", ".join(sorted({r["source"] for r in rows if r["part"] == "reduce"}))}


def fit_shm(rows, max_fit_p, note):
    """The measured table (every algorithm, rank count and size) and an alpha-beta fit a
    algorithm over rank counts up to max_fit_p."""
    ar = [r for r in rows if r["part"] == "allreduce"]
    pts = median_rows(ar, lambda r: (ALGOS.get(r["algorithm"], r["algorithm"]), int(r["ranks"]), int(r["bytes"])))
    table = [[a, p, m, round(t, 2)] for (a, p, m), t in sorted(pts.items())]
    fits = {}
    for algo in sorted({a for a, _, _ in pts}):
        use = [(m, p, t) for (a, p, m), t in pts.items() if a == algo and p <= max_fit_p and m >= 4096]
        if use:
            fits[algo] = fit_alpha_beta(use, FORM_OF.get(algo, "rabenseifner"))
    joint = fit_joint([(a, m, p, t) for (a, p, m), t in pts.items()
                       if a in ("ring", "rabenseifner", "recursive_doubling") and p <= max_fit_p and m >= 4096])
    return {"table": table, "fits": fits, "joint": joint, "fit_ranks_max": max_fit_p, "note": note,
            "source": "exchange_parts --parts allreduce, slowest rank's median: " +
                      ", ".join(sorted({r["source"] for r in ar}))}


# ---- reports ----------------------------------------------------------------------------------
def report_step(path):
    """(per-step us from the epoch times without the first, forward+backward median us, report)."""
    r = json.load(open(path))
    cfg = r["config"]
    k = -(-int(cfg["n_train"]) // int(cfg["batch"]))
    ep = [float(x) for x in r["epoch_seconds"]]
    tail = ep[1:] if len(ep) > 1 else ep
    step = statistics.median(tail) / k * 1e6
    ph = r["phases"]
    fb = (ph.get("forward_backward") or {}).get("median_s")
    return step, (fb * 1e6 if fb else None), r


def phase_us(r, name):
    v = (r["phases"].get(name) or {}).get("median_s")
    return v * 1e6 if v else 0.0


def epoch_csv_step(path, batch, n=54000):
    ep = [float(r["seconds"]) for r in read_csv(path)][1:]
    return statistics.median(ep) / -(-n // batch) * 1e6


def gpu_compute_h200(sessions):
    """The lone GPU's step (us, all in: the fused step's kernels and the host's part) at (H, b)."""
    pts, src = {}, []
    for h, b in ((256, 100), (1024, 1000)):
        step, fb, _ = report_step(os.path.join(H200, "scaling/scal_gpu_%d_%d_np1.json" % (h, b)))
        pts[(h, b)] = step
        for p in (2, 4):  # the shared runs' forward+backward at b = B/p, plus the lone run's host part
            _, fbp, _ = report_step(os.path.join(H200, "scaling/scal_gpu_%d_%d_np%d.json" % (h, b, p)))
            pts[(h, sm.slice_of(b, p))] = fbp + (step - fb)
    src.append(rel(H200) + "/scaling (1 rank; forward_backward of the shared 2/4-rank runs plus the lone run's host part)")
    pts[(512, 800)] = epoch_csv_step(os.path.join(H200, "lat_ours_512_800.csv"), 800)
    pts[(1024, 3000)] = epoch_csv_step(os.path.join(H200_27, "peer_ours_1024_3000.csv"), 3000)
    src.append(rel(H200) + "/lat_ours_512_800.csv, " + rel(H200_27) + "/peer_ours_1024_3000.csv")
    for d in sessions:
        for f in sorted(glob.glob(os.path.join(d, "scalcal_gpu_*_b*.json"))):
            m = re.search(r"scalcal_gpu_(\d+)_(\d+)_b(\d+)\.json$", f)
            step, _, _ = report_step(f)
            pts[(int(m.group(1)), int(m.group(3)))] = step
        src.append(rel(d) + "/scalcal_gpu_*")
    return pts, "; ".join(src)


def unfused_compute(sessions):
    pts = {(h, b): epoch_csv_step(os.path.join(H200_27, "peer_ours_unfused_%d_%d.csv" % (h, b)), b)
           for h, b in sm.SHAPES}
    src = [rel(H200_27) + "/peer_ours_unfused_*.csv (--fused off, one rank)"]
    for d in sessions:
        for f in sorted(glob.glob(os.path.join(d, "scalcal_unfused_*_b*.json"))):
            m = re.search(r"scalcal_unfused_(\d+)_b(\d+)\.json$", f)
            pts[(int(m.group(1)), int(m.group(2)))] = report_step(f)[0]
        src.append(rel(d) + "/scalcal_unfused_*")
    return pts, "; ".join(src)


def flop_line(pts):
    """One floor and one FLOP rate for every H: t = t0 + F(b, H) / R (the separate kernels' step
    is launch-bound at small shapes and GEMM-bound at large ones)."""
    ks = sorted(pts)
    t0, per_flop = line_fit([sm.flops(b, h) for h, b in ks], [pts[k] for k in ks])
    return max(t0, 0.0), per_flop


def compute_table(pts, source, extrapolate_note):
    """points by H, and a floor + per-image line per H (t0 interpolated in H where one point)."""
    by_h = {}
    for (h, b), t in pts.items():
        by_h.setdefault(h, []).append([b, round(t, 2)])
    fits = {}
    for h, row in by_h.items():
        if len(row) >= 2:
            a, c = line_fit([b for b, _ in row], [t for _, t in row])
            fits[h] = [max(a, 0.0), c]
    for h, row in by_h.items():
        if h not in fits:
            known = sorted(fits)
            if known:
                lo = max([k for k in known if k <= h] or [known[0]])
                hi = min([k for k in known if k >= h] or [known[-1]])
                w = 0 if hi == lo else (h - lo) / (hi - lo)
                t0 = fits[lo][0] + w * (fits[hi][0] - fits[lo][0])
            else:
                t0 = 0.0
            b, t = sorted(row)[-1]
            fits[h] = [t0, max(t - t0, 0.0) / b]
    return {"points": {str(h): sorted(r) for h, r in sorted(by_h.items())},
            "fits": {str(h): [round(v[0], 3), v[1]] for h, v in sorted(fits.items())},
            "source": source, "note": extrapolate_note}


def leave_one_out(pts):
    """Each measured point of one GPU's step predicted from the others ([H, b, measured, predicted]):
    the error of T_gpu at a per-rank batch nobody measured."""
    out = []
    for k in sorted(pts):
        rest = {q: t for q, t in pts.items() if q != k}
        if not any(q[0] == k[0] for q in rest):
            continue
        tab = compute_table(rest, "", "")
        pred = sm.compute_time({"compute": {"gpu": tab}}, k[0], k[1])
        out.append([k[0], k[1], round(pts[k], 1), round(pred, 1)])
    return out


def unfused_table(pts, source):
    t0, per_flop = flop_line(pts)
    tab = compute_table(pts, source, "model parallelism's rank at (H/P, B): t0 + F/R, one floor and rate "
                                     "for every H (%.1f us, %.1f TFLOP/s)" % (t0, 1e-6 / per_flop))
    tab["fits"] = {h: [round(t0, 3), sm.flops(1, int(h)) * per_flop] for h in tab["points"]}
    return tab


def cpu_compute_points(rows, kinds=("lone", "lone_mp")):
    """--device cpu one-rank runs: forward + backward median at (H, b), median over rounds."""
    acc = {}
    for r in rows:
        if r["kind"] in kinds and r["rc"] == "0" and r.get("fb_us"):
            acc.setdefault((int(r["hidden"]), int(r["batch"])), []).append(float(r["fb_us"]))
    return {k: statistics.median(v) for k, v in acc.items()}


def share_points(sessions):
    """(H, B, p, measured us a step) of ranks sharing one GPU."""
    out = []
    for h, b in ((256, 100), (1024, 1000)):
        for p in (2, 4):
            out.append((h, b, p, report_step(os.path.join(H200, "scaling/scal_gpu_%d_%d_np%d.json" % (h, b, p)))[0],
                        rel(H200) + "/scaling"))
    for d in sessions:
        for f in sorted(glob.glob(os.path.join(d, "scalcal_share_*_np*.json"))):
            m = re.search(r"scalcal_share_(\d+)_(\d+)_np(\d+)\.json$", f)
            out.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), report_step(f)[0], rel(d)))
    return out


def fit_sigma(par, pts):
    """The copies' slowdown when ranks share one GPU, from the 2-rank runs (the 4-rank runs check it)."""
    num = den = 0.0
    for h, b, p, t, src in pts:
        if p != 2 or src != rel(H200) + "/scaling":  # the other runs check it
            continue
        par["share"] = {"sigma": 0.0}
        base = sm.shared_gpu_step(par, h, b, p)
        par["share"] = {"sigma": 1.0}
        cop = sm.shared_gpu_step(par, h, b, p) - base
        num += cop * (t - base) / t ** 2
        den += cop * cop / t ** 2
    return max(num / den, 1.0) if den else 1.0  # a shared copy is never faster than one alone


def fit_cpu_spread(par, shape=(256, 100)):
    """The jitter of the CPU ranks' straggler term, from the H200 host's node-shared runs at one
    shape (the other shape and the VM's runs check it): the median step against the model with
    the run's own compute and no straggler."""
    par["cpu_spread"] = {"jitter_us": 0.0}
    num = den = 0.0
    h, b = shape
    for p in (2, 4, 8, 16):
        _, fb, r = report_step(os.path.join(H200, "scaling/scal_cpu_%d_%d_np%d.json" % (h, b, p)))
        t = phase_us(r, "batch")
        base = sm.cpu_step_time(par, h, b, p, "allreduce", True, compute=fb)["total"]
        x = sm.expected_max(p)
        num += x * (t - base) / t ** 2
        den += x * x / t ** 2
    return {"jitter_us": round(num / den, 2), "source": "fitted to the node-shared --device cpu runs at %d:%d, "
            "2-16 ranks on the H200 machine's host (%s/scaling): median step against the model with the "
            "run's own compute" % (h, b, rel(H200))}


def fit_thread_slowdown(par, shape=(256, 100)):
    """The slowdown t of a rank whose core's other thread runs another rank (the H200 machine's 16
    CPUs are 8 cores with two threads each), fitted with the jitter to the node-shared runs at one
    shape (1024:1000 checks both): a grid over t, least squared log error."""
    h, b = shape
    runs = []
    for p in (2, 4, 8, 16):
        _, _, r = report_step(os.path.join(H200, "scaling/scal_cpu_%d_%d_np%d.json" % (h, b, p)))
        runs.append((p, phase_us(r, "batch")))
    best = None
    for i in range(100, 301):
        par["cpu_cores"] = {"cores": 8, "thread_slowdown": i / 100}
        e = sum(math.log(sm.cpu_step_time(par, h, b, p, "allreduce", True)["total"] / t) ** 2 for p, t in runs)
        if best is None or e < best[0]:
            best = (e, i / 100)
    return {"cores": 8, "thread_slowdown": best[1], "source": "fitted to the node-shared --device cpu runs at "
            "%d:%d, 2-16 ranks (%s/scaling); P(two ranks on one core) for P ranks placed at random on 16 CPUs "
            "of 8 cores" % (h, b, rel(H200))}


def update_fit():
    pts = []
    for h, b in ((256, 100), (1024, 1000)):
        _, _, r = report_step(os.path.join(H200, "scaling/scal_gpu_%d_%d_np2.json" % (h, b)))
        pts.append((sm.grad_bytes(h), phase_us(r, "step")))
    a, c = line_fit([m for m, _ in pts], [t for _, t in pts], relative=False)
    return a, c, pts


# ---- the parameter file -------------------------------------------------------------------------
def h200_params(sessions):
    parts = [os.path.join(H200, "exchange_parts.csv")] + [p for d in sessions for p in glob.glob(os.path.join(d, "scalcal_parts*.csv"))]
    rows = parts_rows(parts)
    gpu, gsrc = gpu_compute_h200(sessions)
    unf, usrc = unfused_compute([SCALCAL] + [d for d in sessions if os.path.abspath(d) != SCALCAL])
    ua, uc, upts = update_fit()
    cpu = {}
    for h, b in ((256, 100), (1024, 1000)):
        _, fb, _ = report_step(os.path.join(H200, "scaling/scal_cpu_%d_%d_np1.json" % (h, b)))
        cpu[(h, b)] = fb
    par = {
        "label": "NVIDIA H200 (one), its host's 16 cores (Intel Xeon), Open MPI 4.1.4 shared memory",
        "pcie": fit_copies(rows),
        "reduce": fit_reduce(rows),
        "shm": fit_shm(rows, 8, "fitted on 2-8 ranks: at 16 ranks the host's 16 CPUs behave as 8 cores "
                                "with two threads each (the trainer's per-rank compute at 16 ranks is 1.8x its 1/16)"),
        "compute": {
            "gpu": dict(compute_table(gpu, gsrc, "between measured b: linear; beyond: t0(H) + c(H) b"),
                        loo=leave_one_out(gpu)),
            "gpu_unfused": unfused_table(unf, usrc),
            "cpu": compute_table(cpu, rel(H200) + "/scaling/scal_cpu_*_np1.json (forward+backward, 1 core)",
                                 "one point a shape: c = T/B, no floor"),
        },
        "gpu_fixed": {
            "host_us_lone": 0.0,
            "round_trip_us": 10.0,
            "update_floor_us": round(max(ua, 1.0), 3), "update_us_per_byte": uc,
            "dw1_tflops": 22.9, "dw1_floor_us": 5.0, "chunk_overhead_us": 5.0, "sigma_step": 0.03,
            "source": "update: the 'step' phase of the 2-rank runs %s; dW1 GEMM: 70.0 us at 1024:1000 "
                      "(Nsight Compute, bench/results/h200-2026-11-27/call3) = 22.9 TFLOP/s; round trip: an "
                      "estimate, two host wake-ups a step at ~5 us (a stream launch 4.7 us, "
                      "bench/results/h200-2026-11-28/latency_probe.log); a pipelined chunk: one more wake-up, 5 us; "
                      "sigma_step: an estimate of a GPU step's spread (3%%; one rank's mean step is 1.05-1.06x "
                      "its median on the H200, a right tail)" % [[m, round(t, 1)] for m, t in upts],
        },
    }
    par["cpu_spread"] = fit_cpu_spread(par)
    par["cpu_cores"] = fit_thread_slowdown(par)
    shared = share_points(sessions)
    par["share"] = {"sigma": 1.0}
    par["share"] = {"sigma": round(fit_sigma(par, shared), 3),
                    "source": "fitted to the 2-rank runs sharing the H200 (%s)" % rel(H200)}
    return par


def vm_params(vm=VM):
    """A 2-core VM's parts, all from its own bench/scaling_parts.sh folder (nothing from its runs)."""
    rows = parts_rows([os.path.join(vm, "exchange_parts.csv")])
    runs = read_csv(os.path.join(vm, "runs_summary.csv"))
    cpu = cpu_compute_points(runs)
    machine = open(os.path.join(vm, "machine.txt")).read().strip().replace("\n", "; ")
    return {
        "label": "the 2-core development VM (%s)" % machine,
        "reduce": fit_reduce(rows),
        "shm": fit_shm(rows, 2, "2 ranks, one a core"),
        "compute": {"cpu": compute_table(cpu, rel(vm) + "/runs_summary.csv (lone runs: forward+backward, 1 core)",
                                         "between measured b: linear; beyond: t0(H) + c(H) b"),
                    "cpu_corun": compute_table(cpu_compute_points(runs, ("corun",)), rel(vm) + "/runs_summary.csv "
                                               "(corun: 2 one-rank runs started together, forward+backward)",
                                               "2 ranks' worth of load on the VM's 2 cores")},
    }


def cmd_fit(a):
    out = {"schema": "nn-scaling-params-1",
           "note": "written by bench/scaling_fit.py fit from the measured parts; docs/scaling.md",
           "machines": {"h200": h200_params(a.gpu_session)}}
    for key, vm in VMS:
        if os.path.exists(os.path.join(vm, "runs_summary.csv")):
            out["machines"][key] = vm_params(vm)
    text = json.dumps(out, indent=1, sort_keys=True)
    # Each innermost list (a point, a residual row) on one line.
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    print("scaling_fit: %s (%s)" % (rel(a.out), ", ".join(out["machines"])))


# ---- scaling_parts.sh's output -> one row a run ------------------------------------------------------
SUMMARY = ["tag", "kind", "hidden", "batch", "ranks", "per_rank_batch", "strategy", "node_shared", "round",
           "load1", "rc", "step_us", "batch_median_us", "fb_us", "allreduce_us", "step_phase_us", "steps"]


def cmd_summarize(a):
    rows = read_csv(os.path.join(a.dir, "runs.csv"))
    with open(a.out, "w") as f:
        w = csv.DictWriter(f, SUMMARY, lineterminator="\n")
        w.writeheader()
        for r in rows:
            o = {k: r.get(k, "") for k in SUMMARY}
            path = os.path.join(a.dir, r["report"])
            if r["rc"] == "0" and os.path.exists(path):
                step, fb, rep = report_step(path)
                cfg = rep["config"]
                o.update(step_us="%.2f" % step, fb_us="%.2f" % fb if fb else "",
                         batch_median_us="%.2f" % phase_us(rep, "batch"), allreduce_us="%.2f" % phase_us(rep, "allreduce"),
                         step_phase_us="%.2f" % phase_us(rep, "step"), steps=-(-int(cfg["n_train"]) // int(cfg["batch"])))
            w.writerow(o)
    print("scaling_fit: %s" % a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="what", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--gpu-session", action="append", default=[], help="logs of the scalcal_* steps")
    f.add_argument("--out", default=sm.PARAMS)
    s = sub.add_parser("summarize")
    s.add_argument("dir")
    s.add_argument("out")
    c = sub.add_parser("check")
    c.add_argument("--params", default=sm.PARAMS)
    c.add_argument("--markdown", action="store_true")
    c.add_argument("--csv", help="the rows as CSV too")
    c.add_argument("--gpu-session", action="append", default=[], help="logs of the scalcal_* steps")
    a = ap.parse_args()
    if a.what == "fit":
        cmd_fit(a)
    elif a.what == "summarize":
        cmd_summarize(a)
    else:
        import scaling_check
        scaling_check.main(a)


if __name__ == "__main__":
    main()
