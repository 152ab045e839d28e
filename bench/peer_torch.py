#!/usr/bin/python3
"""Peer baseline: nn_train's network and SGD loop written in PyTorch.

784-H-10, sigmoid hidden layer, softmax + cross-entropy (mean over the batch), L2 on the
weights only as (reg/2)(|W1|^2 + |W2|^2), i.e. a gradient term reg*W (SGD weight_decay on
the weights, none on the biases), plain SGD, fp32 with TF32 off. The images stay resident
on the device as uint8 (as in nn_train); each batch is gathered and divided by 255 there.
Same split as nn_train: the first --train-size images, the last --val-fraction of them held
out, batches of --batch in a fresh random order every epoch (the last one may be smaller;
its gradient is the mean over its true size). Data: the same IDX files (raw or gzip).

    /usr/bin/python3 bench/peer_torch.py --data data/current --hidden 512 --batch 800 \
        --epochs 3 --device cpu --threads 2
    /usr/bin/python3 bench/peer_torch.py ... --device cpu --procs 2 --threads 1   # DDP, gloo

--procs P (CPU): P processes (torch.multiprocessing, spawn) in a gloo process group, the
model wrapped in DistributedDataParallel; every process holds the training set, draws the same
shuffled order (same seed) and takes its slice of each global batch (split as evenly as possible,
as nn_train does); DDP averages the slices' gradients (allreduce over gloo). Rank 0 prints and times.

--compile (PyTorch 2): the model goes through torch.compile (Inductor fuses the elementwise work
around the GEMMs, forward and backward); the optimizer step stays eager. Compilation happens in
epoch 1, which the callers leave out of the median. --compile-mode MODE passes torch.compile's
mode (reduce-overhead: CUDA Graphs on a GPU).

--cuda-graph (CUDA, one process): the whole training step, forward, backward and the SGD update
(optimizer included), captured once in one torch.cuda.CUDAGraph and replayed for every batch.
Its inputs are static buffers: each step copies the batch's slice of the epoch's order (an int64
index tensor, torch.randperm on the device as in eager) into a static index buffer, and the graph
gathers the batch from the resident uint8 images by it; the running loss and hit count are added
up inside the graph as well. The gradients are set to None before the capture (so the backward
writes them afresh in each replay) and warm-up steps run on a side stream first, as PyTorch's
CUDA Graphs notes require; the parameters the warm-up changed are restored afterwards, so the
run trains from the same initial weights, in the same order, as eager. A smaller last batch
gets a graph of its own. Without a CUDA device it stops with one line.

Prints one line per epoch, then the lines bench/peer_compare.sh reads:
    startup_seconds: S         (from the script's start to the first epoch: imports, data, capture)
    cpu/wall: X.XX             (this process's CPU time / wall time over epochs 2..E: cores kept busy)
    epoch_seconds: s1 s2 ...   (wall time of each epoch's batches, device synchronised)
    test precision: 0.xxxx
Timing matches nn_train's --metrics `seconds`: the batches only, no validation or test.
"""
import argparse
import os
import sys
import time

START = time.perf_counter()  # startup_seconds counts from here

import numpy as np

from peer_common import add_common_args, load_data

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("error: PyTorch is not importable by %s (Debian: apt-get install python3-torch)"
             % sys.executable)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                    help="auto: CUDA when available, else the CPU")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads per process (torch.set_num_threads); 0: $OMP_NUM_THREADS, else 1")
    ap.add_argument("--procs", type=int, default=1,
                    help="processes: DistributedDataParallel over gloo when > 1 (CPU only)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (PyTorch 2; forward and backward, fused by Inductor)")
    ap.add_argument("--compile-mode", default="default",
                    choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
                    help="torch.compile's mode (implies --compile); reduce-overhead replays CUDA Graphs on a GPU")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="capture the whole step (forward, backward, SGD update) in one CUDA graph "
                         "and replay it per batch (CUDA only)")
    a = ap.parse_args()
    a.compile = a.compile or a.compile_mode != "default"
    if a.cuda_graph and (a.device == "cpu" or a.procs > 1 or a.compile):
        ap.error("--cuda-graph runs on CUDA, in one process, without --compile")
    if a.hidden < 1 or a.batch < 1 or a.epochs < 1 or not 0 <= a.val_fraction < 1 or a.procs < 1:
        ap.error("bad --hidden/--batch/--epochs/--val-fraction/--procs")
    if a.procs > 1 and a.device == "cuda":
        ap.error("--procs > 1 is for --device cpu (DDP over gloo)")
    if a.compile and not hasattr(torch, "compile"):
        ap.error("--compile needs PyTorch 2 (this is %s)" % torch.__version__)
    return a


def blas_name():
    """The BLAS this PyTorch calls for float32 GEMMs on the CPU, from its build settings."""
    cfg = torch.__config__.show()
    for key in ("BLAS_INFO=",):
        if key in cfg:
            return cfg.split(key, 1)[1].split(",", 1)[0].strip()
    return "unknown"


class Net(torch.nn.Module):
    """784-H-10 with the parameters nn_train has (W1 H x D, b1, W2 C x H, b2)."""

    def __init__(self, W1, b1, W2, b2):
        super().__init__()
        self.W1, self.b1 = torch.nn.Parameter(W1), torch.nn.Parameter(b1)
        self.W2, self.b2 = torch.nn.Parameter(W2), torch.nn.Parameter(b2)

    def forward(self, xb_u8):
        x = xb_u8.to(torch.float32) / 255.0
        a1 = torch.sigmoid(F.linear(x, self.W1, self.b1))
        return F.linear(a1, self.W2, self.b2)


class GraphedStep:
    """The whole SGD step in CUDA graphs (--cuda-graph): see capture_step."""

    def __init__(self, batch, n_full, rest, idx_full, idx_last, g_full, g_last, ce_sum, hits):
        self.batch, self.n_full, self.rest = batch, n_full, rest
        self.idx_full, self.idx_last = idx_full, idx_last
        self.g_full, self.g_last = g_full, g_last
        self.ce_sum, self.hits = ce_sum, hits
        self.what = "one graph replayed %d times an epoch" % n_full
        if rest:
            self.what += ", one more for the last batch of %d" % rest

    def epoch(self, order):
        """One epoch in the order `order` (n_fit int64 indices on the device): per batch a copy of
        its indices into the static buffer, then one replay. Returns the device tensors holding the
        epoch's cross-entropy sum and hit count (nothing is read back here)."""
        self.ce_sum.zero_()
        self.hits.zero_()
        b = self.batch
        for k in range(self.n_full):
            self.idx_full.copy_(order[k * b:(k + 1) * b])
            self.g_full.replay()
        if self.rest:
            self.idx_last.copy_(order[self.n_full * b:])
            self.g_last.replay()
        return self.ce_sum, self.hits


def capture(fn, *args):
    """A new CUDA graph holding fn(*args) (captured, not run). One function, so that a test
    without a GPU can put an emulation in its place."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*args)
    return g


def capture_step(net, opt, xs, ys, n_fit, batch, warmup=3):
    """Capture the training step, forward + cross-entropy + backward + opt.step() + the running
    loss and hit count, as one CUDA graph per batch size (the full batches, and the smaller last
    one when n_fit is no multiple of batch). Static inputs: an int64 index buffer per graph, read
    by the gather from the resident images xs (uint8) and labels ys. Warm-up steps run first on
    a side stream (autograd, cuBLAS and the optimizer set themselves up outside the capture); the
    parameters they changed are restored, so training starts where eager's does."""
    dev = xs.device
    n_full, rest = divmod(n_fit, batch)
    ce_sum = torch.zeros((), device=dev)
    hits = torch.zeros((), dtype=torch.int64, device=dev)
    params = [p for group in opt.param_groups for p in group["params"]]
    saved = [p.detach().clone() for p in params]

    def step(idx):
        xb, yb = xs[idx], ys[idx]
        z2 = net(xb)
        ce = F.cross_entropy(z2, yb)  # mean over the batch
        ce.backward()
        opt.step()
        with torch.no_grad():
            ce_sum.add_(ce.detach() * idx.numel())
            hits.add_((z2.detach().argmax(1) == yb).sum())

    sizes = [s for s in (batch if n_full else 0, rest) if s]
    bufs = {s: torch.arange(s, device=dev, dtype=torch.int64) for s in sizes}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in sizes:
            for _ in range(warmup):
                opt.zero_grad(set_to_none=True)
                step(bufs[s])
    torch.cuda.current_stream().wait_stream(side)
    graphs = {}
    for s in sizes:
        opt.zero_grad(set_to_none=True)  # the backward allocates the gradients inside the graph
        graphs[s] = capture(step, bufs[s])
    torch.cuda.synchronize()
    with torch.no_grad():
        for p, v in zip(params, saved):
            p.copy_(v)
    return GraphedStep(batch, n_full, rest, bufs.get(batch) if n_full else None, bufs.get(rest),
                       graphs.get(batch) if n_full else None, graphs.get(rest) if rest else None,
                       ce_sum, hits)


def main():
    a = parse()
    if a.procs > 1:
        import torch.multiprocessing as mp
        threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
        # Read by OpenBLAS and OpenMP when each spawned process imports torch afresh.
        os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        mp.spawn(run, args=(a,), nprocs=a.procs, join=True)
    else:
        run(0, a)


def run(rank, a):
    ddp = a.procs > 1
    if ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but this PyTorch (%s) sees no CUDA device" % torch.__version__)
    if a.cuda_graph and a.device != "cuda":
        sys.exit("error: --cuda-graph needs a CUDA device, and this PyTorch (%s) sees none"
                 % torch.__version__)
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")  # the same as allow_tf32 = False, said twice
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)

    train_x, train_y, test_x, test_y, n_fit, n_val, n_test = load_data(a)

    # Resident on the device, as uint8 (one image per row here: PyTorch is row-major).
    xs = torch.from_numpy(train_x[:n_fit].copy()).to(dev)
    ys = torch.from_numpy(train_y[:n_fit].astype(np.int64)).to(dev)
    xt = torch.from_numpy(test_x[:n_test].copy()).to(dev)
    yt = torch.from_numpy(test_y[:n_test].astype(np.int64)).to(dev)

    D, H, C = xs.shape[1], a.hidden, 10

    def glorot(rows, cols):  # Glorot-uniform, as src/schedule/init.h (different generator)
        lim = (6.0 / (rows + cols)) ** 0.5
        return ((torch.rand(rows, cols) * 2 - 1) * lim).to(dev).requires_grad_()

    net = Net(glorot(H, D).detach(), torch.zeros(H, device=dev), glorot(C, H).detach(), torch.zeros(C, device=dev))
    W1, W2 = net.W1, net.W2
    opt = torch.optim.SGD([{"params": [net.W1, net.W2], "weight_decay": a.reg},
                           {"params": [net.b1, net.b2], "weight_decay": 0.0}], lr=a.lr)
    model = torch.nn.parallel.DistributedDataParallel(net) if ddp else net
    if a.compile:  # compiled on the first batch (epoch 1, the warm-up) and again for a short last one
        model = torch.compile(model, dynamic=False, mode=a.compile_mode)
    logits = net  # evaluation: no gradient exchange

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    desc = torch.cuda.get_device_name(dev) if dev.type == "cuda" else \
        "CPU, torch threads %d, OPENBLAS_NUM_THREADS=%s, OMP_NUM_THREADS=%s" % (
            torch.get_num_threads(), os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
            os.environ.get("OMP_NUM_THREADS", "unset"))
    if dev.type == "cpu":
        desc += ", BLAS %s" % blas_name()
    if ddp:
        desc += ", DistributedDataParallel over gloo, %d processes" % a.procs
    if a.cuda_graph:
        graphed = capture_step(net, opt, xs, ys, n_fit, a.batch)
        desc += ", CUDA graph (the whole step: forward, backward, SGD; %s)" % graphed.what
    else:
        desc += (", torch.compile (%s)" % a.compile_mode) if a.compile else ", eager"
    out = rank == 0  # DDP: rank 0 prints
    if not out:
        sys.stdout = open(os.devnull, "w")
    print("peer_torch: PyTorch %s, float32, TF32 off, %s" % (torch.__version__, desc))
    print("data: %s (train %d, validation %d, test %d images)" % (a.data, n_fit, n_val, n_test))
    print("config: hidden=%d batch=%d epochs=%d lr=%g reg=%g seed=%d shuffle=%s" % (
        H, a.batch, a.epochs, a.lr, a.reg, a.seed, "no" if a.no_shuffle else "yes"))
    sys.stdout.flush()

    def eager_epoch(order):
        """The epoch's batches in eager mode; returns the device tensors of its loss sum and hits."""
        ce_sum = torch.zeros((), device=dev)
        hits = torch.zeros((), dtype=torch.int64, device=dev)
        for begin in range(0, n_fit, a.batch):
            idx = order[begin:begin + a.batch]
            if ddp:  # this process's slice of the global batch (as evenly as possible)
                c = idx.numel()
                lo, hi = c * rank // a.procs, c * (rank + 1) // a.procs
                idx = idx[lo:hi]
            yb = ys[idx]
            z2 = model(xs[idx])
            ce = F.cross_entropy(z2, yb)  # mean over the slice; DDP averages the slices
            opt.zero_grad(set_to_none=True)
            ce.backward()
            opt.step()
            with torch.no_grad():  # running statistics stay on the device: no sync per batch
                ce_sum += ce.detach() * idx.numel()
                hits += (z2.detach().argmax(1) == yb).sum()
        return ce_sum, hits

    sync()
    startup = time.perf_counter() - START
    secs, cpus = [], []
    for e in range(a.epochs):
        sync()
        t0 = time.perf_counter()
        c0 = time.process_time()  # this process, all its threads
        order = torch.arange(n_fit, device=dev) if a.no_shuffle else torch.randperm(n_fit, device=dev)
        ce_sum, hits = graphed.epoch(order) if a.cuda_graph else eager_epoch(order)
        sync()
        if ddp:
            dist.barrier()
            stats = torch.stack([ce_sum, hits.to(torch.float32)])
            dist.all_reduce(stats)
            ce_sum, hits = stats[0], stats[1]
        secs.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        with torch.no_grad():
            loss = ce_sum.item() / n_fit + 0.5 * a.reg * (W1.square().sum() + W2.square().sum()).item()
        print("epoch %3d  loss %.5f  train acc %.4f  %.3f s  %.0f images/s" % (
            e + 1, loss, hits.item() / n_fit, secs[-1], n_fit / secs[-1]))
        sys.stdout.flush()

    with torch.no_grad():
        correct = sum(int((logits(xt[i:i + 1024]).argmax(1) == yt[i:i + 1024]).sum())
                      for i in range(0, n_test, 1024))
    first = 1 if len(secs) > 1 else 0  # epoch 1 (warm-up, compilation) left out
    print("startup_seconds: %.2f" % startup)
    print("cpu/wall: %.2f" % (sum(cpus[first:]) / max(sum(secs[first:]), 1e-9)))
    print("epoch_seconds: " + " ".join("%.6f" % s for s in secs))
    print("test precision: %.4f" % (correct / n_test if n_test else 0.0))
    sys.stdout.flush()
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
