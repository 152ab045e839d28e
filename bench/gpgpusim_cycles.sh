#!/usr/bin/env bash
# make bench-gpgpusim: modeled cycles of the GEMM variants (every available one but cuBLAS, from
# the registry through `gemm_cycles --list`) at the trainer's GEMM shapes, on
# GPGPU-Sim's cycle models of a Quadro GV100 (SM7_QV100) and an RTX 3070 (SM86_RTX3070).
# A GPGPU-Sim cycle model, not a GPU measurement. The models run about 150-200 thousand thread
# instructions per second per core: the layer-1 GEMMs at H=256, b=50 take about two minutes
# each, at b=3000 well over an hour, so the default grid is H=256, b=50 (GRID=full: H=256,512 x
# b=50,100,1500,3000).
#   bench/gpgpusim_cycles.sh GEMM_CYCLES_BIN OUT_DIR
#   environment: GRID=quick|full, MODELS="qv100 rtx3070", VARIANTS (default: every available
#   variant but cublas, which GPGPU-Sim cannot run: "1 2 3 4" today), SHAPES (names or
#   prefixes of the five GEMMs, e.g. "fwd2 bwd_dW2 bwd_dA1"), JOBS (parallel simulations),
#   APPEND=1 (add to the CSV instead of starting it anew), STEP=0 (no training step)
# Writes OUT_DIR/gemm_cycles.csv and OUT_DIR/gemm_cycles.md (and gemm_cycles.png with matplotlib);
# the table holds every row of the CSV, so runs with APPEND=1 build it up piece by piece.
set -euo pipefail
bin=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../tests/gpgpusim/run.sh
GRID=${GRID:-quick}
MODELS=${MODELS:-qv100 rtx3070}
if [ -z "${VARIANTS:-}" ]; then
  # The registry's variants, as the binary lists them (--list makes no CUDA call, so it runs natively).
  VARIANTS=$("$bin" --list | awk '$2 != "cublas" { printf "%s ", $1 }') ||
    { echo "error: $bin --list failed" >&2; exit 2; }
  [ -n "$VARIANTS" ] || { echo "error: $bin --list printed no variant" >&2; exit 2; }
fi
JOBS=${JOBS:-$(nproc)}
mkdir -p "$out"
case "$GRID" in
  quick) HS="256"; BS="50";;                   # B=100 at p=2
  full) HS="256 512"; BS="50 100 1500 3000";;  # B=100 and B=3000 at p=2 and p=1
  *) echo "error: GRID must be quick or full" >&2; exit 2;;
esac

# The five GEMMs of a training step (784-H-10, batch slice b): name M N K opA opB epilogue
shapes() {
  local H=$1 b=$2
  echo "fwd1_Z1=W1.X $H $b 784 N N biassigmoid"
  echo "fwd2_Z2=W2.A1 10 $b $H N N bias"
  echo "bwd_dW2=dZ2.A1t 10 $H $b N T none"
  echo "bwd_dA1=W2t.dZ2 $H $b 10 T N none"
  echo "bwd_dW1=dZ1.Xt $H 784 $b N T none"
}

jobs_file=$(mktemp)
trap 'rm -f "$jobs_file"' EXIT
for model in $MODELS; do for H in $HS; do for b in $BS; do
  shapes "$H" "$b" | while read -r name M N K oa ob ep; do
    if [ -n "${SHAPES:-}" ]; then
      keep=0; for p in $SHAPES; do case "$name" in "$p"*) keep=1;; esac; done
      [ $keep = 1 ] || continue
    fi
    for v in $VARIANTS; do echo "$model $H $b $name $v $M $N $K $oa $ob $ep"; done
  done
done; done; done > "$jobs_file"
echo "== bench-gpgpusim: $(wc -l < "$jobs_file") simulations ($GRID grid; $JOBS at a time): GPGPU-Sim cycle models, not GPU measurements =="

one() {
  local model=$1 H=$2 b=$3 name=$4 v=$5 M=$6 N=$7 K=$8 oa=$9 ob=${10} ep=${11} start=$SECONDS log
  log=$(mktemp)
  if "$run" --model "$model" "$bin" "$v" "$M" "$N" "$K" "$oa" "$ob" "$ep" > "$log" 2>&1; then
    cycles=$(sed -n 's/^gpgpusim: model .*: \([0-9][0-9]*\) simulated cycles.*/\1/p' "$log")
    echo "$model,$H,$b,$name,$v,$M,$N,$K,$oa$ob,$ep,$cycles,$((SECONDS - start))"
  else
    echo "FAILED $model H=$H b=$b $name variant $v:" >&2; tail -n 5 "$log" >&2
  fi
  rm -f "$log"
}
export -f one
export run bin
csv=$out/gemm_cycles.csv
[ "${APPEND:-0}" = 1 ] && [ -s "$csv" ] || echo "model,H,b,gemm,variant,M,N,K,ops,epilogue,cycles,wall_s" > "$csv"
xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ < "$jobs_file" | tee -a "$csv"
source "$here/../tests/gpgpusim/common.sh"
"${PLOTS_PYTHON:-/usr/bin/python3}" "$here/gpgpusim_table.py" "$csv" "$out" "$GPGPUSIM_HOME"

# One whole training step (H=256, B=100, one rank, --gemm 4) on the QV100 model, the separate
# kernels (--fused off) and the fused step: every kernel of the step with its modeled cycles.
# STEP=0 skips both (about 10 minutes each), STEP=fused or STEP=off runs one.
for fused in off on; do
  case "${STEP:-1}" in 1 | "$fused") ;; *) continue ;; esac
  [ -n "${NN_TRAIN:-}" ] || break
  echo "== one training step's kernels on the qv100 model (nn_train --hidden 256 --batch 100, 1 rank, --fused $fused) =="
  work=$(mktemp -d)
  GPGPUSIM_WORKDIR=$work NN_MPIRUN=env "$here/../slurm/mpirun.sh" "$run" --model qv100 "$NN_TRAIN" \
    --data "${DATA:-data/current}" --hidden 256 --batch 100 --train-size 100 --val-fraction 0 --test-size 10 \
    --epochs 1 --gemm 4 --fused "$fused" > "$work/train.txt" 2>&1 || { cat "$work/train.txt" >&2; exit 1; }
  "${PLOTS_PYTHON:-/usr/bin/python3}" "$here/gpgpusim_table.py" --step "$work/sim.log" "$out" "$GPGPUSIM_HOME" \
    "--gemm 4 --fused $fused"
  rm -rf "$work"
done
