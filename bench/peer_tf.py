#!/usr/bin/env python3
"""Peer baseline: nn_train's network and SGD loop written in TensorFlow (CPU).

The TensorFlow twin of bench/peer_torch.py. 784-H-10, sigmoid hidden layer, softmax +
cross-entropy (mean over the batch), L2 on the weights only as (reg/2)(|W1|^2 + |W2|^2), i.e.
a gradient term reg*W added to the weights' gradients and none to the biases', plain SGD,
float32. W1 (H x 784), b1, W2 (10 x H), b2 are tf.Variables (Glorot-uniform weights, zero
biases, numpy generator seeded by --seed); the gradient comes from tf.GradientTape and the
update is assign_sub, all inside one compiled tf.function. The images stay resident as a uint8
tensor; each batch is gathered (tf.gather) and divided by 255 inside the compiled code.
Same split as nn_train: the first --train-size images, the last --val-fraction of them held
out, batches of --batch in a fresh random order every epoch (the last one may be smaller; its
gradient is the mean over its true size). Data: the same IDX files (raw or gzip).

    build/venv-peer-tf/bin/python bench/peer_tf.py --data data/current --hidden 512 \
        --batch 800 --epochs 3 --threads 2
    build/venv-peer-tf/bin/python bench/peer_tf.py --check      # one step vs float64 numpy

Compilation (--mode, --xla): `step` is one tf.function per SGD step called from a Python
loop; `epoch` is one tf.function per epoch, a tf.range loop over the full batches plus the
smaller last batch inside it. --xla compiles that function with XLA (jit_compile=True);
--no-xla runs it as a TensorFlow graph (oneDNN kernels when TF_ENABLE_ONEDNN_OPTS is on,
the default on x86 Linux; ONEDNN_VERBOSE=1 lists them). At 1 thread, 512:800 and 1024:3000:
epoch < step, and the plain graph beats XLA by 4-6%, so the default is --mode epoch --no-xla.
Beware: at 2 threads XLA wins clearly at the small shapes (TF's graph burns the second core at
256:100 for no gain), so pass --xla there for TF's best at 2 threads. The measurements:
bench/README.md ("TensorFlow's modes").

Threads: --threads T (0: $OMP_NUM_THREADS, else 1) sets TensorFlow's intra-op pool to T and
its inter-op pool to 1 before any op runs. The oneDNN in the TensorFlow wheels runs on that
intra-op pool (threadpool runtime, not OpenMP), and XLA:CPU uses the same pool, so T bounds
both; OMP_NUM_THREADS is also set to T for anything OpenMP. The caller
(bench/peer_compare.sh) also pins each peer with taskset to T cores. The `cpu/wall` line
(process CPU time / wall time over the timed epochs) shows how many cores were kept busy.
--procs > 1 is refused (multi-worker TensorFlow is out of scope); --device cuda too (this
is the tensorflow-cpu wheel).

Output (bench/peer_compare.sh reads the last two lines):
    peer_tf: TensorFlow 2.x, float32, CPU, threads T (intra-op T, inter-op 1), oneDNN on|off,
             mode epoch|step, XLA on|off                     (one line)
    data: DIR (train N, validation N, test N images)
    config: hidden=H batch=B epochs=E lr=.. reg=.. seed=S shuffle=yes|no
    epoch   1  loss L  train acc A  S s  R images/s   (L: mean cross-entropy of the epoch's
               forward passes + the L2 term at its end; A: hits of those forward passes, each
               taken before its update, over the training images)
    cpu/wall: X.XX             (process CPU s / wall s over epochs 2..E; 1..E when E == 1)
    epoch_seconds: s1 s2 ...   (wall time of each epoch's batches, result read back)
    test precision: 0.xxxx
Timing matches nn_train's --metrics `seconds`: the shuffle and the batches only, no
validation or test. Epoch 1 includes tracing and compilation.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

from peer_common import add_common_args, load_data

PROG = "peer_tf"


def parse():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                    help="auto: the CPU (this peer is CPU only)")
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads (inter-op 1); 0: $OMP_NUM_THREADS, else 1")
    ap.add_argument("--procs", type=int, default=1, help="processes: only 1 is supported")
    ap.add_argument("--mode", choices=["step", "epoch"], default="epoch",
                    help="one tf.function per SGD step, or per epoch (default: epoch)")
    ap.add_argument("--xla", action=argparse.BooleanOptionalAction, default=False,
                    help="compile with XLA (jit_compile=True); default: off (TF graph, oneDNN)")
    ap.add_argument("--check", action="store_true",
                    help="instead of training: one SGD step vs a float64 numpy recomputation")
    a = ap.parse_args()
    if a.hidden < 1 or a.batch < 1 or a.epochs < 1 or not 0 <= a.val_fraction < 1 or a.procs < 1:
        ap.error("bad --hidden/--batch/--epochs/--val-fraction/--procs")
    if a.threads < 0:
        ap.error("bad --threads")
    if a.procs > 1:
        ap.error("--procs > 1 is not supported (one process; TensorFlow's "
                 "MultiWorkerMirroredStrategy is out of scope)")
    if a.device == "cuda":
        ap.error("--device cuda is not supported (CPU only: the tensorflow-cpu wheel)")
    return a


def import_tf(threads):
    """Import TensorFlow quietly and pin its thread pools; returns (tf, oneDNN on?)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["OMP_NUM_THREADS"] = str(threads)  # for anything OpenMP (TF's oneDNN is not)
    # TF 2.21 logs the oneDNN notice through absl before TF_CPP_MIN_LOG_LEVEL applies:
    # park stderr (fd 2) in a file during the import and replay it only if the import fails.
    quiet = os.environ["TF_CPP_MIN_LOG_LEVEL"] not in ("", "0")
    if quiet:
        sys.stderr.flush()
        saved, log = os.dup(2), tempfile.TemporaryFile()
        os.dup2(log.fileno(), 2)
    try:
        import tensorflow as tf
        from tensorflow.python.util import _pywrap_util_port
    except ImportError as err:
        if quiet:
            os.dup2(saved, 2)
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace"))
        sys.exit("error: TensorFlow is not importable by %s (%s; "
                 "pip install tensorflow-cpu into a venv)" % (sys.executable, err))
    finally:
        if quiet and saved is not None:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            saved = None
            log.close()
    if quiet:  # e.g. the retracing notices of --check, which builds its functions afresh
        tf.get_logger().setLevel("ERROR")
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return tf, bool(_pywrap_util_port.IsMklEnabled())


def make_epoch(tf, xs, ys, params, stats, batch, lr, reg, mode, xla):
    """A function order -> None running one epoch of SGD over xs[order] (compiled per mode).

    stats = (ce_sum, hits): float32 / int32 variables that the epoch adds to (the summed
    cross-entropy and the hits of the forward passes, before each update)."""
    W1, b1, W2, b2 = params
    ce_sum, hits = stats
    lr, reg = tf.constant(lr, tf.float32), tf.constant(reg, tf.float32)

    def sgd_step(idx):
        x = tf.cast(tf.gather(xs, idx), tf.float32) / 255.0
        y = tf.gather(ys, idx)
        with tf.GradientTape() as tape:
            a1 = tf.sigmoid(tf.matmul(x, W1, transpose_b=True) + b1)
            z2 = tf.matmul(a1, W2, transpose_b=True) + b2
            ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z2))
        gW1, gb1, gW2, gb2 = tape.gradient(ce, [W1, b1, W2, b2])
        W1.assign_sub(lr * (gW1 + reg * W1))
        b1.assign_sub(lr * gb1)
        W2.assign_sub(lr * (gW2 + reg * W2))
        b2.assign_sub(lr * gb2)
        n = tf.cast(tf.shape(idx)[0], tf.float32)
        h = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(z2, axis=1, output_type=tf.int32), y), tf.int32))
        return ce * n, h

    if mode == "step":
        @tf.function(jit_compile=xla)
        def step(idx):
            c, h = sgd_step(idx)
            ce_sum.assign_add(c)
            hits.assign_add(h)

        def run(order):  # order: int32 tensor; the last batch's shape traces a second time
            n = int(order.shape[0])
            for begin in range(0, n, batch):
                step(order[begin:begin + batch])
        return run

    def make(n):
        n_full, tail = divmod(n, batch)

        @tf.function(jit_compile=xla)
        def epoch(order):
            c_acc, h_acc = tf.constant(0.0), tf.constant(0, tf.int32)
            for i in tf.range(n_full):
                c, h = sgd_step(tf.slice(order, [i * batch], [batch]))
                c_acc += c
                h_acc += h
            if tail:  # static: the smaller last batch, its own static shape
                c, h = sgd_step(order[n_full * batch:])
                c_acc += c
                h_acc += h
            ce_sum.assign_add(c_acc)
            hits.assign_add(h_acc)
        return epoch

    compiled = {}

    def run(order):
        n = int(order.shape[0])
        if n not in compiled:
            compiled[n] = make(n)
        compiled[n](order)
    return run


def glorot(rng, rows, cols):  # Glorot-uniform, as src/schedule/init.h (different generator)
    lim = (6.0 / (rows + cols)) ** 0.5
    return rng.uniform(-lim, lim, size=(rows, cols)).astype(np.float32)


def reference(params, x_u8, y, batches, lr, reg):
    """Independent float64 numpy SGD over the given index batches: (params, ce sum, hits)."""
    W1, b1, W2, b2 = (p.astype(np.float64) for p in params)
    ce_total, hits = 0.0, 0
    for idx in batches:
        x, t = x_u8[idx].astype(np.float64) / 255.0, y[idx]
        m = len(idx)
        a1 = 1.0 / (1.0 + np.exp(-(x @ W1.T + b1)))
        z2 = a1 @ W2.T + b2
        p = np.exp(z2 - z2.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        ce_total += -np.log(p[np.arange(m), t]).sum()
        hits += int((z2.argmax(axis=1) == t).sum())
        d2 = p.copy()
        d2[np.arange(m), t] -= 1.0
        d2 /= m                                  # dCE/dz2 for the mean over the batch
        d1 = (d2 @ W2) * a1 * (1.0 - a1)         # dCE/dz1
        gW2, gb2 = d2.T @ a1 + reg * W2, d2.sum(axis=0)
        gW1, gb1 = d1.T @ x + reg * W1, d1.sum(axis=0)
        W1, b1, W2, b2 = W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2
    return (W1, b1, W2, b2), ce_total, hits


def check(tf):
    """One SGD step on 7 fixed images (H=5) through each compiled variant vs float64 numpy;
    also one epoch of batches 4 + 3 (the smaller last batch). Returns the exit status."""
    rng = np.random.default_rng(12345)
    D, H, C, n = 784, 5, 10, 7
    lr, reg = 0.5, 0.05  # reg large enough that a wrong L2 term shows far above 1e-5
    x = rng.integers(0, 256, size=(n, D), dtype=np.uint8)
    y = rng.integers(0, C, size=n).astype(np.int32)
    init = (glorot(rng, H, D), rng.uniform(-0.5, 0.5, H).astype(np.float32),
            glorot(rng, C, H), rng.uniform(-0.5, 0.5, C).astype(np.float32))
    xs, ys = tf.constant(x), tf.constant(y)
    order = np.arange(n, dtype=np.int32)
    worst = 0.0
    for mode in ("epoch", "step"):
        for xla in (True, False):
            errs = []
            for batch in (7, 4):
                params = [tf.Variable(p) for p in init]
                stats = (tf.Variable(0.0), tf.Variable(0, dtype=tf.int32))
                run = make_epoch(tf, xs, ys, params, stats, batch, lr, reg, mode, xla)
                run(tf.constant(order))
                want, ce_want, hits_want = reference(
                    init, x, y, [order[i:i + batch] for i in range(0, n, batch)], lr, reg)
                err = max(np.abs(p.numpy() - w).max() / np.abs(w).max() for p, w in zip(params, want))
                err = max(err, abs(float(stats[0].numpy()) - ce_want) / ce_want)
                if int(stats[1].numpy()) != hits_want:
                    err = max(err, 1.0)
                errs.append(err)
            worst = max(worst, *errs)
            print("check: mode %-5s XLA %-3s  max relative error: one step of 7 %.2e, "
                  "batches 4+3 %.2e" % (mode, "on" if xla else "off", errs[0], errs[1]))
    ok = worst < 1e-5
    print("check: %s (max relative error %.2e, limit 1e-05)" % ("pass" if ok else "FAIL", worst))
    return 0 if ok else 1


def main():
    a = parse()
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "1") or 1)
    tf, onednn = import_tf(threads)
    if a.check:
        sys.exit(check(tf))

    train_x, train_y, test_x, test_y, n_fit, n_val, n_test = load_data(a)

    # Resident as uint8, one image per row.
    xs = tf.constant(train_x[:n_fit])
    ys = tf.constant(train_y[:n_fit].astype(np.int32))
    xt = tf.constant(test_x[:n_test])
    yt = tf.constant(test_y[:n_test].astype(np.int32))

    D, H, C = train_x.shape[1], a.hidden, 10
    rng = np.random.default_rng(a.seed)
    params = [tf.Variable(glorot(rng, H, D), name="W1"), tf.Variable(np.zeros(H, np.float32), name="b1"),
              tf.Variable(glorot(rng, C, H), name="W2"), tf.Variable(np.zeros(C, np.float32), name="b2")]
    W1, b1, W2, b2 = params
    stats = (tf.Variable(0.0), tf.Variable(0, dtype=tf.int32))
    run_epoch = make_epoch(tf, xs, ys, params, stats, a.batch, a.lr, a.reg, a.mode, a.xla)

    @tf.function
    def count_hits(x_u8, y):
        x = tf.cast(x_u8, tf.float32) / 255.0
        z2 = tf.matmul(tf.sigmoid(tf.matmul(x, W1, transpose_b=True) + b1), W2, transpose_b=True) + b2
        return tf.reduce_sum(tf.cast(tf.equal(tf.argmax(z2, axis=1, output_type=tf.int32), y), tf.int32))

    print("%s: TensorFlow %s, float32, CPU, threads %d (intra-op %d, inter-op 1), oneDNN %s, "
          "mode %s, XLA %s" % (PROG, tf.__version__, threads, threads, "on" if onednn else "off",
                               a.mode, "on" if a.xla else "off"))
    print("data: %s (train %d, validation %d, test %d images)" % (a.data, n_fit, n_val, n_test))
    print("config: hidden=%d batch=%d epochs=%d lr=%g reg=%g seed=%d shuffle=%s" % (
        H, a.batch, a.epochs, a.lr, a.reg, a.seed, "no" if a.no_shuffle else "yes"))
    sys.stdout.flush()

    shuffle = np.random.default_rng(a.seed + 1)
    secs, cpus = [], []
    for e in range(a.epochs):
        stats[0].assign(0.0)
        stats[1].assign(0)
        c0, t0 = time.process_time(), time.perf_counter()
        perm = np.arange(n_fit, dtype=np.int32) if a.no_shuffle else \
            shuffle.permutation(n_fit).astype(np.int32)
        run_epoch(tf.constant(perm))
        ce_sum, hits = float(stats[0].numpy()), int(stats[1].numpy())  # waits for the work
        secs.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        loss = ce_sum / n_fit + 0.5 * a.reg * float(
            tf.reduce_sum(tf.square(W1)) + tf.reduce_sum(tf.square(W2)))
        print("epoch %3d  loss %.5f  train acc %.4f  %.3f s  %.0f images/s" % (
            e + 1, loss, hits / n_fit, secs[-1], n_fit / secs[-1]))
        sys.stdout.flush()

    correct = sum(int(count_hits(xt[i:i + 1024], yt[i:i + 1024])) for i in range(0, n_test, 1024))
    first = 1 if a.epochs > 1 else 0
    print("cpu/wall: %.2f" % (sum(cpus[first:]) / max(sum(secs[first:]), 1e-9)))
    print("epoch_seconds: " + " ".join("%.6f" % s for s in secs))
    print("test precision: %.4f" % (correct / n_test if n_test else 0.0))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
