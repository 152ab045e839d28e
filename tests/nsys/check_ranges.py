#!/usr/bin/env python3
"""Checks the NVTX summaries that nsys.sh exported (nsys stats nvtx_sum, or nvtxsum before 2023)
against the ranges the trainer is meant to open, and how often, on each rank.

  check_ranges.py DEVICE EPOCHS BATCHES NP OUT_DIR

DEVICE   gpu | cpu (the trainer's --device)
EPOCHS   --epochs of the run; BATCHES: batches per epoch (training images / --batch, rounded up)
NP       ranks: OUT_DIR must hold nn_rank<r>_nvtx_sum.csv (or _nvtxsum.csv) for r = 0..NP-1
Prints "ok ..."/"FAIL ..." per check and "nsys-ranges: N passed, M failed"; exit 1 on failure.
"""
import csv
import glob
import os
import sys

# ---- the expected ranges: name -> count on one rank, in the names of the code's NN_RANGE calls ----
# N: the training steps (EPOCHS x BATCHES, the same on every rank); V: the evaluations, one on the
# validation set per epoch and one on the test set, on rank 0 only (0 elsewhere: the range must
# then be absent). At the sizes make test-nsys uses, each evaluation is one forward pass.
# Edit here when a range is renamed, added or removed (src/train, src/model).
RANGES = {
    # DeviceModel's fused step (src/model/device_model_step.cpp, the default; run with --no-graph):
    # the forward GEMM, "layer 2, fused" and the dW1 GEMM per batch; the layer-2 GEMM and the
    # separate kernels' backward GEMMs 1 and 2 only where the evaluations run them (or never).
    "gpu": {
        "train setup": "1",
        "train (gpu)": "1",
        "batch iteration": "N",
        "forward": "N + V",
        "forward GEMM 1": "N + V",
        "forward GEMM 2": "V",
        "layer 2, fused": "N",
        "backward": "N",
        "backward GEMM 3": "N",
        "cudaMemcpyDeviceToHost": "N",
        "MPI_Allreduce": "N",
        "cudaMemcpyHostToDevice": "N",
        "step": "N",
        "evaluate": "V",
    },
    "cpu": {  # CpuModel (src/model/cpu_model*.cpp), ranks sharing W1 on one node (--node-shared auto)
        "train setup": "1",
        "train (cpu)": "1",
        "batch iteration": "N",
        "forward": "N",
        "forward GEMM 1": "N + V",
        "layer 2, fused": "N",
        "forward GEMM 2": "V",  # the evaluations only: training fuses layer 2
        "backward": "N",
        "backward GEMM 3": "N",
        "MPI_Allreduce": "N",
        "step": "N",
        "evaluate": "V",
    },
}
# Names that must not appear: the other device's top range, and the old one.
ABSENT = {"gpu": ["train (cpu)", "GPU parallel train", "backward GEMM 1", "backward GEMM 2"],
          "cpu": ["train (gpu)", "GPU parallel train"]}

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def read_summary(path):
    """{range name: instances} from an nvtx_sum/nvtxsum CSV (names without the ':' of the default
    domain that newer versions put before push/pop ranges; the MPI: ranges of --trace=mpi kept)."""
    counts = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            name = (row.get("Range") or row.get("Name") or "").lstrip(":")
            n = int(float(row.get("Instances") or row.get("Count") or 0))
            counts[name] = counts.get(name, 0) + n
    return counts


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in RANGES:
        sys.exit(__doc__)
    device, epochs, batches, np_ranks, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    steps = epochs * batches
    for rank in range(np_ranks):
        tag = f"[{device}] rank {rank}:"
        found = sorted(glob.glob(os.path.join(out, f"nn_rank{rank}_nvtx_sum.csv"))
                       + glob.glob(os.path.join(out, f"nn_rank{rank}_nvtxsum.csv")))
        check(os.path.exists(os.path.join(out, f"nn_rank{rank}.nsys-rep")), f"{tag} report nn_rank{rank}.nsys-rep")
        if not check(len(found) == 1, f"{tag} one NVTX summary CSV ({[os.path.basename(p) for p in found]})"):
            continue
        counts = read_summary(found[0])
        values = {"N": steps, "V": (epochs + 1) if rank == 0 else 0, "E": epochs, "B": batches}
        for name, expr in RANGES[device].items():
            want = eval(expr, {"__builtins__": {}}, values)  # the table's own arithmetic
            got = counts.get(name, 0)
            what = "absent" if want == 0 else f"{want} instance(s) ({expr})"
            check(got == want, f"{tag} '{name}': {what}" + ("" if got == want else f", found {got}"))
        for name in ABSENT[device]:
            check(name not in counts, f"{tag} no '{name}' range")
    print(f"nsys-ranges: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
