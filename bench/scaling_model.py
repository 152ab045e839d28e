#!/usr/bin/python3
"""When do more GPUs pay? The step-time model of nn_train at P ranks (docs/scaling.md).

    T(P) = T_compute(b) + T_fixed + T_copies(M) + T_allreduce(M, P) - T_overlap,   b = ceil(B/P)

for the 784-H-10 network with M = 4(795H + 10) gradient bytes, in strong scaling (global batch
B fixed, b = ceil(B/P): the slowest rank's slice) and weak scaling (b = B a rank). Each
strategy has its own form (step_time); the collectives are alpha-beta(-gamma) costs: alpha a
message, beta a byte moved, gamma a byte reduced. The measured parts and the fitted parameters
live in bench/scaling_params.json (written by bench/scaling_fit.py from the measurements);
the published interconnect figures below carry their sources. Standard library only.

    bench/scaling_model.py table                  # strong and weak scaling, 1-64 GPUs, every shape
    bench/scaling_model.py verdict                # how many GPUs pay, per shape and interconnect
    bench/scaling_model.py pipeline               # the chunked dW1 exchange: chunk size, what it hides
    bench/scaling_model.py markdown               # the tables of docs/scaling.md
    bench/scaling_model.py step --hidden 1024 --batch 3000 --ranks 8 [--config nccl]   # one step's parts
"""
import argparse
import json
import math
import os

D, C = 784, 10
SHAPES = [(256, 100), (512, 800), (1024, 1000), (1024, 3000)]
RANKS = [1, 2, 4, 8, 16, 32, 64]
HERE = os.path.dirname(os.path.abspath(__file__))
PARAMS = os.path.join(HERE, "scaling_params.json")


def grad_bytes(h):
    """The packed gradient [W1 | b1 | W2 | b2] in float: 4 (795 H + 10) bytes."""
    return 4 * (h * (D + C + 1) + C)


def layer2_bytes(h):
    """[W2 | b2], exchanged first (overlapped with the dW1 GEMM)."""
    return 4 * (C * h + C)


def node_shared_bytes(h):
    """--device cpu --node-shared: only [b1 | W2 | b2] is summed."""
    return 4 * (h + C * h + C)


def flops(b, h):
    """The report's F = 4 b H (D + C): forward and the two weight-gradient GEMMs."""
    return 4.0 * b * h * (D + C)


def slice_of(batch, p):
    return -(-batch // p)


def log2c(p):
    return math.ceil(math.log2(p)) if p > 1 else 0


# ---- published interconnect figures (not measured here) ---------------------------------------
# alpha: us a message (or a collective's start-up); bw: GB/s. Each says where it comes from.
FABRICS = {
    "ib_hdr": {"alpha_us": 2.0, "bw_GBps": 21.1, "label": "InfiniBand HDR (200 Gb/s), host MPI",
               "source": "bw: osu_bw 21.1 GB/s at 4 MB on ConnectX-6 HDR (openucx/ucx#8851); "
                         "alpha: assumed 2 us an MPI message (1-2 us is usual on HDR/NDR; not measured here)"},
    "ib_ndr": {"alpha_us": 2.0, "bw_GBps": 47.0, "label": "InfiniBand NDR (400 Gb/s), host MPI",
               "source": "bw: 46-48 GB/s a NIC at NDR 400 Gb/s (NVIDIA, NVIDIA/nccl-tests#290); "
                         "alpha: assumed 2 us, as for HDR"},
    # NCCL on one node: calibrated to unsourced 8 x H100 PyTorch DDP all-reduce times (1 MB in
    # ~32 us, 4 MB in ~59 us): alpha 23 us, bus bandwidth 204 GB/s at these sizes. NVIDIA
    # gives ~370 GB/s effective NVLink bus bandwidth (ring) at large sizes (NVIDIA/nccl-tests#212)
    # and ~6 us for a small NVLS all-reduce under CUDA graphs (NVIDIA/nccl#1259): the optimistic end.
    "nccl_nvlink": {"alpha_us": 23.0, "busbw_GBps": 204.0, "label": "NCCL over NVLink (one node)",
                    "source": "fit to unsourced PyTorch DDP/NCCL figures on 8 H100 (1 MB 32 us, 4 MB 59 us); "
                              "bounds: NVIDIA/nccl-tests#212 (370 GB/s ring busbw), NVIDIA/nccl#1259 (6 us)"},
    # NCCL across nodes on NDR: calibrated to unsourced figures, 2-4 MB in 93-153 us (2 nodes);
    # consistent with 46-48 GB/s a NIC (NVIDIA/nccl-tests#290) and a ~46 us small all-reduce over
    # 2 nodes x 8 GPUs on NDR (NVIDIA/nccl#1244).
    "nccl_ndr": {"alpha_us": 33.0, "busbw_GBps": 65.0, "label": "NCCL over NVLink + NDR (several nodes)",
                 "source": "fit to unsourced figures (2 MB 93 us, 4 MB 153 us across 2 nodes on NDR); "
                           "cf. NVIDIA/nccl-tests#290, NVIDIA/nccl#1244"},
}


# ---- collectives (microseconds; bytes) ---------------------------------------------------------
def ring(m, p, alpha, beta, gamma=0.0):
    """Reduce-scatter + allgather around a ring."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * m * beta + (p - 1) / p * m * gamma


def rabenseifner(m, p, alpha, beta, gamma=0.0):
    """Recursive halving (reduce-scatter) + recursive doubling (allgather)."""
    if p <= 1:
        return 0.0
    return 2 * log2c(p) * alpha + 2 * (p - 1) / p * m * beta + (p - 1) / p * m * gamma


def recursive_doubling(m, p, alpha, beta, gamma=0.0):
    if p <= 1:
        return 0.0
    return log2c(p) * (alpha + m * beta + m * gamma)


FORMS = {"ring": ring, "rabenseifner": rabenseifner, "recursive_doubling": recursive_doubling}


def shm_allreduce(par, m, p, algo="default"):
    """The host all-reduce among p ranks of one node (Open MPI's shared-memory transport).

    Measured points are used as they are, interpolated log-log in the byte count between two
    measured sizes; elsewhere the algorithm's alpha-beta form with its fitted parameters."""
    if p <= 1 or m <= 0:
        return 0.0
    return par.get("shm_scale", 1.0) * measured_or_fitted(par["shm"], m, p, algo)


def measured_or_fitted(shm, m, p, algo):
    pts = sorted((b, t) for a, q, b, t in shm.get("table", []) if a == algo and q == p)
    if len(pts) >= 2 and pts[0][0] <= m <= pts[-1][0]:
        for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
            if b0 <= m <= b1:
                if b1 == b0:
                    return t0
                f = math.log(m / b0) / math.log(b1 / b0)
                return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
    fit = shm["fits"].get(algo) or shm["fits"]["default"]
    form = FORMS[fit.get("form", "rabenseifner")]
    return form(m, p, fit["alpha_us"], fit["beta_us_per_byte"], fit.get("gamma_us_per_byte", 0.0))


def reduce_cost(par, m):
    """One core's y += x over m bytes (the host's reduction rate)."""
    r = par["reduce"]
    return r["alpha_us"] + m * r["beta_us_per_byte"]


def mpi_gamma(par):
    """Open MPI's own reduction, a byte: the joint fit over the node's algorithms (it reduces
    the same bytes whichever transport brought them)."""
    joint = par["shm"].get("joint")
    return joint["gamma_us_per_byte"] if joint else par["reduce"]["beta_us_per_byte"]


def net_allreduce(par, fabric, m, n):
    """Host MPI all-reduce among n node leaders over InfiniBand (Rabenseifner: log-latency,
    bandwidth-optimal): the wire's alpha and beta, Open MPI's reduction on the host."""
    if n <= 1:
        return 0.0
    f = FABRICS[fabric]
    return rabenseifner(m, n, f["alpha_us"], 1e-3 / f["bw_GBps"], mpi_gamma(par))


def host_allreduce(par, m, p, per_node, fabric, algo="default"):
    """p ranks, per_node of them a node: one node's shared-memory all-reduce, or the hierarchical
    form (reduce to a leader in the node, all-reduce among the N leaders, broadcast back; the
    reduce and the broadcast together cost one node all-reduce)."""
    if p <= per_node:
        return shm_allreduce(par, m, p, algo)
    nodes = -(-p // per_node)
    return shm_allreduce(par, m, per_node, algo) + net_allreduce(par, fabric, m, nodes)


def nccl_allreduce(m, p, per_node):
    if p <= 1:
        return 0.0
    f = FABRICS["nccl_nvlink" if p <= per_node else "nccl_ndr"]
    return f["alpha_us"] + 2 * (p - 1) / p * m * 1e-3 / f["busbw_GBps"]


def ps_exchange(par, m, p, per_node, fabric):
    """--strategy ps: rank 0 receives p-1 gradients in turn, adds each, sends p-1 back. On one
    node a round (send, add, return) costs about two 2-rank all-reduces; across nodes the
    server's link carries 2(p-1) messages of m bytes."""
    if p <= 1:
        return 0.0
    if p <= per_node:
        return (p - 1) * 2 * shm_allreduce(par, m, 2)
    f = FABRICS[fabric]
    return (p - 1) * (2 * f["alpha_us"] + 2 * m * 1e-3 / f["bw_GBps"] + m * mpi_gamma(par))


def copy_cost(par, m, direction):
    c = par["pcie"][direction]
    return c["alpha_us"] + m * c["beta_us_per_byte"]


def expected_max(p):
    """E[max of p independent standard normal variables] (0 for one): how far the slowest of p
    ranks lags the typical one, in standard deviations of a rank's compute time."""
    if p <= 1:
        return 0.0
    n, lo, hi = 4000, -9.0, 9.0
    dx = (hi - lo) / n
    total = 0.0
    for i in range(n):
        x = lo + (i + 0.5) * dx
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * p * pdf * cdf ** (p - 1) * dx
    return total


def straggler(sigma, p, compute):
    """Every step ends in a collective, so it waits for the slowest rank's compute: sigma (the
    relative spread of a rank's compute time) x E[max of p] x compute."""
    return sigma * expected_max(p) * compute


# ---- compute ------------------------------------------------------------------------------------
def compute_time(par, h, b, kind="gpu"):
    """A rank's forward + backward at hidden h and slice b: measured points interpolated
    linearly in b at a measured h; elsewhere the fitted latency floor + per-image time
    (t0(h) + c(h) b, t0 interpolated in h, c proportional to h). kind: gpu (the fused step),
    gpu_unfused (separate kernels: model parallelism), cpu (--device cpu, one core)."""
    table = par["compute"][kind]
    row = table["points"].get(str(h))
    if row:
        pts = sorted(row)
        if pts[0][0] <= b <= pts[-1][0]:
            for (b0, t0), (b1, t1) in zip(pts, pts[1:] or pts):
                if b0 <= b <= b1:
                    return t0 if b1 == b0 else t0 + (t1 - t0) * (b - b0) / (b1 - b0)
    return floor_and_slope(table, h, b)


def floor_and_slope(table, h, b):
    fits = sorted((int(k), v) for k, v in table["fits"].items())
    if str(h) in table["fits"]:
        t0, c = table["fits"][str(h)]
    else:
        hs = [k for k, _ in fits]
        lo = max([k for k in hs if k <= h] or [hs[0]])
        hi = min([k for k in hs if k >= h] or [hs[-1]])
        f0, f1 = dict(fits)[lo], dict(fits)[hi]
        w = 0.0 if hi == lo else (h - lo) / (hi - lo)
        t0 = f0[0] + w * (f1[0] - f0[0])
        per_unit = [v[1] / k for k, v in fits]
        c = sum(per_unit) / len(per_unit) * h
    return t0 + c * b


def dw1_gemm_time(par, h, b):
    """The dW1 GEMM alone (2 H D b FLOPs at the measured rate, above a launch floor)."""
    g = par["gpu_fixed"]
    return max(g["dw1_floor_us"], 2.0 * h * D * b / (g["dw1_tflops"] * 1e6))


# ---- the step ----------------------------------------------------------------------------------
CONFIGS = {
    # name: (strategy, exchange, label)
    "host": ("allreduce", "host", "MPI_Allreduce on pinned host memory (--mpi host, the default)"),
    "device": ("allreduce", "device", "CUDA-aware Open MPI (--mpi device): stages through the host itself"),
    "ps": ("ps", "host", "parameter server (--strategy ps)"),
    "model": ("model", "host", "model parallelism (--strategy model)"),
    "nccl": ("allreduce", "nccl", "NCCL all-reduce on device buffers (not in nn_train: what it would change)"),
}


def one_gpu_step(par, h, b):
    """A lone rank: the fused step, its update folded into the dW1 GEMM, one graph replay."""
    return compute_time(par, h, b) + par["gpu_fixed"]["host_us_lone"]


def step_time(par, h, batch, p, config="host", mode="strong", per_node=8, fabric="ib_ndr", algo="default"):
    """One step at p ranks, one GPU each: {part: us} and 'total'. mode strong: the global batch is
    `batch`; weak: every rank takes `batch`."""
    strategy, exchange, _ = CONFIGS[config]
    g = par["gpu_fixed"]
    b = slice_of(batch, p) if mode == "strong" else batch
    gbatch = batch if mode == "strong" else batch * p
    if p == 1:
        t = one_gpu_step(par, h, gbatch)
        return {"compute": t - g["host_us_lone"], "fixed": g["host_us_lone"], "total": t}
    m, m2 = grad_bytes(h), layer2_bytes(h)
    parts = {"fixed": g["host_us_lone"] + g["round_trip_us"], "update": update_time(par, m)}
    if strategy == "model":
        hp = -(-h // p)
        parts["compute"] = compute_time(par, hp, gbatch, "gpu_unfused")
        s = 4 * C * gbatch
        parts["copies"] = copy_cost(par, s, "d2h") + copy_cost(par, s, "h2d")
        parts["allreduce"] = host_allreduce(par, s, p, per_node, fabric, algo)
        parts["update"] = update_time(par, m / p)
    elif exchange == "nccl":  # stream-ordered: no host round trip inside the step
        parts["fixed"] = g["host_us_lone"]
        parts["compute"] = compute_time(par, h, b)
        parts["allreduce"] = nccl_allreduce(m, p, per_node)
    else:
        parts["compute"] = compute_time(par, h, b)
        parts["copies"] = copy_cost(par, m, "d2h") + copy_cost(par, m, "h2d")
        if strategy == "ps":
            parts["allreduce"] = ps_exchange(par, m, p, per_node, fabric)
        else:
            parts["allreduce"] = host_allreduce(par, m, p, per_node, fabric, algo)
        if exchange == "host":  # layer 2's copy and reduction run under the dW1 GEMM
            hide = m2 * par["pcie"]["d2h"]["beta_us_per_byte"] + host_allreduce(par, m2, p, per_node, fabric, algo)
            parts["overlap"] = -min(hide, dw1_gemm_time(par, h, b) + copy_cost(par, m - m2, "d2h"))
    parts["agree"] = agree_exposed(par, p, per_node, fabric, parts)
    parts["wait"] = straggler(g["sigma_step"], p, parts["compute"])
    parts["total"] = sum(v for k, v in parts.items())
    return parts


def update_time(par, m):
    g = par["gpu_fixed"]
    return g["update_floor_us"] + m * g["update_us_per_byte"]


def agree_exposed(par, p, per_node, fabric, parts):
    """The 8-byte all-reduce after every step (divergence and stop flags) runs on the host while
    the device uploads and updates: only what is longer than those shows."""
    small = host_allreduce(par, 8, p, per_node, fabric)
    under = parts.get("update", 0.0) + (parts.get("copies", 0.0) / 2)
    return max(0.0, small - under)


def shared_gpu_step(par, h, batch, p):
    """p ranks time-slicing ONE GPU (no MPS): their kernels and copies run one process at a time,
    and each copy waits for the GPU to switch to its context (sigma: the copies' slowdown, fitted
    to the 2-rank runs). What sharing costs, never what p GPUs would do."""
    b = slice_of(batch, p)
    g, s = par["gpu_fixed"], par["share"]
    m = grad_bytes(h)
    gpu = p * (compute_time(par, h, b) + update_time(par, m))
    copies = s["sigma"] * p * (copy_cost(par, m, "d2h") + copy_cost(par, m, "h2d"))
    return gpu + copies + shm_allreduce(par, m, p) + g["host_us_lone"] + g["round_trip_us"]


def cpu_step_time(par, h, batch, p, strategy="allreduce", node_shared=False, compute=None, corun=False):
    """--device cpu, p ranks on one node, one core each: the same composition with the host's
    own parts (no copies; the update is a pass over the weights at the host's reduction rate).
    compute: a rank's forward + backward if measured, else the lone rank's at b (the CPU
    compute points), or with corun the compute of one of p independent ranks started together
    (cpu_corun: the host's cores, caches and memory shared as in the run; a model-parallel rank's
    lone compute scaled by the same ratio). Layer 2's reduction is not hidden here: the cores that would progress it
    are computing dW1. Every step waits for the slowest rank, and ranks sharing a host's cores
    are held up by its other work (cpu_spread: jitter_us x E[max of p], the jitter fitted to one
    shape's runs, whatever the compute)."""
    b = slice_of(batch, p)
    if p == 1:
        t = compute if compute is not None else compute_time(par, h, b, "cpu")
        return {"compute": t, "total": t}
    m, m2 = grad_bytes(h), layer2_bytes(h)
    parts = {"agree": shm_allreduce(par, 8, p)}
    shared = 1.0
    if corun and compute is None:
        shared = compute_time(par, h, b, "cpu_corun") / compute_time(par, h, b, "cpu")
    if strategy == "model":
        parts["compute"] = compute if compute is not None else shared * compute_time(par, -(-h // p), batch, "cpu")
        parts["allreduce"] = shm_allreduce(par, 4 * C * batch, p)
        parts["update"] = reduce_cost(par, m / p)
    else:
        parts["compute"] = compute if compute is not None else shared * compute_time(par, h, b, "cpu")
        if node_shared:  # [b1 | W2 | b2] between two fences, then a barrier; each rank steps 1/p
            parts["allreduce"] = shm_allreduce(par, node_shared_bytes(h), p) + 3 * shm_allreduce(par, 8, p)
            parts["update"] = reduce_cost(par, m / p)
        elif strategy == "ps":
            parts["allreduce"] = ps_exchange(par, m, p, p, None)
            parts["update"] = reduce_cost(par, m)
        else:
            parts["allreduce"] = shm_allreduce(par, m - m2, p) + shm_allreduce(par, m2, p)
            parts["update"] = reduce_cost(par, m)
    parts["wait"] = par.get("cpu_spread", {}).get("jitter_us", 0.0) * expected_max(p)
    parts["total"] = sum(parts.values())
    return parts


def speedup(par, h, batch, p, **kw):
    """Strong: T(1)/T(P) (the same global batch); weak: P T(1)/T(P) (images a second)."""
    mode = kw.get("mode", "strong")
    t1 = step_time(par, h, batch, 1, **kw)["total"]
    tp = step_time(par, h, batch, p, **kw)["total"]
    return t1 / tp if mode == "strong" else p * t1 / tp


def best_ranks(par, h, batch, ranks=RANKS, **kw):
    """(P with the largest speedup, that speedup, the smallest P > 1 faster than one GPU or None)."""
    s = {p: speedup(par, h, batch, p, **kw) for p in ranks}
    best = max(s, key=lambda p: (s[p], -p))
    first = next((p for p in ranks if p > 1 and s[p] > 1.0), None)
    return best, s[best], first


# ---- the chunked dW1 exchange ------------------------------------------------------------------
def pipeline(par, h, b, p, per_node=8, fabric="ib_ndr", max_chunks=64, linear=False):
    """dW1 (M1 bytes) computed, downloaded, all-reduced and uploaded in n chunks, each stage on its
    own engine (GEMM on the SMs, D2H and H2D copy engines, MPI on the host). n chunks take
        T(n) = sum of one chunk's stages + (n - 1) x its slowest stage,
    each chunk's host stage paying one more wake-up and enqueue (chunk_overhead_us), against
    T(1) = T_gemm + T_d2h + T_ar + T_h2d of the whole M1. Returns the best n, its chunk bytes and
    what it hides (us, and as a fraction of the unchunked exchange T_d2h + T_ar + T_h2d); bound_us:
    all but the slowest stage, what no chunking can beat. linear: the all-reduce of a chunk costs
    its start-up plus its share of the whole one's time (overlap alone; by default a chunk costs
    what the measured all-reduce of its size costs, which on these hosts is less a byte for
    chunks that stay in cache)."""
    m1 = grad_bytes(h) - layer2_bytes(h)
    tg = dw1_gemm_time(par, h, b)
    extra = par["gpu_fixed"].get("chunk_overhead_us", 5.0)
    start = host_allreduce(par, 8, p, per_node, fabric)
    whole = host_allreduce(par, m1, p, per_node, fabric)

    def allreduce(m):
        return start + (whole - start) * m / m1 if linear else host_allreduce(par, m, p, per_node, fabric)

    def stages(m, n):
        return [tg * m / m1, copy_cost(par, m, "d2h"), allreduce(m) + (extra if n > 1 else 0.0),
                copy_cost(par, m, "h2d")]

    def total(n):
        s = stages(m1 / n, n)
        return sum(s) + (n - 1) * max(s)

    base = total(1)
    best = min(range(1, max_chunks + 1), key=total)
    exch = sum(stages(m1, 1)[1:])
    hidden = base - total(best)
    return {"chunks": best, "chunk_bytes": m1 / best, "hidden_us": hidden, "exchange_us": exch,
            "hidden_fraction": hidden / exch if exch else 0.0, "bound_us": base - max(stages(m1, 1))}


def load(path=PARAMS):
    with open(path) as f:
        return json.load(f)


# ---- command line --------------------------------------------------------------------------------
def fmt_parts(parts):
    return ", ".join("%s %.0f" % (k, v) for k, v in parts.items() if k != "total" and abs(v) >= 0.5)


def cmd_table(par, a):
    for mode in ("strong", "weak"):
        print("%s scaling, modelled speedup (strong: T(1)/T(P), same global batch; weak: P T(1)/T(P), "
              "images/s), %d ranks a node, %s across nodes" % (mode, a.per_node, FABRICS[a.fabric]["label"]))
        print("  %-10s %-7s" % ("shape", "config") + "".join("%8s" % ("P=%d" % p) for p in RANKS))
        for h, bt in SHAPES:
            for cfg in a.configs:
                row = [speedup(par, h, bt, p, config=cfg, mode=mode, per_node=a.per_node, fabric=a.fabric)
                       for p in RANKS]
                print("  %-10s %-7s" % ("%d:%d" % (h, bt), cfg) + "".join("%8.2f" % s for s in row))
        print()


def cmd_verdict(par, a):
    print("How many GPUs pay (model): the best P of 1-64 and the first P faster than one GPU")
    for mode in ("strong", "weak"):
        for h, bt in SHAPES:
            for cfg in a.configs:
                best, s, first = best_ranks(par, h, bt, config=cfg, mode=mode, per_node=a.per_node, fabric=a.fabric)
                print("  %-6s %-10s %-7s best P=%-3d (%.2fx)  first P faster than 1: %s"
                      % (mode, "%d:%d" % (h, bt), cfg, best, s, first or "none"))


def cmd_pipeline(par, a):
    print("Chunked dW1 exchange (model; host all-reduce, %d ranks a node, %s across nodes)"
          % (a.per_node, FABRICS[a.fabric]["label"]))
    print("  overlap alone: a chunk's all-reduce costs its start-up and its share of the whole;"
          " measured sizes: what the node's all-reduce of that size was measured to cost")
    print("  %-10s %4s %10s | %6s %11s %9s %8s | %6s %11s %9s %8s" % (
        "shape", "P", "exch us", "chunks", "chunk bytes", "hidden us", "hidden", "chunks", "chunk bytes",
        "hidden us", "hidden"))
    for h, bt in SHAPES:
        for p in (2, 8, 64):
            lin = pipeline(par, h, slice_of(bt, p), p, a.per_node, a.fabric, linear=True)
            r = pipeline(par, h, slice_of(bt, p), p, a.per_node, a.fabric)
            print("  %-10s %4d %10.1f | %6d %11.0f %9.1f %7.1f%% | %6d %11.0f %9.1f %7.1f%%" % (
                "%d:%d" % (h, bt), p, r["exchange_us"], lin["chunks"], lin["chunk_bytes"], lin["hidden_us"],
                100 * lin["hidden_fraction"], r["chunks"], r["chunk_bytes"], r["hidden_us"], 100 * r["hidden_fraction"]))


def cmd_markdown(par, a):
    """The tables docs/scaling.md shows, from the parameter file."""
    for mode in ("strong", "weak"):
        print("%s scaling (%s), modelled, %d GPUs a node, %s across nodes:\n" % (
            mode, "T(1)/T(P)" if mode == "strong" else "P T(1)/T(P)", a.per_node, FABRICS[a.fabric]["label"]))
        print("| H:B | configuration | " + " | ".join("P=%d" % p for p in RANKS[1:]) + " |")
        print("|---|---|" + "---|" * (len(RANKS) - 1))
        for h, bt in SHAPES:
            for cfg in a.configs:
                row = [speedup(par, h, bt, p, config=cfg, mode=mode, per_node=a.per_node, fabric=a.fabric)
                       for p in RANKS[1:]]
                print("| %d:%d | %s | %s |" % (h, bt, cfg, " | ".join(("**%.2f**" if s > 1 else "%.2f") % s for s in row)))
        print()
    print("One step's parts at P = 8, one node (us, strong scaling):\n")
    keys = ["compute", "fixed", "update", "copies", "allreduce", "overlap", "agree", "wait", "total"]
    print("| H:B | configuration | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for h, bt in SHAPES:
        for cfg in a.configs:
            s = step_time(par, h, bt, 8, cfg, "strong", a.per_node, a.fabric)
            print("| %d:%d | %s | %s |" % (h, bt, cfg, " | ".join("%.0f" % s[k] if k in s else "-" for k in keys)))
    print("\nOne GPU (the fused step): " + ", ".join("%d:%d %.1f us" % (h, bt, step_time(par, h, bt, 1)["total"]) for h, bt in SHAPES))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("what", choices=["table", "verdict", "pipeline", "step", "markdown"])
    ap.add_argument("--params", default=PARAMS)
    ap.add_argument("--machine", default="h200", help="measured parts to use (a key of the params file)")
    ap.add_argument("--per-node", type=int, default=8, help="GPUs (ranks) a node")
    ap.add_argument("--fabric", default="ib_ndr", choices=["ib_hdr", "ib_ndr"])
    ap.add_argument("--configs", default="host,ps,model,nccl")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=3000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--config", default="host", choices=sorted(CONFIGS))
    ap.add_argument("--mode", default="strong", choices=["strong", "weak"])
    ap.add_argument("--allreduce-scale", type=float, default=1.0,
                    help="multiply the node's measured host all-reduce (a faster or slower host)")
    a = ap.parse_args()
    a.configs = [c for c in a.configs.split(",") if c]
    par = load(a.params)["machines"][a.machine]
    par["shm_scale"] = a.allreduce_scale
    if a.what == "table":
        cmd_table(par, a)
    elif a.what == "verdict":
        cmd_verdict(par, a)
    elif a.what == "pipeline":
        cmd_pipeline(par, a)
    elif a.what == "markdown":
        cmd_markdown(par, a)
    else:
        parts = step_time(par, a.hidden, a.batch, a.ranks, a.config, a.mode, a.per_node, a.fabric)
        print("%d:%d at P=%d (%s, %s): %.1f us a step (%s)" % (a.hidden, a.batch, a.ranks, a.config, a.mode,
              parts["total"], fmt_parts(parts)))


if __name__ == "__main__":
    main()
