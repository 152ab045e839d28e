#!/usr/bin/env python3
"""Summary of the CPU GEMM lab (bench/cpu_gemm/lab.sh): for each H:B, rank count p and
thread count, every library's step time (the sum of the trainer's five GEMMs, each the
fastest of the rounds; for dnnl, dW2's transpose dW2t in place of dW2, as the trainer calls it), its ratio to OpenBLAS (> 1: faster than OpenBLAS), its GFLOP/s and
share of the measured FMA peak at that thread count; then the fastest library of each GEMM.

    summary.py LAB_CSV FMA_CSV [--mkl-version V]
"""
import csv
import sys
from collections import defaultdict

GEMMS = ["fwd1", "fwd2", "dW2", "dA1", "dW1"]


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: summary.py LAB_CSV FMA_CSV [--mkl-version V]")
    lab_csv, fma_csv = argv[1], argv[2]
    mkl_version = argv[argv.index("--mkl-version") + 1] if "--mkl-version" in argv else ""
    best = {}  # (lib, threads, H, B, p, gemm) -> (seconds, flop)
    versions = {}
    for r in csv.DictReader(open(lab_csv)):
        key = (r["lib"], int(r["threads"]), int(r["H"]), int(r["B"]), int(r["p"]), r["gemm"])
        s = float(r["seconds"])
        flop = 2.0 * int(r["M"]) * int(r["N"]) * int(r["K"])
        if key not in best or s < best[key][0]:
            best[key] = (s, flop)
        versions[r["lib"]] = r["version"]
    peak = defaultdict(float)  # threads -> GFLOP/s (the best ISA)
    peak_isa = {}
    for r in csv.DictReader(open(fma_csv)):
        t, g = int(r["threads"]), float(r["gflops"])
        if g > peak[t]:
            peak[t], peak_isa[t] = g, r["isa"]
    libs = sorted({k[0] for k in best}, key=lambda l: (l != "openblas", l))
    cases = sorted({k[1:5] for k in best}, key=lambda c: (c[1], c[2], c[3], c[0]))
    print("libraries: " + "; ".join(
        "%s = %s%s" % (l, versions[l], " (PyPI mkl %s)" % mkl_version if l == "mkl" and mkl_version else "")
        for l in libs))
    print("FMA peak (fp32): " + ", ".join("%d thread%s %.1f GFLOP/s (%s)" % (t, "" if t == 1 else "s", peak[t], peak_isa[t])
                                        for t in sorted(peak)))
    print()
    print("%-22s %-9s %10s %8s %9s %7s   fastest per GEMM (ratio to OpenBLAS)" %
          ("H:B p threads", "library", "step us", "vs OB", "GFLOP/s", "% peak"))
    for (t, H, B, p) in cases:
        step = {}
        for l in libs:
            # The trainer's step with oneDNN has dW2's transpose in place of dW2 (cpu_model.cpp).
            names = [("dW2t" if l == "dnnl" and g == "dW2" and (l, t, H, B, p, "dW2t") in best else g) for g in GEMMS]
            rows = [best.get((l, t, H, B, p, g)) for g in names]
            if all(rows):
                step[l] = (sum(r[0] for r in rows), sum(r[1] for r in rows))
        if "openblas" not in step:
            continue
        ob = step["openblas"][0]
        fastest = []
        for g in GEMMS:
            times = {l: best[(l, t, H, B, p, g)][0] for l in libs if (l, t, H, B, p, g) in best}
            w = min(times, key=times.get)
            fastest.append("%s %s %.2f" % (g, w, best[("openblas", t, H, B, p, g)][0] / times[w]))
        for i, l in enumerate(sorted(step, key=lambda l: step[l][0])):
            s, flop = step[l]
            share = 100.0 * flop / s * 1e-9 / peak[t] if peak.get(t) else float("nan")
            label = "%d:%d p=%d t=%d" % (H, B, p, t) if i == 0 else ""
            print("%-22s %-9s %10.1f %8.2f %9.1f %6.0f%%   %s" %
                  (label, l, s * 1e6, ob / s, flop / s * 1e-9, share, ", ".join(fastest) if i == 0 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
