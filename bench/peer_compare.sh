#!/usr/bin/env bash
# Peer comparison: our code against the same network and SGD loop in PyTorch
# (bench/peer_torch.py), same data, split, H, B, epochs, lr and reg, float32.
#   (a) GPU visible (nvidia-smi) and a CUDA build: nn_train (CUDA build, 1 MPI rank) against
#       peer_torch.py on CUDA (needs a PyTorch with CUDA: set PYTHON to its interpreter);
#       H=$HIDDEN B=$BATCH.
#   (b) always (unless MODE=gpu): on the CPU, for each shape H:B in SHAPES and each process
#       count p in PROCS, `nn_train --device cpu` at p MPI ranks against PyTorch in one process
#       (p = 1) or DistributedDataParallel over gloo at p processes, both with the same
#       threads per process, CORES / p (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS for both,
#       torch.set_num_threads the same; ours launched the documented way, slurm/mpirun.sh,
#       which gives each rank t cores of its own). nn_train also measures the BLAS-bound limit of its epoch in the same
#       run (its `blas bound:` line: the step's GEMMs alone, timed on every rank at once).
# Each side's time is the median seconds per epoch over epochs 2..E (epoch 1 is warm-up;
# with E = 1, epoch 1). Printed: speedup = PyTorch / ours (above 1: ours is faster), and
# ours / bound; rows also go to $OUT/peer_cpu.csv (bench/plots.py peer draws them).
#
# Usage: bench/peer_compare.sh            (make peer)
# Environment (defaults):
#   DATA=data/current SHAPES="256:100 512:800 1024:3000" PROCS="1 2" CORES=$(nproc) EPOCHS=4
#   LR=0.5 REG=1e-4 TRAIN_SIZE=0 (all)  HIDDEN=256 BATCH=100 (GPU part)  MODE=auto|cpu|gpu
#   PYTHON=/usr/bin/python3  CPU_DIR=build/cpu  CUDA_DIR=build/cuda  MPIRUN=slurm/mpirun.sh
#   OUT=build/peer (logs)  OMP_WAIT_POLICY=PASSIVE (see below)  ROUNDS=2  CPU_GEMM=openblas
#   (nn_train --cpu-gemm: openblas or onednn)
# ROUNDS: each CPU pair runs ROUNDS times, alternating ours / PyTorch, and each side keeps its
# fastest round's median, so a burst of load from another job hurts neither side alone.
# PyTorch: Debian's python3-torch; installed with apt-get when missing and run as root
# (.ci/setup.sh peer, which `make peer` runs first as setup-peer).
set -euo pipefail

cd "$(dirname "$0")/.."
DATA=${DATA:-data/current}
HIDDEN=${HIDDEN:-256}
BATCH=${BATCH:-100}
EPOCHS=${EPOCHS:-4}
SHAPES=${SHAPES:-256:100 512:800 1024:3000}
PROCS=${PROCS:-1 2}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
ROUNDS=${ROUNDS:-2}
LR=${LR:-0.5}
REG=${REG:-1e-4}
TRAIN_SIZE=${TRAIN_SIZE:-0}
MODE=${MODE:-auto}
CPU_GEMM=${CPU_GEMM:-openblas}  # nn_train --cpu-gemm: openblas | onednn
PYTHON=${PYTHON:-/usr/bin/python3}
CPU_DIR=${CPU_DIR:-build/cpu}
CUDA_DIR=${CUDA_DIR:-build/cuda}
MPIRUN=${MPIRUN:-$PWD/slurm/mpirun.sh}  # a private session directory per launch
OUT=${OUT:-build/peer}
# Debian's PyTorch runs its elementwise work on OpenMP threads and its GEMMs on OpenBLAS's own
# pthreads: with the default (spinning) OpenMP wait policy its idle OpenMP threads keep the
# cores that OpenBLAS needs (measured on 2 cores, H=512 B=800, 2 threads: 1.7 s/epoch,
# against 0.61 s with PASSIVE and 0.98 s at 1 thread). PASSIVE is the fair setting for both
# sides (our reference has no OpenMP); override with OMP_WAIT_POLICY=ACTIVE to see the other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

case $MODE in auto | cpu | gpu) ;; *) echo "error: MODE must be auto, cpu or gpu (got '$MODE')" >&2; exit 2 ;; esac
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# numpy and PyTorch for $PYTHON: the project's setup checks them (and, for the system python as
# root on Debian, installs python3-numpy python3-torch); for another python it names the module.
if ! "$PYTHON" -c 'import numpy, torch' 2>/dev/null; then
  PLOTS_PYTHON=$PYTHON bash .ci/setup.sh peer ||
    { echo "error: $PYTHON cannot import torch (.ci/setup.sh peer above; or PYTHON=/path/to/python)" >&2; exit 1; }
fi
mkdir -p "$OUT"

COMMON=(--data "$DATA" --hidden "$HIDDEN" --batch "$BATCH" --epochs "$EPOCHS" --lr "$LR" --reg "$REG"
        --train-size "$TRAIN_SIZE")
# The same for shape H, B (the CPU part).
common_for() { echo --data "$DATA" --hidden "$1" --batch "$2" --epochs "$EPOCHS" --lr "$LR" --reg "$REG" --train-size "$TRAIN_SIZE"; }

# Median of the epoch times in a log's `epoch_seconds:` line, epoch 1 dropped when E > 1.
median_from_log() {
  awk '/^epoch_seconds:/ { n = 0; for (i = 2; i <= NF; ++i) v[++n] = $i }
       END { if (n == 0) exit 1
             first = n > 1 ? 2 : 1; m = 0
             for (i = first; i <= n; ++i) w[++m] = v[i]
             for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
             printf "%.4f\n", (m % 2) ? w[(m + 1) / 2] : (w[m / 2] + w[m / 2 + 1]) / 2 }' "$1"
}
# The same from nn_train's --metrics CSV (column 5 = seconds).
median_from_metrics() {
  awk -F, 'NR > 1 { s = s " " $5 } END { print "epoch_seconds:" s }' "$1" > "$1.secs"
  median_from_log "$1.secs"
}
precision_from_log() { awk '/^test precision:/ { print $3 }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "n/a" }'; }
# nn_train's BLAS-bound epoch (seconds) from its `blas bound: ... -> epoch >= X s; ...` line.
min_of() { printf '%s\n' "$@" | awk 'NF { if (m == "" || $1 < m) m = $1 } END { print m }'; }
bound_from_log() { awk '/^blas bound:/ { for (i = 1; i <= NF; ++i) if ($i == ">=") { print $(i + 1); exit } }' "$1"; }

dataset=$(readlink -f "$DATA" || echo "$DATA")
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "== peer comparison: epochs=$EPOCHS lr=$LR reg=$REG train-size=$TRAIN_SIZE (0 = all), float32"
echo "== data: $DATA -> $dataset"
echo "== time = median s/epoch over epochs 2..$EPOCHS (batches only); speedup = PyTorch / ours (> 1: ours faster)"
# Another job on the machine skews every figure, multi-threaded ones most: measure the CPU
# time used by others over 2 s before starting.
ncpu=$(nproc 2>/dev/null || echo 1)
cpu_busy() {
  local a b
  a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  sleep 2
  b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); u = y[1] - x[1]; i = y[2] - x[2]
                                   printf "%d\n", (u + i > 0) ? 100 * u / (u + i) : 0 }'
}
busy_pct=$(cpu_busy 2>/dev/null || echo 0)
busy=no
if [ "$busy_pct" -gt 15 ]; then
  busy=yes
  echo "== WARNING: the CPUs were ${busy_pct}% busy before we started: other jobs are running;"
  echo "==          timings (above all with more than one thread) are not representative"
fi

summary=()
gpu_visible=no
if nvidia-smi -L >/dev/null 2>&1; then gpu_visible=yes; fi

if [ "$MODE" != cpu ]; then
  if [ "$gpu_visible" != yes ]; then
    echo "== (a) GPU: no GPU visible (nvidia-smi -L); skipped"
    if [ "$MODE" = gpu ]; then exit 1; fi
  elif [ ! -x "$CUDA_DIR/bin/nn_train" ]; then
    echo "== (a) GPU: $CUDA_DIR/bin/nn_train not built (make cuda); skipped"
    if [ "$MODE" = gpu ]; then exit 1; fi
  elif ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "== (a) GPU: $PYTHON's PyTorch has no CUDA (Debian's python3-torch is CPU-only); skipped"
    if [ "$MODE" = gpu ]; then exit 1; fi
  else
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
    echo "== (a) GPU: $gpu_name: nn_train (CUDA build, 1 rank) vs PyTorch CUDA"
    "$MPIRUN" --oversubscribe -np 1 "$CUDA_DIR/bin/nn_train" "${COMMON[@]}" \
      --metrics "$OUT/ours_gpu.csv" | tee "$OUT/ours_gpu.log"
    "$PYTHON" bench/peer_torch.py "${COMMON[@]}" --device cuda | tee "$OUT/torch_gpu.log"
    ours=$(median_from_metrics "$OUT/ours_gpu.csv")
    theirs=$(median_from_log "$OUT/torch_gpu.log")
    summary+=("$(printf '%-26s %10s %10s %8s %8s %9s   precision ours %s, torch %s' "GPU H=$HIDDEN B=$BATCH" "$ours" "$theirs" \
      "$(ratio "$theirs" "$ours")" - - "$(precision_from_log "$OUT/ours_gpu.log")" "$(precision_from_log "$OUT/torch_gpu.log")")")
  fi
fi

if [ "$MODE" != gpu ]; then
  if [ ! -x "$CPU_DIR/bin/nn_train" ]; then
    echo "error: $CPU_DIR/bin/nn_train not built (make $CPU_DIR/bin/nn_train)" >&2
    exit 1
  fi
  echo "shape,procs,threads_per_proc,ours_s,torch_s,speedup,bound_s,ours_over_bound,ours_precision,torch_precision" \
    >"$OUT/peer_cpu.csv"
  for shape in $SHAPES; do
    h=${shape%%:*} b=${shape##*:}
    read -r -a args <<<"$(common_for "$h" "$b")"
    for p in $PROCS; do
      t=$(( CORES / p )); [ "$t" -ge 1 ] || t=1
      tag="H${h}_B${b}_p${p}"
      echo "== (b) CPU ${cpu_model:-?}, H=$h B=$b: nn_train --device cpu at $p rank(s) vs PyTorch" \
           "$([ "$p" = 1 ] && echo "in one process" || echo "DDP (gloo) at $p processes"), $t thread(s) each"
      # --oversubscribe only where it is true: Open MPI then yields in its waits, which costs
      # a rank that has a core of its own.
      over=(); [ "$p" -le "$CORES" ] || over=(--oversubscribe)
      o=() th=() bd=()
      for round in $(seq "$ROUNDS"); do
        echo "-- round $round of $ROUNDS"
        OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$MPIRUN" "${over[@]}" -np "$p" \
          -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x OMP_WAIT_POLICY \
          "$CPU_DIR/bin/nn_train" --device cpu --cpu-gemm "$CPU_GEMM" "${args[@]}" --metrics "$OUT/ours_cpu_$tag.csv" | tee "$OUT/ours_cpu_$tag.log"
        OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$PYTHON" bench/peer_torch.py "${args[@]}" --device cpu \
          --threads "$t" --procs "$p" | tee "$OUT/torch_cpu_$tag.log"
        o+=("$(median_from_metrics "$OUT/ours_cpu_$tag.csv")")
        th+=("$(median_from_log "$OUT/torch_cpu_$tag.log")")
        bd+=("$(bound_from_log "$OUT/ours_cpu_$tag.log")")
      done
      ours=$(min_of "${o[@]}") theirs=$(min_of "${th[@]}") bound=$(min_of "${bd[@]}")
      po=$(precision_from_log "$OUT/ours_cpu_$tag.log") pt=$(precision_from_log "$OUT/torch_cpu_$tag.log")
      echo "H=$h B=$b,$p,$t,$ours,$theirs,$(ratio "$theirs" "$ours"),$bound,$(ratio "$ours" "$bound"),$po,$pt" >>"$OUT/peer_cpu.csv"
      summary+=("$(printf '%-26s %10s %10s %8s %8s %9s   precision ours %s, torch %s' "CPU H=$h B=$b p=$p t=$t" \
        "$ours" "$theirs" "$(ratio "$theirs" "$ours")" "$bound" "$(ratio "$ours" "$bound")" "$po" "$pt")")
    done
  done
fi

echo
echo "== summary: epochs=$EPOCHS, data $dataset, ${CORES} core(s) (logs in $OUT/, table in $OUT/peer_cpu.csv)"
echo "== CPU use by others before the run: ${busy_pct}% of $ncpu core(s)$([ "$busy" = yes ] && echo ' (BUSY: not representative)')"
echo "== OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
echo "== p = processes (MPI ranks / DDP processes), t = threads per process; bound = BLAS-bound epoch (s)"
printf '%-26s %10s %10s %8s %8s %9s\n' "where" "ours s/ep" "torch s/ep" "speedup" "bound" "ours/bnd"
for line in "${summary[@]}"; do echo "$line"; done
