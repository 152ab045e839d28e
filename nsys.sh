#!/usr/bin/env bash
# Profiles the trainer with Nsight Systems, one report per MPI rank, and exports the
# NVTX and kernel summaries as CSV. Submit with sbatch or run directly:
#   sbatch nsys.sh [trainer arguments...]      NP (ranks, default SLURM_NTASKS or 2),
#   NN_BIN, NN_DATA, OUT (report directory, default profiles/) are overridable.
#SBATCH --job-name=nn-nsys
#SBATCH --ntasks=2
#SBATCH --gpus-per-task=1
#SBATCH --time=00:20:00
#SBATCH --output=nn-nsys-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
if ! command -v nsys >/dev/null 2>&1; then
  echo "nsys.sh: error: nsys (Nsight Systems) not found on PATH; load it (e.g. 'module load cuda' or 'module load nsight-systems')" >&2
  exit 1
fi
NP=${NP:-${SLURM_NTASKS:-2}}
NN_BIN=${NN_BIN:-build/cuda/bin/nn_train}
NN_DATA=${NN_DATA:-data/current}
OUT=${OUT:-profiles}
mkdir -p "$OUT"
# slurm/mpirun.sh: mpirun with a session directory of its own (concurrent jobs never collide).
MPIRUN=${MPIRUN:-slurm/mpirun.sh}
[ -x "$MPIRUN" ] || command -v "$MPIRUN" >/dev/null 2>&1 || MPIRUN=mpirun
# %q{OMPI_COMM_WORLD_RANK} gives one report per rank under Open MPI.
"$MPIRUN" -np "$NP" nsys profile --trace=cuda,nvtx,mpi,osrt --force-overwrite=true \
  --output="$OUT/nn_rank%q{OMPI_COMM_WORLD_RANK}" "$NN_BIN" --data "$NN_DATA" "$@"
for rep in "$OUT"/nn_rank*.nsys-rep; do
  nsys stats --report nvtx_sum,cuda_gpu_kern_sum --format csv --force-export=true \
    --output "${rep%.nsys-rep}" "$rep"
done
echo "nsys.sh: reports and CSV summaries in $OUT/"
