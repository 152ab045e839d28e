#!/usr/bin/env bash
# Parameter sweep: one nn_train run per (H, B, p) with --report, one JSON per point, for
# bench/plots.py (roofline.png, phases.png).
#
#   bench/sweep.sh                       # the course's grid: H 256 512 1024 2048 x B 800 3000 12000
#   GRID=quick bench/sweep.sh            # emulator-sized: H 32 64 128 x B 100 400, 2000 images (< 1 min)
#   NP="1 2 4" EPOCHS=2 bench/sweep.sh   # several rank counts
#
# Environment (defaults):
#   GRID=course|quick     the grid above
#   NN_BIN                nn_train to run: build/cuda/bin/nn_train when a GPU is visible and it
#                         exists, else build/cpu/bin/nn_train (the emulator build)
#   NP=1                  MPI rank counts, a list ("1 2 4")
#   EPOCHS=1              epochs per point
#   TRAIN_SIZE            first N training images (course: all; quick: 2000)
#   TEST_SIZE             first N test images (course: all; quick: 1000)
#   VAL_FRACTION=0.1      held-out tail, as nn_train's --val-fraction
#   PROFILE=1             pass --profile (per-phase times for phases.png); 0 leaves it off
#   DATA=data/current     IDX directory
#   OUT=build/sweep/$GRID output directory: H<H>_B<B>_p<p>.json and .log per point
#   NN_ARGS               extra nn_train options, split on spaces (e.g. "--gemm 3")
#   MPIRUN=mpirun MPIRUN_FLAGS=--oversubscribe   SIM_WORKERS=0 (emulator: one worker per core)
# Points with B larger than the fitted training images n are skipped (nn_train would refuse
# them). The exit status is 1 if any point failed; the other points still run.
set -euo pipefail

cd "$(dirname "$0")/.."
GRID=${GRID:-course}
case $GRID in
  course) HS=(256 512 1024 2048); BS=(800 3000 12000); : "${TRAIN_SIZE:=0}" "${TEST_SIZE:=0}" ;;
  quick) HS=(32 64 128); BS=(100 400); : "${TRAIN_SIZE:=2000}" "${TEST_SIZE:=1000}" ;;
  *) echo "error: GRID must be course or quick (got '$GRID')" >&2; exit 2 ;;
esac
NP=${NP:-1}
EPOCHS=${EPOCHS:-1}
VAL_FRACTION=${VAL_FRACTION:-0.1}
PROFILE=${PROFILE:-1}
DATA=${DATA:-data/current}
OUT=${OUT:-build/sweep/$GRID}
MPIRUN=${MPIRUN:-$PWD/slurm/mpirun.sh}  # a private session directory per launch
MPIRUN_FLAGS=${MPIRUN_FLAGS:---oversubscribe}
export SIM_WORKERS=${SIM_WORKERS:-0}
if [ -z "${NN_BIN:-}" ]; then
  if nvidia-smi -L >/dev/null 2>&1 && [ -x build/cuda/bin/nn_train ]; then
    NN_BIN=build/cuda/bin/nn_train
  else
    NN_BIN=build/cpu/bin/nn_train
  fi
fi
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

if [ ! -x "$NN_BIN" ]; then
  echo "error: $NN_BIN not found (make cpu, or set NN_BIN)" >&2
  exit 1
fi
if ! grep -q -- '--report' <<<"$("$NN_BIN" --help 2>/dev/null)"; then
  echo "error: $NN_BIN has no --report option (rebuild: make cpu / make cuda)" >&2
  exit 1
fi

# Training images available: the count in the labels file's IDX header (raw or gzip).
labels=$DATA/train-labels-idx1-ubyte
[ -e "$labels" ] || labels=$labels.gz
if [ ! -e "$labels" ]; then
  echo "error: no train-labels-idx1-ubyte[.gz] in $DATA (make data)" >&2
  exit 1
fi
read -r -a hdr <<< "$( (gzip -dcf "$labels" 2>/dev/null || true) | head -c 8 | od -An -tu1)"
if [ "${#hdr[@]}" -ne 8 ]; then
  echo "error: $labels: cannot read the IDX header" >&2
  exit 1
fi
avail=$(( (hdr[4] << 24) | (hdr[5] << 16) | (hdr[6] << 8) | hdr[7] ))
n_used=$avail
if [ "$TRAIN_SIZE" -gt 0 ]; then n_used=$TRAIN_SIZE; fi
# nn_train holds out floor(n_used * val_fraction) images (a double product, truncated).
n_fit=$(awk -v n="$n_used" -v f="$VAL_FRACTION" 'BEGIN { printf "%d\n", n - int(n * f) }')

mpiflags=()
read -r -a mpiflags <<< "$MPIRUN_FLAGS"
extra=()
if [ -n "${NN_ARGS:-}" ]; then read -r -a extra <<< "$NN_ARGS"; fi
if [ "$PROFILE" = 1 ]; then extra+=(--profile); fi

mkdir -p "$OUT"
echo "== sweep: GRID=$GRID H=(${HS[*]}) B=(${BS[*]}) p=($NP) epochs=$EPOCHS, $n_fit training images, $NN_BIN -> $OUT/"
failed=0 ran=0 skipped=0
for p in $NP; do
  for H in "${HS[@]}"; do
    for B in "${BS[@]}"; do
      tag=H${H}_B${B}_p${p}
      if [ "$B" -gt "$n_fit" ]; then
        echo "  $tag: skipped (B = $B > n = $n_fit training images)"
        skipped=$((skipped + 1))
        continue
      fi
      rm -f "$OUT/$tag.json"
      t0=$SECONDS
      if "$MPIRUN" "${mpiflags[@]}" -np "$p" "$NN_BIN" --data "$DATA" --hidden "$H" --batch "$B" \
          --epochs "$EPOCHS" --train-size "$TRAIN_SIZE" --test-size "$TEST_SIZE" \
          --val-fraction "$VAL_FRACTION" --report "$OUT/$tag.json" "${extra[@]}" > "$OUT/$tag.log" 2>&1 \
          && [ -s "$OUT/$tag.json" ]; then
        last=$(grep -E '^epoch ' "$OUT/$tag.log" | tail -n 1 | sed -E 's/^epoch +[0-9]+ +//')
        echo "  $tag: ok ($((SECONDS - t0)) s)  last epoch: $last"
        ran=$((ran + 1))
      else
        echo "  $tag: FAILED, see $OUT/$tag.log:" >&2
        { grep -m 1 -E '^(error|internal error)' "$OUT/$tag.log" || tail -n 3 "$OUT/$tag.log"; } | sed 's/^/    /' >&2
        failed=$((failed + 1))
      fi
    done
  done
done
echo "== sweep done: $ran ok, $failed failed, $skipped skipped; JSON in $OUT/"
[ "$failed" -eq 0 ]
