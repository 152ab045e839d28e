#!/usr/bin/python3
"""A check of peer_torch.py --cuda-graph's bookkeeping that needs no GPU: the graph code path
(capture_step, GraphedStep) run on the CPU with CUDA emulated. capture() records the step instead
of capturing it and replay() runs it again with the gradients cleared first (a backward captured
with the gradients set to None writes them afresh in every replay); the stream calls do nothing.
Trains a small random problem (250 images, batches of 64: three full ones and a last one of 58)
for 3 epochs both ways from the same weights in the same orders, and compares the parameters and
each epoch's loss sum and hit count with the eager loop's. Exit status 0 when they agree (to
1e-6), else 1. What it cannot check: CUDA's capture itself (that needs a GPU: the session's
peer_torch_graph_* steps, whose losses bench/peers_gpu_table.py compares with eager's).

    /usr/bin/python3 bench/peer_torch_graph_check.py
"""
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import peer_torch as pt  # noqa: E402


class FakeGraph:
    """Stands for a captured graph: replay() runs the recorded step with fresh gradients."""

    def __init__(self, fn, args, opt):
        self.fn, self.args, self.opt = fn, args, opt

    def replay(self):
        self.opt.zero_grad(set_to_none=True)
        self.fn(*self.args)


class FakeStream:
    """Stands for a CUDA stream: nothing to wait for on the CPU."""

    def wait_stream(self, other):
        pass


sys.argv = sys.argv[:1]
torch.cuda.Stream = FakeStream
torch.cuda.current_stream = lambda: FakeStream()
torch.cuda.stream = lambda s: contextlib.nullcontext()
torch.cuda.synchronize = lambda: None


def run(graphed, n_fit=250, batch=64, D=784, H=16, C=10, epochs=3):
    """Per-epoch (loss sum, hits) and the final parameters, eager or through GraphedStep."""
    torch.manual_seed(3)
    xs = torch.randint(0, 256, (n_fit, D), dtype=torch.uint8)
    ys = torch.randint(0, C, (n_fit,))
    net = pt.Net((torch.rand(H, D) - .5) * .1, torch.zeros(H), (torch.rand(C, H) - .5) * .1, torch.zeros(C))
    opt = torch.optim.SGD([{"params": [net.W1, net.W2], "weight_decay": 1e-3},
                           {"params": [net.b1, net.b2], "weight_decay": 0.0}], lr=0.5)
    if graphed:
        pt.capture = lambda fn, *args: FakeGraph(fn, args, opt)
        g = pt.capture_step(net, opt, xs, ys, n_fit, batch)
        print("graphed:", g.what)
    out = []
    gen = torch.Generator().manual_seed(7)
    for e in range(epochs):
        order = torch.randperm(n_fit, generator=gen)
        if graphed:
            ce_sum, hits = g.epoch(order)
        else:
            ce_sum, hits = torch.zeros(()), torch.zeros((), dtype=torch.int64)
            for b in range(0, n_fit, batch):
                idx = order[b:b + batch]
                z2 = net(xs[idx])
                ce = F.cross_entropy(z2, ys[idx])
                opt.zero_grad(set_to_none=True)
                ce.backward()
                opt.step()
                with torch.no_grad():
                    ce_sum += ce.detach() * idx.numel()
                    hits += (z2.argmax(1) == ys[idx]).sum()
        out.append((float(ce_sum), int(hits)))
    return out, [p.detach().clone() for p in (net.W1, net.b1, net.W2, net.b2)]


def main():
    e_stats, e_p = run(False)
    g_stats, g_p = run(True)
    print("eager   (loss sum, hits) per epoch:", e_stats)
    print("graphed (loss sum, hits) per epoch:", g_stats)
    err = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(g_p, e_p))
    ok = err < 1e-6 and all(abs(a[0] - b[0]) <= 1e-6 * abs(b[0]) and a[1] == b[1]
                            for a, b in zip(g_stats, e_stats))
    print("peer_torch_graph_check: max relative parameter difference %.1e -> %s"
          % (err, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
