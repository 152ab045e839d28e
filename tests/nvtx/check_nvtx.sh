#!/usr/bin/env bash
# NVTX range test: a short data-parallel training run with the NVTX recorder injected
# (NVTX_INJECTION64_PATH), then checks on every rank's log that the expected ranges
# appear, nest as the trainer intends, and balance.
#
#   tests/nvtx/check_nvtx.sh RECORDER_SO NN_TRAIN DATA_DIR|synthetic [NP]
#
# RECORDER_SO  libnvtx_recorder.so built from tests/nvtx/nvtx_recorder.cpp
# NN_TRAIN     the trainer (the emulator build runs without a GPU)
# DATA_DIR     IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]), or the word
#              "synthetic": 600 + 100 random 28x28 images written to the temp directory
#              (the ranges do not depend on what the pixels are)
# NP           MPI ranks (default 2; at 1 rank the trainer skips the gradient round trip)
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), NVTX_KEEP=1 keeps the logs,
#   NVTX_STEP=separate|fused: the GPU step the run takes (--fused off or on; default separate),
#   always with --no-graph (a replayed CUDA graph repeats the kernels, not the host's ranges).
# Builds nothing. Prints "ok ..."/"FAIL ..." per check, then "nvtx: N passed, M failed";
# exits non-zero on any failure.
set -euo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
  echo "usage: $0 RECORDER_SO NN_TRAIN DATA_DIR|synthetic [NP]" >&2
  exit 2
fi
recorder=$1 train=$2 data=$3 np=${4:-2}
mpirun_cmd=${MPIRUN:-$(cd "$(dirname "$0")/../.." && pwd)/slurm/mpirun.sh}  # a private session directory per launch
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"

for f in "$recorder" "$train"; do
  [ -f "$f" ] || { echo "FAIL missing $f"; echo "nvtx: 0 passed, 1 failed"; exit 1; }
done
if [ "$data" != synthetic ] && [ ! -d "$data" ]; then
  echo "FAIL missing data directory $data"; echo "nvtx: 0 passed, 1 failed"; exit 1
fi
case $np in '' | *[!0-9]* | 0) echo "NP must be a positive integer, not '$np'" >&2; exit 2 ;; esac
# dlopen() needs a path with a slash; an absolute one survives any working directory.
recorder_abs="$(cd "$(dirname "$recorder")" && pwd)/$(basename "$recorder")"

work=$(mktemp -d "${TMPDIR:-/tmp}/nvtx-check.XXXXXX")
keep=${NVTX_KEEP:-0}
cleanup() { if [ "$keep" = 1 ]; then echo "nvtx: logs kept in $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT
mkdir -p "$work/logs"

if [ "$data" = synthetic ]; then
  data=$work/data
  python3 - "$data" <<'PY'
import os, random, struct, sys
out = sys.argv[1]
os.makedirs(out)
rng = random.Random(1)
for split, n in (("train", 600), ("t10k", 100)):
    with open(os.path.join(out, f"{split}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(rng.randrange(256) for _ in range(n * 784)))
    with open(os.path.join(out, f"{split}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(rng.randrange(10) for _ in range(n)))
PY
fi

if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

step_kind=${NVTX_STEP:-separate}
case $step_kind in separate) fused=off ;; fused) fused=on ;; *) echo "NVTX_STEP must be separate or fused" >&2; exit 2 ;; esac
echo "== NVTX ranges: $train at $np MPI rank(s), the $step_kind step (--fused $fused --no-graph), recorder $recorder_abs =="
start=$(date +%s)
set +e
# Ranks launched on this host inherit mpirun's environment (Open MPI and MPICH alike).
NVTX_INJECTION64_PATH=$recorder_abs NVTX_RECORD_DIR=$work/logs \
  timeout 600 "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" \
  --data "$data" --train-size 600 --test-size 100 --epochs 1 --hidden 16 --batch 100 --fused "$fused" --no-graph \
  >"$work/train.out" 2>&1
rc=$?
set -e
echo "   training run: exit $rc, $(($(date +%s) - start)) s"

set +e
python3 - "$work/logs" "$np" "$rc" "$work/train.out" "$step_kind" <<'PY'
import glob
import os
import re
import sys

log_dir, np_ranks, train_rc, train_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fused = sys.argv[5] == "fused"
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what)
    return ok


# Where each course range may be opened: the set of allowed *immediate* parents
# (None = outermost). From src/train/trainer.cpp and src/model/device_model.cpp:
#   train_on: "train setup" (setup()), then "train (gpu)" around the epochs;
#   each batch: "batch iteration" { forward_backward: "forward", "backward";
#     at >1 rank "cudaMemcpyDeviceToHost", "MPI_Allreduce", "cudaMemcpyHostToDevice";
#     "step" }; rank 0 also runs "evaluate" (validation inside the training range, the
#   test set after it), which calls "forward" again.
# The per-launcher ranges of kernels/*.cu sit inside the course range that calls them.
PARENTS = {
    "train setup": {None},
    "train (gpu)": {None},
    "batch iteration": {"train (gpu)"},
    "forward": {"batch iteration", "evaluate"},
    "forward GEMM 1": {"forward"},
    "forward GEMM 2": {"forward"},
    "backward": {"batch iteration"},
    "backward GEMM 1": {"backward"},
    "backward GEMM 2": {"backward"},
    "backward GEMM 3": {"backward"},
    "cudaMemcpyDeviceToHost": {"batch iteration"},
    "MPI_Allreduce": {"batch iteration"},
    "cudaMemcpyHostToDevice": {"batch iteration"},
    "step": {"batch iteration"},
    "evaluate": {None, "train (gpu)"},
    "gather_labels": {"batch iteration"},
    "gather_normalize": {"forward"},
    "softmax_xent": {"batch iteration"},
    "row_sums": {"backward"},
    "sigmoid_backward": {"backward"},
    # an empty batch slice zeroes the gradient and adds reg * W inside "backward"
    "sgd_update": {"step", "backward"},
    "count_correct": {"evaluate"},
    # the fused step (src/model/device_model_step.cpp)
    "layer 2, fused": {"backward"},
    "layer2_fused": {"layer 2, fused"},
    "layer2_finish": {"layer 2, fused"},
}
GEMM_RANGES = ["forward GEMM 1", "forward GEMM 2", "backward GEMM 1", "backward GEMM 2", "backward GEMM 3"]
ROUND_TRIP = ["cudaMemcpyDeviceToHost", "MPI_Allreduce", "cudaMemcpyHostToDevice"]
EXPECTED = (["train setup", "train (gpu)", "batch iteration", "forward", "backward"] + GEMM_RANGES
            + (ROUND_TRIP if np_ranks > 1 else []) + ["step", "gather_labels", "gather_normalize",
            "softmax_xent", "row_sums", "sigmoid_backward", "sgd_update"])
EXPECTED_RANK0 = ["evaluate", "count_correct"]  # rank 0 evaluates validation and test sets
if fused:
    # Five kernels a step (the batch's normalised copy, then the forward
    # GEMM): the layer-2 GEMM runs in the evaluations only (rank 0), the separate kernels never.
    EXPECTED = (["train setup", "train (gpu)", "batch iteration", "forward", "backward", "forward GEMM 1",
                 "gather_normalize", "layer 2, fused", "layer2_fused", "layer2_finish", "backward GEMM 3"]
                + (ROUND_TRIP + ["step", "sgd_update"] if np_ranks > 1 else []))
    EXPECTED_RANK0 = EXPECTED_RANK0 + ["forward GEMM 2"]
# The course ranges directly inside one "batch iteration", in order ("forward" is absent
# only for an empty slice).
ITERATION = ["forward", "backward"] + (ROUND_TRIP if np_ranks > 1 else []) + ["step"]
if fused and np_ranks == 1:
    ITERATION = ["forward", "backward"]  # a lone rank's update is inside the backward kernels
COURSE = set(ITERATION) | set(ROUND_TRIP)
# The separate kernels' ranges, never opened by the fused step (nor by the evaluations).
ABSENT_FUSED = ["gather_labels", "softmax_xent", "row_sums", "sigmoid_backward", "backward GEMM 1", "backward GEMM 2"]
EXACTLY_ONCE = ["train setup", "train (gpu)"]

if not check(train_rc == 0, f"training run at {np_ranks} rank(s) exits 0 (exit {train_rc})"):
    with open(train_out, errors="replace") as f:
        sys.stdout.write("".join(f.readlines()[-30:]))

logs = {}
for path in sorted(glob.glob(os.path.join(log_dir, "nvtx.rank*.log"))):
    m = re.match(r"nvtx\.rank(\d+|none)\.pid\d+\.log$", os.path.basename(path))
    if m:
        logs.setdefault(m.group(1), []).append(path)
ranks = [str(r) for r in range(np_ranks)]
one_each = sorted(logs) == sorted(ranks) and all(len(v) == 1 for v in logs.values())
check(one_each, f"one recorder log per rank {ranks}" + ("" if one_each else
      f" (found {dict((k, len(v)) for k, v in sorted(logs.items()))}; none at all means the recorder"
      " was not injected: NVTX_INJECTION64_PATH ignored, or the trainer built without NN_HAVE_NVTX)"))

iterations = {}
for rank in ranks:
    tag = f"rank {rank}:"
    if rank not in logs:
        check(False, f"{tag} recorder log present")
        continue
    with open(logs[rank][0]) as f:
        lines = f.read().splitlines()
    summary = [l for l in lines if l.startswith("summary\t")]
    check(len(summary) == 1 and lines[-1] == summary[0] and "\tbalanced=yes" in summary[0]
          and "\tdropped=0\t" in summary[0],
          f"{tag} recorder summary says balanced, nothing dropped ({summary[0].split(chr(9), 1)[1].replace(chr(9), ' ') if summary else 'no summary'})")

    # Replay the push/pop events per thread: depths, balance, parents, children.
    stacks = {}
    bad_depth = []          # (line, text) where the recorded depth disagrees with the replay
    underflow = []
    seen = {}               # name -> count
    bad_parent = {}         # name -> set of parents seen that are not allowed
    children = []           # per closed "batch iteration": its course children in order
    gemm_missing = 0        # GEMM course ranges with no gemm_* launcher range inside
    gemm_stray = set()      # gemm_* ranges outside a GEMM course range
    open_children = {}      # (thread, depth) -> list of child names of the open range there
    for n, line in enumerate(lines, 1):
        f = line.split("\t")
        if f[0] not in ("push", "pop"):
            continue
        thread, depth = f[1], int(f[2])
        name = f[3] if len(f) > 3 else ""
        st = stacks.setdefault(thread, [])
        if f[0] == "push":
            if depth != len(st):
                bad_depth.append((n, line))
            parent = st[-1] if st else None
            seen[name] = seen.get(name, 0) + 1
            if name in PARENTS and parent not in PARENTS[name]:
                bad_parent.setdefault(name, set()).add(parent)
            if name.startswith("gemm_") and parent not in GEMM_RANGES and not (parent or "").startswith("gemm_"):
                gemm_stray.add(parent)
            if st:
                open_children.setdefault((thread, len(st) - 1), []).append(name)
            st.append(name)
            open_children[(thread, len(st) - 1)] = []
        else:
            if not st:
                underflow.append(n)
                continue
            if depth != len(st) - 1 or name != st[-1]:
                bad_depth.append((n, line))
            closed = st.pop()
            kids = open_children.pop((thread, len(st)), [])
            if closed == "batch iteration":
                children.append([k for k in kids if k in COURSE])
            if closed in GEMM_RANGES and not any(k.startswith("gemm_") for k in kids):
                gemm_missing += 1

    unclosed = {t: s for t, s in stacks.items() if s}
    check(not underflow, f"{tag} no pop without an open range" + (f" (log lines {underflow[:5]})" if underflow else ""))
    check(not unclosed, f"{tag} every push popped, depth back to 0 on every thread"
          + (f" (still open: {unclosed})" if unclosed else ""))
    check(not bad_depth, f"{tag} recorded depths match the push/pop replay"
          + (f" (first: line {bad_depth[0][0]}: {bad_depth[0][1]!r})" if bad_depth else ""))

    expected = EXPECTED + (EXPECTED_RANK0 if rank == "0" else [])
    missing = [e for e in expected if e not in seen]
    check(not missing, f"{tag} all {len(expected)} expected range names present" + (f" (missing: {missing})" if missing else ""))
    if fused:
        present = [n for n in ABSENT_FUSED if n in seen]
        check(not present, f"{tag} none of the separate kernels' ranges under the fused step"
              + (f" (found: {present})" if present else ""))
    for name in EXACTLY_ONCE:
        check(seen.get(name, 0) == 1, f"{tag} '{name}' opened exactly once ({seen.get(name, 0)})")

    for name in PARENTS:
        if name not in seen:
            continue
        allowed = " or ".join("top level" if p is None else repr(p) for p in sorted(PARENTS[name], key=str))
        got = bad_parent.get(name)
        check(not got, f"{tag} '{name}' always directly inside {allowed}"
              + (f" (also inside: {sorted(('top level' if p is None else p) for p in got)})" if got else ""))
    check(any(k.startswith("gemm_") for k in seen) and gemm_missing == 0 and not gemm_stray,
          f"{tag} every GEMM range holds a gemm_* launcher range; gemm_* sits only in GEMM (or gemm_*) ranges"
          + (f" ({gemm_missing} GEMM ranges without one; gemm_* also inside {sorted(map(str, gemm_stray))})"
             if gemm_missing or gemm_stray else ""))

    iterations[rank] = len(children)
    wrong = [c for c in children if c != ITERATION and c != ITERATION[1:]]
    check(children and not wrong,
          f"{tag} each of {len(children)} 'batch iteration' ranges holds {' > '.join(ITERATION)}, in order, once each"
          + (f" (first wrong: {wrong[0]})" if wrong else ""))

if len(iterations) == np_ranks:
    check(len(set(iterations.values())) == 1,
          f"all ranks ran the same number of batch iterations ({iterations})")

print(f"nvtx: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
status=$?
set -e
if [ "$status" -gt 1 ]; then
  echo "FAIL the log checker itself failed (exit $status)"
  echo "nvtx: 0 passed, 1 failed"
fi
if [ "$status" != 0 ]; then
  keep=1  # leave the logs for a look
  exit 1
fi
