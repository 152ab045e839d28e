#!/usr/bin/env python3
"""Peer baseline: nn_train's network and SGD loop written in JAX (XLA:CPU or CUDA), twin of peer_torch.py.

784-H-10, sigmoid hidden layer, softmax + cross-entropy (mean over the batch), L2 on the
weights only as (reg/2)(|W1|^2 + |W2|^2), i.e. a gradient term reg*W (none on the biases),
plain SGD, float32. Parameters as nn_train has them: W1 (H x 784), b1 (H), W2 (10 x H), b2 (10);
Glorot-uniform weights, zero biases (numpy's generator, seeded by --seed). The images stay
resident as uint8; each batch is gathered and divided by 255 inside the compiled code. Same
split as nn_train: the first --train-size images, the last --val-fraction of them held out,
batches of --batch in a fresh random order every epoch (jax.random, seeded; the last batch may
be smaller and its gradient is the mean over its true size). Data: the same IDX files (raw or gzip).

Compiled the JAX way, in one of two modes (--mode), each compiled ahead of the first epoch (so
epoch 1 is a warm-up without the compile):
  scan (default): one jax.jit function per epoch (the shuffle, a jax.lax.scan over the full
        batches, then one more step for the smaller last batch when there is one), the
        parameters donated: one dispatch per epoch.
  step: one jitted SGD step (the batch's indices cut from the epoch's order inside it, the
        running loss and hit count carried along), called from a Python loop once per batch,
        the parameters and the running sums donated; the order comes from a jitted shuffle
        (the same keys as scan), and a second compiled step takes the smaller last batch.
Every dot, forward and backward, runs at lax.Precision.HIGHEST (and jax_default_matmul_precision
is "highest"): true float32 on a GPU, no TF32 (on XLA:CPU float32 dots are float32 anyway).

--device cpu (XLA:CPU, JAX_PLATFORMS=cpu), gpu (alias cuda: JAX_PLATFORMS=cuda, a CUDA jaxlib;
GPU memory not preallocated: XLA_PYTHON_CLIENT_PREALLOCATE=false unless set), auto (default:
whatever backend this JAX picks, a GPU when it has one). On a GPU the header names the device and
how XLA runs the step's dots (cuBLAS custom calls, Triton GEMM fusions or plain XLA dots, read
from the compiled HLO); --procs and --threads are for the CPU.

    build/venv-peer-jax/bin/python bench/peer_jax.py --data data/current --hidden 512 \
        --batch 800 --epochs 3 --threads 2
    build/venv-peer-jax/bin/python bench/peer_jax.py ... --procs 2 --threads 1   # gloo
    build/venv-peer-jax/bin/python bench/peer_jax.py --check     # one step against numpy (float64)
    python3 bench/peer_jax.py --device gpu --mode step --hidden 1024 --batch 1000 --epochs 4

Threads: --threads T (0: $OMP_NUM_THREADS, else 1) sets PJRT_NPROC=T before jax is imported:
the size of the XLA:CPU client's intra-op thread pool, which runs its dots (YNNPACK fusions,
Eigen contractions) and its parallel loop fusions; with T = 1 also
XLA_FLAGS=--xla_cpu_multi_thread_eigen=false. Without PJRT_NPROC, XLA sizes the pool from the
affinity mask (taskset). The `cpu/wall` line reports the process's CPU seconds over wall seconds.

--procs P: P processes (this script started again P-1 times, rank 0 being this one) joined by
jax.distributed (a coordinator on 127.0.0.1), one CPU device each, XLA's CPU collectives over
gloo. Every process holds the training set, draws the same shuffled order and takes its slice of
each global batch (split as evenly as possible, as nn_train does); inside a shard_map each
computes the sum of its slice's per-image gradients divided by the global batch size, and a psum
over the processes gives every one the whole batch's mean gradient: the same SGD as one process.
Each process uses T threads. Rank 0 prints and times.

--check: no training; one SGD step (and a step followed by a smaller last batch) of 7 images,
H = 5, through the same compiled epoch of the chosen --mode and --device, against the same step
recomputed independently in float64 numpy (forward, softmax-CE gradient, L2 term, update). Prints
the largest relative error of the parameters and of their updates; exit status 0 when it is
below 1e-5, else 1 (on a GPU, TF32 dots would miss that bound).

Prints a header (versions, mode, device, how many of the step's dots run at HIGHEST, read from
the lowered StableHLO; on the CPU the threads and how they were set and which library runs each
of the dots Z1 = X W1^T, Z2, dA1 = dZ2 W2, dW1, dW2, read from the compiled HLO), one line per
epoch, then
    startup_seconds: S   (from the script's start to the first epoch: imports, data, compile)
    cpu/wall: C   (process CPU time / wall time over the timed epochs 2..E; 1..E when E = 1)
    epoch_seconds: s1 s2 ...   (wall time of each epoch's batches, results ready)
    test precision: 0.xxxx
Timing matches nn_train's --metrics `seconds`: the batches only (shuffle included), no
validation or test.
"""
import argparse
import os
import time

START = time.perf_counter()  # startup_seconds counts from here: imports, data, compile

import socket
import subprocess
import sys
import traceback

import numpy as np

from peer_common import add_common_args, load_data

RANK_ENV = "PEER_JAX_RANK"          # set on the processes rank 0 starts
COORD_ENV = "PEER_JAX_COORDINATOR"  # host:port of the jax.distributed coordinator


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--device", choices=["auto", "gpu", "cuda", "cpu"], default="auto",
                    help="cpu: XLA:CPU; gpu (or cuda): JAX's CUDA backend; auto: the backend "
                         "this JAX picks (a GPU when it has one)")
    ap.add_argument("--mode", choices=["scan", "step"], default="scan",
                    help="scan: the whole epoch in one jitted lax.scan; step: one jitted SGD "
                         "step called from a Python loop (parameters donated)")
    ap.add_argument("--threads", type=int, default=0,
                    help="XLA:CPU threads per process (PJRT_NPROC); 0: $OMP_NUM_THREADS, else 1")
    ap.add_argument("--procs", type=int, default=1,
                    help="processes: jax.distributed with gloo CPU collectives when > 1")
    ap.add_argument("--check", action="store_true",
                    help="no training: one SGD step of the compiled code against a float64 numpy "
                         "recomputation; exit 0 when they agree to 1e-5")
    a = ap.parse_args()
    if a.hidden < 1 or a.batch < 1 or a.epochs < 1 or not 0 <= a.val_fraction < 1 or a.procs < 1:
        ap.error("bad --hidden/--batch/--epochs/--val-fraction/--procs")
    if a.threads < 0:
        ap.error("bad --threads")
    if a.device == "cuda":
        a.device = "gpu"
    if a.procs > 1 and a.device == "auto":
        a.device = "cpu"
    if a.procs > 1 and a.device != "cpu":
        ap.error("--procs > 1 is for --device cpu (gloo CPU collectives)")
    if a.procs > 1 and a.mode != "scan":
        ap.error("--procs > 1 runs --mode scan only")
    return a


def set_platform(device):
    """Before jax is imported: which backend JAX initialises (JAX_PLATFORMS; auto: JAX's choice)."""
    if device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    elif device == "gpu":
        os.environ["JAX_PLATFORMS"] = "cuda"
    if device != "cpu":  # several runs one after another: take GPU memory as needed, not 75% of it
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def set_threads(threads):
    """Before jax is imported: the XLA:CPU thread count. Returns how it was set, in words."""
    os.environ["PJRT_NPROC"] = str(threads)
    how = "PJRT_NPROC=%d" % threads
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
            how += ", --xla_cpu_multi_thread_eigen=false"
        else:
            how += ", xla_cpu_multi_thread_eigen as XLA_FLAGS gives it"
    try:
        how += ", affinity %d CPUs" % len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    return how


# --------------------------------------------------------------------------------------------
# The model, written once for the training loop and for --check (jax imported by the caller).

def make_step(jax, lr, reg, procs=1, axis=None):
    """One SGD step as a function (params, xs, ys, idx) -> (params, ce_sum, hits) of the batch of
    images xs[idx] (idx int32, its length the global batch size); ce_sum and hits are the batch's
    cross-entropy sum and right answers from the forward pass before the update. Every dot at
    lax.Precision.HIGHEST (autodiff's transposed dots keep it). With axis (inside a shard_map
    over `procs` processes) each process works on its slice of the batch and the gradient sums
    are psum'd over the axis."""
    jnp, lax = jax.numpy, jax.lax
    highest = lax.Precision.HIGHEST

    def slice_of(idx):
        """This process's part of a global batch of indices: (indices, mask or None)."""
        c = idx.shape[0]
        if axis is None:
            return idx, None
        sizes = [c * (k + 1) // procs - c * k // procs for k in range(procs)]
        m = max(sizes)
        rank = lax.axis_index(axis)
        lo = (c * rank) // procs
        hi = (c * (rank + 1)) // procs
        padded = jnp.concatenate([idx, jnp.zeros((m,), idx.dtype)])
        mine = lax.dynamic_slice(padded, (lo,), (m,))
        if min(sizes) == m:
            return mine, None
        return mine, jnp.arange(m) < hi - lo

    def step(params, xs, ys, idx):
        c = idx.shape[0]  # the global batch size: the gradient is the mean over it
        mine, mask = slice_of(idx)
        xb = xs[mine].astype(jnp.float32) / 255.0
        yb = ys[mine]

        def loss(p):
            W1, b1, W2, b2 = p
            a1 = jax.nn.sigmoid(jnp.matmul(xb, W1.T, precision=highest) + b1)
            z2 = jnp.matmul(a1, W2.T, precision=highest) + b2
            ce = -jnp.take_along_axis(jax.nn.log_softmax(z2), yb[:, None], axis=1)[:, 0]
            if mask is not None:
                ce = jnp.where(mask, ce, 0.0)
            s = jnp.sum(ce)
            return s / c, (s, z2)

        if axis is None:
            grads, (ce_s, z2) = jax.grad(loss, has_aux=True)(params)
        else:
            # Differentiate at a per-process ("varying") copy of the parameters, so that the
            # gradient is this process's part alone; the psum adds the parts of all processes.
            grads, (ce_s, z2) = jax.grad(loss, has_aux=True)(lax.pcast(params, axis, to="varying"))
            grads = lax.psum(grads, axis)
        W1, b1, W2, b2 = params
        gW1, gb1, gW2, gb2 = grads
        new = (W1 - lr * (gW1 + reg * W1), b1 - lr * gb1,
               W2 - lr * (gW2 + reg * W2), b2 - lr * gb2)
        hit = jnp.argmax(z2, axis=1) == yb
        if mask is not None:
            hit = hit & mask
        return new, ce_s, jnp.sum(hit, dtype=jnp.int32)

    return step


def make_order(jax, n_fit, shuffle, seed):
    """The epoch's order of the images as a function of the epoch number (an int32 scalar):
    a permutation keyed by fold_in(key(seed), epoch), or 0..n_fit-1 without --shuffle."""
    jnp = jax.numpy

    def order(e):
        if shuffle:
            o = jax.random.permutation(jax.random.fold_in(jax.random.key(seed), e), n_fit)
        else:
            o = jnp.arange(n_fit)
        return o.astype(jnp.int32)

    return order


def make_epoch(jax, n_fit, batch, lr, reg, shuffle, seed, procs=1, axis=None):
    """The epoch as a function (params, xs, ys, epoch) -> (params, ce_sum, hits), for --mode scan.

    params = (W1, b1, W2, b2); xs (n_fit, 784) uint8; ys (n_fit,) int32; epoch an int32 scalar
    (the shuffle key is fold_in(key(seed), epoch)). ce_sum is the sum over the epoch's images of
    their cross-entropy, hits the number classified right, both from the forward passes before
    each update. With axis (inside a shard_map over `procs` processes) each process works on its
    slice of every batch and the gradient sums are psum'd over the axis."""
    jnp, lax = jax.numpy, jax.lax
    n_full, rest = divmod(n_fit, batch)
    step = make_step(jax, lr, reg, procs, axis)
    make = make_order(jax, n_fit, shuffle, seed)

    def epoch(params, xs, ys, e):
        order = make(e)

        def body(carry, idx):
            p, ce_sum, hits = carry
            p, ce_s, h = step(p, xs, ys, idx)
            return (p, ce_sum + ce_s, hits + h), None

        stats = (jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
        if axis is not None:  # per-process sums until the psum below
            stats = jax.lax.pcast(stats, axis, to="varying")
        carry = (params,) + stats
        if n_full:
            carry, _ = lax.scan(body, carry, order[:n_full * batch].reshape(n_full, batch))
        if rest:
            carry, _ = body(carry, order[n_full * batch:])
        params, ce_sum, hits = carry
        if axis is not None:
            ce_sum, hits = lax.psum(ce_sum, axis), lax.psum(hits, axis)
        return params, ce_sum, hits

    return epoch


def compile_step_epoch(jax, n_fit, batch, lr, reg, shuffle, seed, params, xs, ys):
    """--mode step: the epoch as a Python loop over a jitted SGD step, compiled ahead for these
    arguments' shapes. Returns (epoch, texts): epoch(params, xs, ys, e) -> (params, ce_sum, hits)
    as make_epoch's (e an int32 device scalar), texts the lowered StableHLO and the compiled HLO
    of the full-batch step. Each call of the step cuts its batch's indices from the epoch's order
    (a dynamic slice at the batch number, an int32 already on the device) and adds its loss and
    hits to running sums; the parameters and the sums are donated, so nothing is read back
    until the epoch ends."""
    jnp, lax = jax.numpy, jax.lax
    n_full, rest = divmod(n_fit, batch)
    step = make_step(jax, lr, reg)

    def full_step(p, sums, xs, ys, order, i):
        p, ce_s, h = step(p, xs, ys, lax.dynamic_slice(order, (i * batch,), (batch,)))
        return p, (sums[0] + ce_s, sums[1] + h)

    def last_step(p, sums, xs, ys, order):
        p, ce_s, h = step(p, xs, ys, order[n_full * batch:])
        return p, (sums[0] + ce_s, sums[1] + h)

    zero = jax.jit(lambda: (jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32)))
    sums0 = zero()
    order_c = jax.jit(make_order(jax, n_fit, shuffle, seed)).lower(jnp.int32(0)).compile()
    order0 = order_c(jnp.int32(0))
    numbers = [jax.device_put(np.int32(i)) for i in range(n_full)]  # on the device once, not per step
    texts = ("", "")
    full_c = last_c = None
    if n_full:
        lowered = jax.jit(full_step, donate_argnums=(0, 1)).lower(params, sums0, xs, ys, order0, numbers[0])
        full_c = lowered.compile()
        texts = (lowered.as_text(), full_c.as_text())
    if rest:
        lowered = jax.jit(last_step, donate_argnums=(0, 1)).lower(params, sums0, xs, ys, order0)
        last_c = lowered.compile()
        if not n_full:
            texts = (lowered.as_text(), last_c.as_text())

    def epoch(p, xs, ys, e):
        order = order_c(e)
        sums = zero()
        for i in numbers:
            p, sums = full_c(p, sums, xs, ys, order, i)
        if rest:
            p, sums = last_c(p, sums, xs, ys, order)
        return p, sums[0], sums[1]

    return epoch, texts


def compile_epoch(jax, mode, n_fit, batch, lr, reg, shuffle, seed, params, xs, ys):
    """One process's epoch in either --mode, compiled ahead for these arguments' shapes:
    (epoch, lowered StableHLO text, compiled HLO text); epoch(params, xs, ys, e) -> (params,
    ce_sum, hits) with e an int32 device scalar, the parameters donated."""
    if mode == "step":
        epoch, (lowered, hlo) = compile_step_epoch(jax, n_fit, batch, lr, reg, shuffle, seed,
                                                   params, xs, ys)
        return epoch, lowered, hlo
    fn = make_epoch(jax, n_fit, batch, lr, reg, shuffle, seed)
    lowered = jax.jit(fn, donate_argnums=(0,)).lower(params, xs, ys, jax.numpy.int32(0))
    compiled = lowered.compile()
    return compiled, lowered.as_text(), compiled.as_text()


def precision_note(stablehlo):
    """How many of the dots of a lowered module (StableHLO text) ask for HIGHEST precision."""
    import re
    dots = re.findall(r"stablehlo\.dot_general[^\n]*", stablehlo)
    top = sum(1 for d in dots if "precision = [HIGHEST, HIGHEST]" in d)
    return "precision HIGHEST on %d of %d dots" % (top, len(dots))


def gpu_dots(hlo_text):
    """How XLA:GPU runs the dots of a compiled module, read from its optimised HLO: cuBLAS (and
    cuBLASLt) custom calls, Triton GEMM fusions, and dots left as plain HLO."""
    import re
    parts = []
    for what, pattern in (("cuBLAS", r'custom_call_target="__cublas\$gemm"'),
                          ("cuBLASLt", r'custom_call_target="__cublas\$lt\$matmul[^"]*"'),
                          ("Triton GEMM fusions", r'"kind":"__triton_gemm"'),
                          ("HLO dot ops (those in Triton fusions too)", r" dot\(")):
        n = len(re.findall(pattern, hlo_text))
        if n:
            parts.append("%s %d" % (what, n))
    return "XLA:GPU dots: " + (", ".join(parts) if parts else "none found")


def glorot(rng, rows, cols):  # Glorot-uniform, as src/schedule/init.h (a different generator)
    lim = np.sqrt(6.0 / (rows + cols))
    return rng.uniform(-lim, lim, size=(rows, cols)).astype(np.float32)


def dot_backends(hlo_text, H, D=784, C=10):
    """Which library runs each dot of a compiled XLA:CPU module, read from its optimised HLO:
    a dot inside a computation that a `__ynn_fusion` (`__xnn_fusion`) calls runs in YNNPACK
    (XNNPACK); any other dot is an XLA DotThunk, an Eigen tensor contraction."""
    import re
    fusion_kind = {m.group(1): m.group(2) for m in re.finditer(
        r'calls=%?([\w.\-]+)[^\n]*"kind":"(__[a-z]+_fusion)"', hlo_text)}
    library = {"__ynn_fusion": "YNNPACK", "__xnn_fusion": "XNNPACK"}
    found, comp = {}, None
    for line in hlo_text.splitlines():
        head = re.match(r"(?:ENTRY )?%?([\w.\-]+) \(.*\{$", line)
        if head:
            comp = head.group(1)
            continue
        m = re.search(r"= f32\[([0-9,]*)\]\{[0-9,]*\} dot\(", line)
        if not m:
            continue
        dims = tuple(int(v) for v in m.group(1).split(",") if v)
        back = "transpose(" in line
        name = {(H, D): "dW1", (C, H): "dW2"}.get(dims) or "x".join(map(str, dims))
        if len(dims) == 2 and name not in ("dW1", "dW2"):
            name = ("dA1" if back else "Z1") if dims[1] == H else "Z2" if dims[1] == C else name
        lib = library.get(fusion_kind.get(comp), "Eigen (XLA dot thunk)")
        names = found.setdefault(lib, [])
        if name not in names:
            names.append(name)
    n_onednn = len(re.findall(r'custom_call_target="__onednn', hlo_text))
    order = ["Z1", "Z2", "dA1", "dW1", "dW2"]
    parts = ["%s %s" % (lib, " ".join(sorted(names, key=lambda n: order.index(n) if n in order else 9)))
             for lib, names in sorted(found.items(), reverse=True)]
    if n_onednn:
        parts.append("oneDNN custom calls: %d" % n_onednn)
    return "dots: " + ("; ".join(parts) if parts else "none found")


# --------------------------------------------------------------------------------------------

def check(jax, mode):
    """One (and a two-step) SGD run of the compiled epoch (--mode `mode`) on JAX's default
    device against float64 numpy. Exit status."""
    jnp = jax.numpy
    rng = np.random.default_rng(12345)
    n, D, H, C = 7, 784, 5, 10
    lr, reg = 0.5, 0.05
    X = rng.integers(0, 256, size=(n, D), dtype=np.uint8)
    y = rng.integers(0, C, size=n).astype(np.int32)
    p0 = (glorot(rng, H, D), rng.normal(0, 0.3, H).astype(np.float32),
          glorot(rng, C, H), rng.normal(0, 0.3, C).astype(np.float32))
    # Some labels equal to the initial prediction, so that the hit count is tested too.
    z0 = (1 / (1 + np.exp(-(X / 255.0) @ p0[0].T - p0[1]))) @ p0[2].T + p0[3]
    y[:4] = z0[:4].argmax(axis=1)

    def ref_step(p, idx):
        """SGD step in float64, from the formulas (no autodiff)."""
        W1, b1, W2, b2 = p
        x = X[idx].astype(np.float64) / 255.0
        t = np.eye(C)[y[idx]]
        m = len(idx)
        a1 = 1.0 / (1.0 + np.exp(-(x @ W1.T + b1)))
        z2 = a1 @ W2.T + b2
        z = z2 - z2.max(axis=1, keepdims=True)
        prob = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        ce = -np.log((prob * t).sum(axis=1)).sum()
        hits = int((z2.argmax(axis=1) == y[idx]).sum())
        d2 = (prob - t) / m                  # dCE/dz2, mean over the batch
        d1 = (d2 @ W2) * a1 * (1.0 - a1)     # back through the sigmoid
        gW2, gb2 = d2.T @ a1 + reg * W2, d2.sum(axis=0)
        gW1, gb1 = d1.T @ x + reg * W1, d1.sum(axis=0)
        return (W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2), ce, hits

    worst = 0.0
    dev = jax.devices()[0]
    print("check: --mode %s on %s (%s), jax_default_matmul_precision %s" % (
        mode, dev.platform, dev.device_kind, getattr(jax.config, "jax_default_matmul_precision", "?")))
    for batch in (7, 4):  # one step of 7 (the scan); a step of 4 then the last batch of 3
        params = tuple(jnp.asarray(p) for p in p0)
        xs, ys = jnp.asarray(X), jnp.asarray(y)
        epoch, lowered, _ = compile_epoch(jax, mode, n, batch, lr, reg, False, 0, params, xs, ys)
        if batch == 7:
            print("check: " + precision_note(lowered))
        new, ce_sum, hits = epoch(params, xs, ys, jnp.int32(0))
        ref = tuple(p.astype(np.float64) for p in p0)
        ref_ce, ref_hits = 0.0, 0
        for begin in range(0, n, batch):
            ref, ce, h = ref_step(ref, np.arange(begin, min(begin + batch, n)))
            ref_ce, ref_hits = ref_ce + ce, ref_hits + h
        names = ("W1", "b1", "W2", "b2")
        errs = []
        for name, got, want, old in zip(names, new, ref, p0):
            got = np.asarray(got, dtype=np.float64)
            rel_p = np.abs(got - want).max() / np.abs(want).max()
            upd_want = want - old
            rel_u = np.abs((got - old) - upd_want).max() / np.abs(upd_want).max()
            errs.append("%s %.1e (update %.1e)" % (name, rel_p, rel_u))
            worst = max(worst, rel_p, rel_u)
        rel_ce = abs(float(ce_sum) - ref_ce) / ref_ce
        worst = max(worst, rel_ce)
        print("check: batch %d over %d images (%s): max rel. error of the parameters: %s; "
              "cross-entropy sum %.1e; hits %d vs %d" % (
                  batch, n, "one step" if batch == n else "a step, then the last batch",
                  ", ".join(errs), rel_ce, int(hits), ref_hits))
        if int(hits) != ref_hits:
            worst = max(worst, 1.0)
    ok = worst < 1e-5
    print("check: max relative error (parameters and their updates) %.2e -> %s" % (worst, "PASS" if ok else "FAIL (limit 1e-5)"))
    return 0 if ok else 1


def spawn_ranks(a):
    """Rank 0 (this process) starts ranks 1..P-1: this script again, told its rank."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ[COORD_ENV] = "127.0.0.1:%d" % port
    children = []
    for r in range(1, a.procs):
        env = dict(os.environ, **{RANK_ENV: str(r)})
        children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                                         env=env, stdout=subprocess.DEVNULL))
    return children


def main():
    a = parse()
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    set_platform(a.device)
    how = set_threads(threads) if a.device != "gpu" else "unused on the GPU"
    rank = int(os.environ.get(RANK_ENV, "0"))
    children = []
    if a.procs > 1 and not a.check and rank == 0:
        children = spawn_ranks(a)
    multi = a.procs > 1 and not a.check
    try:
        rc = run(a, rank, threads, how)
    except BaseException as exc:
        if not multi:
            raise
        # jax.distributed's exit handler waits for every process at a shutdown barrier: a
        # process that failed leaves at once instead (the others see its heartbeat stop).
        for ch in children:
            ch.kill()
        if isinstance(exc, SystemExit):
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
            status = exc.code if isinstance(exc.code, int) else 1
        else:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    for ch in children:
        if ch.wait() != 0:
            print("peer_jax: error: the process of rank %d exited with status %d"
                  % (children.index(ch) + 1, ch.returncode), file=sys.stderr)
            rc = rc or 1
    sys.exit(rc)


def run(a, rank, threads, how):
    import jax
    import jaxlib
    jax.config.update("jax_default_matmul_precision", "highest")
    multi = a.procs > 1 and not a.check
    if multi:  # before anything that starts a backend
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=os.environ[COORD_ENV],
                                   num_processes=a.procs, process_id=rank,
                                   initialization_timeout=120, heartbeat_timeout_seconds=30,
                                   shutdown_timeout_seconds=60)
    try:
        platform = jax.default_backend()
    except RuntimeError as exc:  # JAX_PLATFORMS=cuda without a usable CUDA backend
        sys.exit("error: --device %s: JAX %s cannot start that backend: %s" % (
            a.device, jax.__version__, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    if a.device == "gpu" and platform != "gpu":
        sys.exit("error: --device gpu but JAX %s runs on %s (no CUDA jaxlib or no GPU)" % (
            jax.__version__, platform))
    on_gpu = platform == "gpu"
    if a.check:
        return check(jax, a.mode)
    jnp = jax.numpy
    out = rank == 0
    if not out:
        sys.stdout = open(os.devnull, "w")

    train_x, train_y, test_x, test_y, n_fit, n_val, n_test = load_data(a)

    D, H, C = train_x.shape[1], a.hidden, 10
    rng = np.random.default_rng(a.seed)
    p0 = (glorot(rng, H, D), np.zeros(H, np.float32), glorot(rng, C, H), np.zeros(C, np.float32))
    xs_np = np.ascontiguousarray(train_x[:n_fit])        # uint8, one image per row
    ys_np = train_y[:n_fit].astype(np.int32)

    if multi:
        epoch = make_epoch(jax, n_fit, a.batch, a.lr, a.reg, not a.no_shuffle, a.seed,
                           a.procs, "p")
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()), ("p",))
        local = lambda x: x.addressable_data(0)
        rep, per = NamedSharding(mesh, P()), NamedSharding(mesh, P("p"))

        def put(x, sharding):
            return jax.make_array_from_process_local_data(sharding, x)

        def sharded(params, xs, ys, e):  # xs, ys: this process's copy, under a leading axis of 1
            return epoch(params, xs[0], ys[0], e)

        fn = jax.shard_map(sharded, mesh=mesh, in_specs=(P(), P("p"), P("p"), P()),
                           out_specs=(P(), P(), P()))
        # Connect gloo now, with a psum of one number, rather than in epoch 1; its C++ side
        # announces the connection on stdout, which goes to /dev/null meanwhile.
        sys.stdout.flush()
        saved = os.dup(1)
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        try:
            one = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "p"), mesh=mesh,
                                        in_specs=P("p"), out_specs=P()))
            n_ranks = int(local(one(put(np.ones(1, np.int32), per)))[0])
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        if n_ranks != a.procs:
            sys.exit("error: a psum over the %d processes gave %d" % (a.procs, n_ranks))
        params = tuple(put(p, rep) for p in p0)
        xs, ys = put(xs_np[None], per), put(ys_np[None], per)
        epoch_arg = lambda e: put(np.int32(e), rep)
    else:
        params = tuple(jnp.asarray(p) for p in p0)
        xs, ys = jnp.asarray(xs_np), jnp.asarray(ys_np)
        epoch_arg = jnp.int32
        local = lambda x: x
    if multi:
        lowered = jax.jit(fn, donate_argnums=(0,)).lower(params, xs, ys, epoch_arg(0))
        compiled = lowered.compile()
        lowered_text, hlo_text = lowered.as_text(), compiled.as_text()
    else:
        compiled, lowered_text, hlo_text = compile_epoch(
            jax, a.mode, n_fit, a.batch, a.lr, a.reg, not a.no_shuffle, a.seed, params, xs, ys)
    try:
        dots = gpu_dots(hlo_text) if on_gpu else "XLA:CPU " + dot_backends(hlo_text, H)
        dots = precision_note(lowered_text) + "; " + dots
    except Exception as exc:  # the HLO text is informative only
        dots = "dot library unknown (%s)" % type(exc).__name__
    xt, yt = jnp.asarray(test_x[:n_test]), jnp.asarray(test_y[:n_test].astype(np.int32))

    mode = {"scan": "the epoch in one jitted lax.scan",
            "step": "a jitted step per batch from a Python loop"}[a.mode]
    if on_gpu:
        dev = jax.devices()[0]
        desc = "GPU %s (%s), %s" % (dev.device_kind, dev.platform, dots)
    else:
        desc = "CPU, threads %d (%s), %s" % (threads, how, dots)
    if multi:
        desc += ", jax.distributed, %d processes, gloo CPU collectives" % a.procs
    print("peer_jax: JAX %s (jaxlib %s), float32, mode %s (%s), %s" % (
        jax.__version__, jaxlib.__version__, a.mode, mode, desc))
    print("data: %s (train %d, validation %d, test %d images)" % (a.data, n_fit, n_val, n_test))
    print("config: hidden=%d batch=%d epochs=%d lr=%g reg=%g seed=%d shuffle=%s" % (
        H, a.batch, a.epochs, a.lr, a.reg, a.seed, "no" if a.no_shuffle else "yes"))
    sys.stdout.flush()

    @jax.jit
    def sq_weights(W1, W2):
        return jnp.sum(W1 * W1) + jnp.sum(W2 * W2)

    @jax.jit
    def test_hits(W1, b1, W2, b2, x, y):
        a1 = jax.nn.sigmoid((x.astype(jnp.float32) / 255.0) @ W1.T + b1)
        return jnp.sum(jnp.argmax(a1 @ W2.T + b2, axis=1) == y)

    startup = time.perf_counter() - START
    secs, cpus = [], []
    for e in range(a.epochs):
        e_arr = epoch_arg(e)
        c0, t0 = time.process_time(), time.perf_counter()
        params, ce_sum, hits = compiled(params, xs, ys, e_arr)
        jax.block_until_ready((params, ce_sum, hits))
        secs.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        W1, W2 = local(params[0]), local(params[2])
        loss = float(local(ce_sum)) / n_fit + 0.5 * a.reg * float(sq_weights(W1, W2))
        print("epoch %3d  loss %.5f  train acc %.4f  %.3f s  %.0f images/s" % (
            e + 1, loss, int(local(hits)) / n_fit, secs[-1], n_fit / secs[-1]))
        sys.stdout.flush()

    lp = [local(p) for p in params]
    correct = sum(int(test_hits(*lp, xt[i:i + 1024], yt[i:i + 1024])) for i in range(0, n_test, 1024))
    first = 1 if a.epochs > 1 else 0
    print("startup_seconds: %.2f" % startup)
    print("cpu/wall: %.2f" % (sum(cpus[first:]) / max(sum(secs[first:]), 1e-9)))
    print("epoch_seconds: " + " ".join("%.6f" % s for s in secs))
    print("test precision: %.4f" % (correct / n_test if n_test else 0.0))
    sys.stdout.flush()
    if multi:
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    main()
