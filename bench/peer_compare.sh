#!/usr/bin/env bash
# Peer comparison: our code against the same network and SGD loop in PyTorch
# (bench/peer_torch.py), same data, split, H, B, epochs, lr and reg, float32.
#   (a) GPU visible (nvidia-smi) and a CUDA build: nn_train (CUDA build, 1 MPI rank) against
#       peer_torch.py on CUDA (needs a PyTorch with CUDA: set PYTHON to its interpreter).
#   (b) always (unless MODE=gpu): our Armadillo CPU reference (ref_bench) against PyTorch on
#       the CPU at the SAME thread count, for each count in THREADS: OMP_NUM_THREADS and
#       OPENBLAS_NUM_THREADS set for both programs, torch.set_num_threads the same.
# Each side's time is the median seconds per epoch over epochs 2..E (epoch 1 is warm-up;
# with E = 1, epoch 1); the printed ratio is ours / PyTorch (below 1: ours is faster).
#
# Usage: bench/peer_compare.sh            (make peer)
# Environment (defaults):
#   DATA=data/current HIDDEN=512 BATCH=800 EPOCHS=5 LR=0.5 REG=1e-4 TRAIN_SIZE=0 (all)
#   THREADS="1 2"  MODE=auto|cpu|gpu  PYTHON=/usr/bin/python3  CPU_DIR=build/cpu
#   CUDA_DIR=build/cuda  MPIRUN=mpirun  OUT=build/peer (logs)  OMP_WAIT_POLICY=PASSIVE (see below)
set -euo pipefail

cd "$(dirname "$0")/.."
DATA=${DATA:-data/current}
HIDDEN=${HIDDEN:-512}
BATCH=${BATCH:-800}
EPOCHS=${EPOCHS:-5}
LR=${LR:-0.5}
REG=${REG:-1e-4}
TRAIN_SIZE=${TRAIN_SIZE:-0}
THREADS=${THREADS:-1 2}
MODE=${MODE:-auto}
PYTHON=${PYTHON:-/usr/bin/python3}
CPU_DIR=${CPU_DIR:-build/cpu}
CUDA_DIR=${CUDA_DIR:-build/cuda}
MPIRUN=${MPIRUN:-mpirun}
OUT=${OUT:-build/peer}
# Debian's PyTorch runs its elementwise work on OpenMP threads and its GEMMs on OpenBLAS's own
# pthreads: with the default (spinning) OpenMP wait policy its idle OpenMP threads keep the
# cores that OpenBLAS needs (measured on 2 cores, H=512 B=800, 2 threads: 1.7 s/epoch,
# against 0.61 s with PASSIVE and 0.98 s at 1 thread). PASSIVE is the fair setting for both
# sides (our reference has no OpenMP); override with OMP_WAIT_POLICY=ACTIVE to see the other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

case $MODE in auto | cpu | gpu) ;; *) echo "error: MODE must be auto, cpu or gpu (got '$MODE')" >&2; exit 2 ;; esac
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "error: $PYTHON cannot import torch (Debian: apt-get install python3-torch; or PYTHON=/path/to/python)" >&2
  exit 1
fi
mkdir -p "$OUT"

COMMON=(--data "$DATA" --hidden "$HIDDEN" --batch "$BATCH" --epochs "$EPOCHS" --lr "$LR" --reg "$REG"
        --train-size "$TRAIN_SIZE")

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

dataset=$(readlink -f "$DATA" || echo "$DATA")
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "== peer comparison: H=$HIDDEN B=$BATCH epochs=$EPOCHS lr=$LR reg=$REG train-size=$TRAIN_SIZE (0 = all), float32"
echo "== data: $DATA -> $dataset"
echo "== time = median s/epoch over epochs 2..$EPOCHS (batches only); ratio = ours / PyTorch"
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
    summary+=("$(printf '%-34s %10s %10s %8s   precision ours %s, torch %s' "GPU $gpu_name" "$ours" "$theirs" \
      "$(ratio "$ours" "$theirs")" "$(precision_from_log "$OUT/ours_gpu.log")" "$(precision_from_log "$OUT/torch_gpu.log")")")
  fi
fi

if [ "$MODE" != gpu ]; then
  if [ ! -x "$CPU_DIR/bin/ref_bench" ]; then
    echo "error: $CPU_DIR/bin/ref_bench not built (make $CPU_DIR/bin/ref_bench)" >&2
    exit 1
  fi
  for t in $THREADS; do
    echo "== (b) CPU ${cpu_model:-?}, $t thread(s): Armadillo reference (ref_bench) vs PyTorch CPU"
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$CPU_DIR/bin/ref_bench" "${COMMON[@]}" | tee "$OUT/ours_cpu_t$t.log"
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$PYTHON" bench/peer_torch.py "${COMMON[@]}" --device cpu \
      --threads "$t" | tee "$OUT/torch_cpu_t$t.log"
    ours=$(median_from_log "$OUT/ours_cpu_t$t.log")
    theirs=$(median_from_log "$OUT/torch_cpu_t$t.log")
    summary+=("$(printf '%-34s %10s %10s %8s   precision ours %s, torch %s' "CPU, $t thread(s)" "$ours" "$theirs" \
      "$(ratio "$ours" "$theirs")" "$(precision_from_log "$OUT/ours_cpu_t$t.log")" "$(precision_from_log "$OUT/torch_cpu_t$t.log")")")
  done
fi

echo
echo "== summary: H=$HIDDEN B=$BATCH epochs=$EPOCHS, data $dataset (logs in $OUT/)"
echo "== CPU use by others before the run: ${busy_pct}% of $ncpu core(s)$([ "$busy" = yes ] && echo ' (BUSY: not representative)')"
echo "== OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
printf '%-34s %10s %10s %8s\n' "where" "ours s/ep" "torch s/ep" "ratio"
for line in "${summary[@]}"; do echo "$line"; done
