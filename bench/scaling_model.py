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
    # NCCL, one node (8 GPUs on NVSwitch, HGX/DGX H100): NCCL's own cost model, its published
    # constants: a protocol's base latency plus one NVLink hop latency a ring step (src/graph/tuning.cc,
    # as quoted in NVIDIA/nccl#1334: Ring LL 6.6 + 0.6 us a step, LL128 14.0 + 1.9, Simple 8.4 + 3.4),
    # at the ring's effective NVLink bus bandwidth, 370 GB/s on H100 (NVIDIA in NVIDIA/nccl-tests#212),
    # times the protocol's payload fraction (LL: 4 data bytes in 8; LL128: 120 in 128; Simple: all).
    "nccl_nvlink": {"protocols": {"LL": (6.6, 0.6, 0.5), "LL128": (14.0, 1.9, 120 / 128), "Simple": (8.4, 3.4, 1.0)},
                    "busbw_GBps": 370.0, "label": "NCCL over NVLink (one node)",
                    "source": "latencies: NCCL's tuning model (src/graph/tuning.cc, quoted in NVIDIA/nccl#1334); "
                              "bus bandwidth: 370 GB/s ring on 8 x H100 (NVIDIA/nccl-tests#212); payload "
                              "fractions of LL/LL128 from their formats (an assumption of this model)"},
    # NCCL across nodes on InfiniBand NDR: a small all-reduce over 2 nodes x 8 GPUs (16 ConnectX-7 NDR
    # NICs) takes 46-48 us (NCCL 2.21.5, NVLSTree; NVIDIA/nccl#1244, H20 nodes), the bus bandwidth of
    # a ring across nodes is what one NIC carries, 46-48 GB/s at NDR 400 Gb/s (NVIDIA in
    # NVIDIA/nccl-tests#290); beyond 2 nodes each doubling adds two network tree hops of 5.0 us
    # (tuning.cc's NET Tree LL latency, NVIDIA/nccl#1334): that growth is an assumption.
    "nccl_ndr": {"alpha_us": 47.0, "hop_us": 5.0, "busbw_GBps": 47.0, "label": "NCCL over NVLink + NDR (several nodes)",
                 "source": "alpha: 46-48 us small all-reduce, 2 x 8 GPUs on NDR (NVIDIA/nccl#1244); busbw: 46-48 GB/s "
                           "a NIC at NDR (NVIDIA/nccl-tests#290); 5 us a tree hop beyond 2 nodes (tuning.cc, "
                           "NVIDIA/nccl#1334), its growth with the node count assumed"},
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
    """ncclAllReduce of m bytes over p GPUs: one node, the fastest of NCCL's ring protocols
    (latency a step and payload fraction each); across nodes, the network's start-up and one
    NIC's bus bandwidth."""
    if p <= 1:
        return 0.0
    share = 2 * (p - 1) / p * m * 1e-3
    if p <= per_node:
        f = FABRICS["nccl_nvlink"]
        return min(base + 2 * (p - 1) * hop + share / (f["busbw_GBps"] * frac)
                   for base, hop, frac in f["protocols"].values())
    f = FABRICS["nccl_ndr"]
    nodes = -(-p // per_node)
    return f["alpha_us"] + 2 * f["hop_us"] * (log2c(nodes) - 1) + share / f["busbw_GBps"]


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
    "host": ("allreduce", "host", "--comm host (the default): device -> pinned host -> MPI_Allreduce -> device, "
                                  "layer 1 in --exchange-chunk pieces (512 KiB)"),
    "device": ("allreduce", "device", "--comm device: CUDA-aware MPI on device pointers (Open MPI stages "
                                      "through host buffers itself; no pieces, no layer-2 overlap)"),
    "nccl": ("allreduce", "nccl", "--comm nccl: ncclAllReduce on the device, layer 2's sum on a second stream "
                                  "under the dW1 GEMM, no host copy"),
    "ps": ("ps", "host", "parameter server (--strategy ps)"),
    "model": ("model", "host", "model parallelism (--strategy model)"),
}
PIECE_BYTES = 512 * 1024  # --exchange-chunk auto (src/app/options.cpp)
MAX_PIECES = 32           # kMaxPieces (src/exchange/pieces.h)


def layer1_values(h):
    """[W1 | b1]: the part of the gradient the host-staged exchange cuts into pieces."""
    return h * D + h


def pieces(h, chunk=PIECE_BYTES):
    """How many pieces src/exchange/pieces.h cuts layer 1 into for --exchange-chunk `chunk` (0: one)."""
    l1 = layer1_values(h)
    if chunk == 0:
        return 1
    per = max(max(1, chunk // 4), -(-l1 // MAX_PIECES))
    return -(-l1 // per)


def staged_layer1(par, h, p, n, per_node=8, fabric="ib_ndr", slow=1.0):
    """Layer 1's host-staged exchange in n pieces after the dW1 GEMM (src/exchange/host_staged.h):
    piece i is all-reduced while piece i+1 is copied down and piece i-1 copied up, so n pieces take
    one piece's three stages plus n-1 times its slowest (each host stage one more wake-up where n > 1).
    slow: the copies' slowdown (ranks sharing one GPU). Returns (copies, allreduce) us, summing to it."""
    m = 4 * layer1_values(h) / n
    d2h, h2d = slow * copy_cost(par, m, "d2h"), slow * copy_cost(par, m, "h2d")
    ar = host_allreduce(par, m, p, per_node, fabric) + (par["gpu_fixed"].get("chunk_overhead_us", 5.0) if n > 1 else 0.0)
    total = d2h + ar + h2d + (n - 1) * max(d2h, ar, h2d)
    return d2h + h2d, total - d2h - h2d


def one_gpu_step(par, h, b):
    """A lone rank: the fused step, its update folded into the dW1 GEMM, one graph replay."""
    return compute_time(par, h, b) + par["gpu_fixed"]["host_us_lone"]


def step_time(par, h, batch, p, config="host", mode="strong", per_node=8, fabric="ib_ndr", algo="default",
              chunk=PIECE_BYTES):
    """One step at p ranks, one GPU each: {part: us} and 'total'. mode strong: the global batch is
    `batch`; weak: every rank takes `batch`. chunk: --exchange-chunk (host only; 0: one piece)."""
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
    elif exchange == "nccl":  # stream-ordered: no host round trip; layer 2 under the dW1 GEMM
        parts["fixed"] = g["host_us_lone"]
        parts["compute"] = compute_time(par, h, b)
        parts["allreduce"] = nccl_allreduce(m - m2, p, per_node) + nccl_allreduce(m2, p, per_node)
        parts["overlap"] = -min(nccl_allreduce(m2, p, per_node), dw1_gemm_time(par, h, b))
    else:
        parts["compute"] = compute_time(par, h, b)
        if strategy == "ps":
            parts["copies"] = copy_cost(par, m, "d2h") + copy_cost(par, m, "h2d")
            parts["allreduce"] = ps_exchange(par, m, p, per_node, fabric)
        elif exchange == "device":  # Open MPI's coll/cuda: its own staging, the whole buffer at once
            parts["copies"] = copy_cost(par, m, "d2h") + copy_cost(par, m, "h2d")
            parts["allreduce"] = host_allreduce(par, m, p, per_node, fabric, algo)
        else:  # --comm host: layer 2 first, under the dW1 GEMM; layer 1 in pieces
            n = pieces(h, chunk)
            c1, a1 = staged_layer1(par, h, p, n, per_node, fabric)
            a2 = host_allreduce(par, m2, p, per_node, fabric, algo)
            d2 = copy_cost(par, m2, "d2h")
            parts["copies"] = c1 + d2 + copy_cost(par, m2, "h2d")
            parts["allreduce"] = a1 + a2
            parts["overlap"] = -min(d2 + a2, dw1_gemm_time(par, h, b))
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


def shared_gpu_step(par, h, batch, p, n=1):
    """p ranks time-slicing ONE GPU (no MPS): their kernels and copies run one process at a time,
    and each copy waits for the GPU to switch to its context (sigma: the copies' slowdown, fitted
    to the 2-rank runs of one piece). n: layer 1's pieces (the run's --report), pipelined as on
    p GPUs with the slowed copies. What sharing costs, never what p GPUs would do."""
    b = slice_of(batch, p)
    g, s = par["gpu_fixed"], par["share"]
    m, m2 = grad_bytes(h), layer2_bytes(h)
    gpu = p * (compute_time(par, h, b) + update_time(par, m))
    slow = s["sigma"] * p
    c1, a1 = staged_layer1(par, h, p, n, p, None, slow)
    layer2 = slow * (copy_cost(par, m2, "d2h") + copy_cost(par, m2, "h2d")) + shm_allreduce(par, m2, p)
    return gpu + c1 + a1 + layer2 + g["host_us_lone"] + g["round_trip_us"]


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
    elif compute is None and "cpu_cores" in par:  # the slowest rank may share a core's two threads
        c = par["cpu_cores"]
        shared = 1.0 + core_collision(p, c["cores"]) * (c["thread_slowdown"] - 1.0)
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


def core_collision(p, cores):
    """The chance that two of p ranks land on the two threads of one core, when the guest sees
    2 x cores CPUs and places the ranks on p of them at random (the step waits for that rank)."""
    if p > cores:
        return 1.0
    return 1.0 - math.comb(cores, p) * 2 ** p / math.comb(2 * cores, p)


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
            "hidden_fraction": hidden / exch if exch else 0.0, "bound_us": base - max(stages(m1, 1)),
            "allreduce_fraction": stages(m1, 1)[2] / exch if exch else 0.0,
            "hidden_by_chunks": {n: base - total(n) for n in range(1, max_chunks + 1)}}


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
    ex = {cfg: [step_time(par, 1024, bt, p, cfg, per_node=a.per_node, fabric=a.fabric) for bt in (1000, 3000)
                for p in (2, 4, 8)] for cfg in ("host", "device")}
    ex = {cfg: [(s.get("copies", 0.0) + s["allreduce"]) / 1e3 for s in v] for cfg, v in ex.items()}
    nccl = [nccl_allreduce(m, p, a.per_node) for m in (grad_bytes(256), grad_bytes(1024)) for p in (2, 4, 8)]
    print("  the exchange at H = 1024 on 2-8 GPUs of one node (copies + all-reduce): host %.1f-%.1f ms, device "
          "%.1f-%.1f ms; ncclAllReduce of %.2f-%.2f MB on 2-8 GPUs: %.0f-%.0f us" % (
              min(ex["host"]), max(ex["host"]), min(ex["device"]), max(ex["device"]), grad_bytes(256) / 1e6,
              grad_bytes(1024) / 1e6, min(nccl), max(nccl)))


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
    pipeline_summary(par, a)


def pipeline_summary(par, a):
    """The figures docs/scaling.md quotes beside the pipeline table (all model predictions)."""
    fr = [pipeline(par, h, slice_of(bt, p), p, a.per_node, a.fabric)["allreduce_fraction"]
          for h, bt in SHAPES for p in (2, 8, 64)]
    print("  the host all-reduce: %.0f-%.0f%% of dW1's unchunked exchange" % (100 * min(fr), 100 * max(fr)))
    lin = pipeline(par, 1024, slice_of(3000, 2), 2, a.per_node, a.fabric, linear=True)["hidden_by_chunks"]
    print("  1024:3000, P=2, overlap alone: " + ", ".join("%d chunks hide %.0f us" % (n, lin[n]) for n in (2, 3, 4, 6, 7)))
    small, big = 4 * host_allreduce(par, 814120, 2, a.per_node, a.fabric), host_allreduce(par, 3256360, 2, a.per_node, a.fabric)
    print("  2 ranks: 4 all-reduces of 0.81 MB %.0f us, one of 3.26 MB %.0f us" % (small, big))
    for h, bt in SHAPES:
        one = step_time(par, h, bt, 2, "host", per_node=a.per_node, fabric=a.fabric, chunk=0)["total"]
        dflt = step_time(par, h, bt, 2, "host", per_node=a.per_node, fabric=a.fabric)["total"]
        gemm = pipeline(par, h, slice_of(bt, 2), 2, a.per_node, a.fabric)["hidden_us"]
        print("  %d:%d, P=2, --comm host: %.0f us a step in one piece (--exchange-chunk 0), %.0f us in the default %d "
              "pieces; dW1's GEMM chunked too: about %.0f us; one GPU %.0f us"
              % (h, bt, one, dflt, pieces(h), one - gemm, step_time(par, h, bt, 1)["total"]))


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
    loo = [(pred - meas) / meas for _, _, meas, pred in par["compute"]["gpu"].get("loo", [])]
    if loo:
        print("its leave-one-out error over the %d measured points: %+.1f%% to %+.1f%%" % (len(loo), 100 * min(loo), 100 * max(loo)))
    print("copies' slowdown when ranks share the GPU, s = %.2f" % par["share"]["sigma"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("what", choices=["table", "verdict", "pipeline", "step", "markdown"])
    ap.add_argument("--params", default=PARAMS)
    ap.add_argument("--machine", default="h200", help="measured parts to use (a key of the params file)")
    ap.add_argument("--per-node", type=int, default=8, help="GPUs (ranks) a node")
    ap.add_argument("--fabric", default="ib_ndr", choices=["ib_hdr", "ib_ndr"])
    ap.add_argument("--configs", default="host,device,nccl,model,ps")
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
