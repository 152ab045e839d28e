#!/usr/bin/env bash
# Dry run of tests/cuda/gpu_session.sh's scalcal_* block without a GPU: the block's own lines,
# taken from the script, run here with each nn_train on the CPU (--device cpu appended, one
# epoch) and exchange_parts without its GPU part (--parts copies,reduce -> reduce); then
# bench/scaling_fit.py reads the logs as it will read the GPU's. Proves the commands start and
# the refit consumes their files, not any speed.
#   bash tests/cuda/scalcal_dryrun.sh BIN_DIR [OUT]      # BIN_DIR: nn_train and exchange_parts
set -uo pipefail
BIN=$(readlink -f "${1:?usage: scalcal_dryrun.sh BIN_DIR [OUT]}")
LOGS=$(mkdir -p "${2:-build/scalcal-dryrun}" && readlink -f "${2:-build/scalcal-dryrun}")
cd "$(dirname "$0")/../.." || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ONE=(env OMPI_MCA_ess_singleton_isolated=1)
KITENV=(env OMPI_MCA_rmaps_base_oversubscribe=1)
MPIRUN=$PWD/slurm/mpirun.sh
failed=0 ran=0
step() {  # NAME LIMIT CMD...: the block's command, made to run on the CPU
  local name=$1 limit=$2 a out=() nn=
  shift 2
  for a in "$@"; do
    case $a in
      copies,reduce) out+=(reduce) ;;
      */nn_train) nn=1; out+=("$a") ;;
      *) out+=("$a") ;;
    esac
  done
  if [ -n "$nn" ]; then
    for i in "${!out[@]}"; do [ "${out[i]}" = --epochs ] && out[i + 1]=1; done
    out+=(--device cpu)
  fi
  ran=$((ran + 1))
  if timeout -k 5 "$((limit * 6))" "${out[@]}" >"$LOGS/$name.log" 2>&1; then
    printf '  %-32s ok\n' "$name"
  else
    printf '  %-32s FAILED (%s)\n' "$name" "$LOGS/$name.log"
    failed=$((failed + 1))
  fi
}
block=$(sed -n '/^# 0s\. The scaling model/,/^# 0l\. /p' tests/cuda/gpu_session.sh | sed '$d')
[ -n "$block" ] || { echo "scalcal_dryrun: no scalcal block in tests/cuda/gpu_session.sh" >&2; exit 2; }
rm -f "$LOGS"/scalcal_*
eval "$block"
echo "scalcal_dryrun: $ran steps, $failed failed; logs in $LOGS"
/usr/bin/python3 bench/scaling_fit.py fit --gpu-session "$LOGS" --out "$LOGS/params.json" || failed=$((failed + 1))
[ "$failed" -eq 0 ]
