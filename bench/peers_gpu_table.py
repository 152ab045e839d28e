#!/usr/bin/env python3
"""The GPU peer comparison of tests/cuda/gpu_session.sh as Markdown: nn_train against the
strongest peers, each step's output read from gpu_session.sh's log folder.

    python3 bench/peers_gpu_table.py LOGDIR [--gpu NAME] [--peak TFLOPS] [--date YYYY-MM-DD]
                                     [--out FILE.md] [--csv FILE.csv]

LOGDIR holds gpu_session.sh's step outputs, named peer_SYSTEM_H_B.log (and, for nn_train,
peer_SYSTEM_H_B.csv, its --metrics file), SYSTEM one of
    ours            nn_train, default options (--persistent auto, --fused auto)
    ours_fused      nn_train --persistent off (the fused step, a graph replay a step)
    ours_persistent nn_train --persistent on (runs of steps in one cooperative launch each)
    ours_unfused    nn_train --fused off
    jax_scan        bench/peer_jax.py --device gpu --mode scan (the epoch in one jitted lax.scan)
    jax_step        bench/peer_jax.py --device gpu --mode step (a jitted step per batch)
    torch_graph     bench/peer_torch.py --device cuda --cuda-graph (the whole step in a CUDA graph)
    torch_eager     bench/peer_torch.py --device cuda (eager)
Each run's time is the median seconds per epoch over epochs 2..E (epoch 1, the warm-up, left
out; with E = 1, epoch 1): the peers' `epoch_seconds:` line, nn_train's CSV `seconds` column.

The FP32 limit of a shape is the epoch's GEMM FLOPs over the GPU's FP32 (CUDA-core, non-tensor)
peak. FLOPs of an epoch of n images at H hidden units (D = 784 inputs, C = 10 classes):
    forward  Z1 = W1 X: 2 D H n, Z2 = W2 A1: 2 H C n                 -> 2 H (D + C) n = 1588 H n
    backward dW1 = dZ1 X^T: 2 D H n, dW2 = dZ2 A1^T and dA1 = W2^T dZ2: 2 H C n each
             (no gradient with respect to the input images)            -> 2 H (D + 2C) n = 1608 H n
    epoch    2 n (2 D H + 3 H C) = 3196 H n
(the elementwise work, the softmax and the update are left out: they are O(H n) and O(D H)).
The peak comes from --peak, else from a small table of GPU names (PEAKS below, the vendor's
datasheet FP32 figures, checked against SMs x 128 FP32 lanes x 2 x the boost clock); a GPU not
in the table gets no limit column unless --peak is given. The GPU name comes from --gpu, else
from LOGDIR/machine.log (nvidia-smi's query line), else from a peer's header line.

Prints the Markdown (and writes it to --out), and writes one CSV row per run to --csv:
shape,system,median_s,epochs,startup_s,test_precision,status. Exit status 0 when at least one
run was read, 1 when none was.
"""
import argparse
import csv
import datetime
import os
import re
import statistics
import sys

D, C = 784, 10
SHAPES = [(256, 100), (512, 800), (1024, 1000), (1024, 3000)]
SYSTEMS = [  # (key, column title)
    ("ours", "ours"),
    ("ours_fused", "ours `--persistent off`"),
    ("ours_persistent", "ours `--persistent on`"),
    ("ours_unfused", "ours `--fused off`"),
    ("jax_scan", "JAX scan"),
    ("jax_step", "JAX step"),
    ("torch_graph", "PyTorch CUDA graph"),
    ("torch_eager", "PyTorch eager"),
]
PEERS = [k for k, _ in SYSTEMS if not k.startswith("ours")]

# FP32 (non-tensor) peak, TFLOP/s, by GPU name: first matching pattern wins (lower-case search).
PEAKS = [
    (r"h200 nvl", 60.0, "NVIDIA H200 NVL datasheet, FP32 60 TFLOPS"),
    (r"h200", 67.0, "NVIDIA H200 (SXM) datasheet, FP32 67 TFLOPS; 132 SMs x 128 x 2 x 1.98 GHz = 66.9"),
    (r"h100 nvl", 60.0, "NVIDIA H100 NVL datasheet, FP32 60 TFLOPS"),
    (r"h100 pcie", 51.2, "NVIDIA H100 PCIe: 114 SMs x 128 x 2 x 1.755 GHz = 51.2 (datasheet 51)"),
    (r"h100", 66.9, "NVIDIA H100 SXM5 datasheet, FP32 67 TFLOPS; 132 SMs x 128 x 2 x 1.98 GHz = 66.9"),
]


def epoch_flops(hidden, n):
    """GEMM FLOPs of one epoch of n images (see the docstring): 2 n (2 D H + 3 H C)."""
    return 2 * n * (2 * D * hidden + 3 * hidden * C)


def peak_of(name):
    """(TFLOP/s, source) for a GPU name, or (None, why)."""
    low = (name or "").lower()
    for pattern, tflops, source in PEAKS:
        if re.search(pattern, low):
            return tflops, source
    return None, "GPU %r not in the table (give --peak)" % name


def median_after_first(secs):
    return statistics.median(secs[1:] if len(secs) > 1 else secs)


def read_peer(path):
    """A peer's log: dict with secs, startup, precision, n_fit, losses, header; None if absent."""
    if not os.path.exists(path):
        return None
    run = {"secs": [], "startup": None, "precision": None, "n_fit": None, "losses": [], "header": ""}
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("peer_") and not run["header"]:
                run["header"] = line.strip()
            elif line.startswith("epoch_seconds:"):
                run["secs"] = [float(v) for v in line.split(":", 1)[1].split()]
            elif line.startswith("startup_seconds:"):
                run["startup"] = float(line.split(":", 1)[1])
            elif line.startswith("test precision:"):
                run["precision"] = float(line.split(":", 1)[1])
            m = re.match(r"data: .*\(train (\d+),", line)
            if m:
                run["n_fit"] = int(m.group(1))
            m = re.match(r"epoch +\d+ +loss ([0-9.]+)", line)
            if m:
                run["losses"].append(float(m.group(1)))
    return run


def read_ours(csv_path, log_path):
    """nn_train's --metrics CSV (seconds per epoch) and its log (fused or not)."""
    if not os.path.exists(csv_path):
        return None if not os.path.exists(log_path) else {"secs": [], "log": True}
    run = {"secs": [], "losses": [], "startup": None, "precision": None, "fused": None}
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            run["secs"].append(float(row["seconds"]))
            if row.get("loss"):
                run["losses"].append(float(row["loss"]))
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            text = f.read()
        run["fused"] = bool(re.search(r"^step: fused", text, re.M))
        m = re.findall(r"test precision: ([0-9.]+)", text)
        if m:
            run["precision"] = float(m[-1])
    return run


def gpu_name(logdir, runs):
    path = os.path.join(logdir, "machine.log")
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:  # nvidia-smi --query-gpu=name,driver_version,... --format=csv
                if re.match(r"NVIDIA [^,]+, [0-9.]+, ", line):
                    return line.split(",")[0].strip()
    for run in runs.values():
        m = re.search(r"TF32 off, (NVIDIA [^,]+)", (run or {}).get("header", ""))
        if m:
            return m.group(1)
        m = re.search(r"GPU (NVIDIA [^(]+) \(", (run or {}).get("header", ""))
        if m:
            return m.group(1).strip()
    return None


def fmt_ms(s):
    ms = s * 1e3
    return "%#.3g" % ms if ms < 100 else "%.0f" % ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logdir")
    ap.add_argument("--gpu", help="the GPU's name (default: from LOGDIR/machine.log or the logs)")
    ap.add_argument("--peak", type=float, help="FP32 peak in TFLOP/s (default: by the GPU's name)")
    ap.add_argument("--date", help="the run's date (default: today, UTC)")
    ap.add_argument("--n-fit", type=int, default=0,
                    help="training images per epoch (default: from a peer's log, else 54000)")
    ap.add_argument("--out", help="also write the Markdown here")
    ap.add_argument("--csv", help="write one row per run here")
    a = ap.parse_args()

    runs, status = {}, {}
    for (h, b) in SHAPES:
        for key, _ in SYSTEMS:
            stem = os.path.join(a.logdir, "peer_%s_%d_%d" % (key, h, b))
            run = read_ours(stem + ".csv", stem + ".log") if key.startswith("ours") else read_peer(stem + ".log")
            runs[(h, b, key)] = run
            if run is None:
                status[(h, b, key)] = "not run"
            elif not run["secs"]:
                status[(h, b, key)] = "failed"
            else:
                status[(h, b, key)] = "ok"
                run["median"] = median_after_first(run["secs"])
    if not any(v == "ok" for v in status.values()):
        print("peers_gpu_table: no run with epoch times under %s" % a.logdir, file=sys.stderr)
        return 1

    name = a.gpu or gpu_name(a.logdir, {k: v for k, v in runs.items() if v and "header" in v})
    if a.peak:
        peak, source = a.peak, "--peak %g" % a.peak
    else:
        peak, source = peak_of(name)
    n_fit = a.n_fit or next((r["n_fit"] for r in runs.values() if r and r.get("n_fit")), None) or 54000
    date = a.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")

    def cell(h, b, key):
        st = status[(h, b, key)]
        if st != "ok":
            return "-" if st == "not run" else "failed"
        r = runs[(h, b, key)]
        text = fmt_ms(r["median"])
        ours = runs[(h, b, "ours")]
        if key != "ours" and status[(h, b, "ours")] == "ok":
            text += " (%.2f)" % (ours["median"] / r["median"])
        return text

    out = []
    out.append("GPU peer comparison: %s, %s; median ms per epoch of epochs 2+ (%d training images "
               "an epoch), float32 (TF32 off, JAX at precision HIGHEST). In parentheses: ours / "
               "that system (below 1: ours is faster)." % (name or "GPU unknown", date, n_fit))
    out.append("")
    titles = [t for _, t in SYSTEMS]
    out.append("| H:B | FP32 limit | " + " | ".join(titles) + " |")
    out.append("|---" * (2 + len(titles)) + "|")
    for (h, b) in SHAPES:
        limit = "%.3g" % (epoch_flops(h, n_fit) / (peak * 1e12) * 1e3) if peak else "n/a"
        out.append("| %d:%d | %s | " % (h, b, limit) + " | ".join(cell(h, b, k) for k, _ in SYSTEMS) + " |")
    out.append("")
    if peak:
        out.append("FP32 limit: the epoch's GEMM FLOPs, 2 n (2 D H + 3 H C) = 3196 H n (D = 784, C = 10, "
                   "n = %d), at the FP32 peak of %g TFLOP/s (%s), in ms. Share of that limit reached:"
                   % (n_fit, peak, source))
        out.append("")
        out.append("| H:B | GFLOP an epoch | " + " | ".join(titles) + " |")
        out.append("|---" * (2 + len(titles)) + "|")
        for (h, b) in SHAPES:
            limit = epoch_flops(h, n_fit) / (peak * 1e12)
            cells = ["%.1f%%" % (100 * limit / runs[(h, b, k)]["median"]) if status[(h, b, k)] == "ok"
                     else "-" for k, _ in SYSTEMS]
            out.append("| %d:%d | %.1f | " % (h, b, epoch_flops(h, n_fit) / 1e9) + " | ".join(cells) + " |")
    else:
        out.append("FP32 limit: %s." % source)
    out.append("")
    # Notes: startup, precision, fused, graph-vs-eager agreement, failures.
    notes = []
    for (h, b) in SHAPES:
        parts = []
        for key, title in SYSTEMS:
            r, st = runs[(h, b, key)], status[(h, b, key)]
            if st == "failed":
                parts.append("%s failed (log peer_%s_%d_%d.log)" % (title, key, h, b))
            if st != "ok":
                continue
            bits = []
            if r.get("startup") is not None:
                bits.append("startup %.1f s" % r["startup"])
            if r.get("precision") is not None:
                bits.append("test %.4f" % r["precision"])
            if key.startswith("ours") and r.get("fused") is not None:
                bits.append("fused step" if r["fused"] else "no `step: fused` line")
            if bits:
                parts.append("%s: %s" % (title, ", ".join(bits)))
        g, e = runs[(h, b, "torch_graph")], runs[(h, b, "torch_eager")]
        if status[(h, b, "torch_graph")] == "ok" and status[(h, b, "torch_eager")] == "ok" \
                and g["losses"] and len(g["losses"]) == len(e["losses"]):
            rel = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(g["losses"], e["losses"]))
            parts.append("PyTorch graph vs eager: per-epoch loss (as printed, 5 decimals) within %.1e relative (same initial weights and order)" % rel)
        if parts:
            notes.append("- %d:%d: %s." % (h, b, "; ".join(parts)))
    out.extend(notes)
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["device", "date", "shape", "system", "median_s", "epoch_seconds", "startup_s",
                        "test_precision", "status"])
            for (h, b) in SHAPES:
                for key, _ in SYSTEMS:
                    r, st = runs[(h, b, key)], status[(h, b, key)]
                    ok = st == "ok"
                    w.writerow([name or "", date, "%d:%d" % (h, b), key,
                                "%.6f" % r["median"] if ok else "",
                                " ".join("%.6f" % s for s in r["secs"]) if ok else "",
                                "" if not ok or r.get("startup") is None else "%.2f" % r["startup"],
                                "" if not ok or r.get("precision") is None else "%.4f" % r["precision"],
                                st])
    return 0


if __name__ == "__main__":
    sys.exit(main())
