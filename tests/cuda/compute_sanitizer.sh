#!/usr/bin/env bash
# compute-sanitizer on the CUDA build's kernel and training tests (`make sanitize-gpu`; GPU only).
#   bash tests/cuda/compute_sanitizer.sh [NN_TESTS]      (default build/cuda/bin/nn_tests)
# Runs each tool in CS_TOOLS under mpirun at each rank count in CS_NP and passes only if the
# test binary exits 0 and every rank's sanitizer prints "ERROR SUMMARY: 0 errors".
#   memcheck   out-of-bounds / misaligned device accesses, leaks of device memory at exit
#   racecheck  shared-memory data hazards inside a block (the tiled GEMMs, the reductions)
#   synccheck  invalid __syncthreads / warp-synchronous use
# None of the three sees races between streams; the overlap path's ordering is checked on the
# GPU by the tests themselves (overlap and no-overlap must give bitwise identical weights).
# Env: COMPUTE_SANITIZER (path), CS_TOOLS ("memcheck racecheck synccheck"), CS_NP ("1 2"),
#      CS_FILTER (gtest filter), CS_TIMEOUT (seconds per run, 900), OUT (build/compute-sanitizer),
#      MPIRUN, MPIRUN_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/../.."

TESTS=${1:-build/cuda/bin/nn_tests}
TOOLS=${CS_TOOLS:-memcheck racecheck synccheck}
NPS=${CS_NP:-1 2}
# Every test that launches a kernel of ours: GEMM variants, ops, the device model, training and
# the three strategies (fault tests included: the non-finite-loss path runs kernels too).
FILTER=${CS_FILTER:-'AllVariants/*:Gemm*:Ops*:Train*:Strategies*:Faults*'}
LIMIT=${CS_TIMEOUT:-900}
OUT=${OUT:-build/compute-sanitizer}
MPIRUN=${MPIRUN:-$PWD/slurm/mpirun.sh}  # a private session directory per launch
read -r -a MPIRUN_FLAGS <<<"${MPIRUN_FLAGS:---oversubscribe}"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

die() { echo "compute_sanitizer: error: $*" >&2; exit 1; }
CS=${COMPUTE_SANITIZER:-}
if [ -z "$CS" ]; then
  CS=$(command -v compute-sanitizer || true)
  for d in "${CUDA_HOME:-}" /usr/local/cuda; do
    [ -n "$CS" ] || [ -z "$d" ] || [ ! -x "$d/compute-sanitizer/compute-sanitizer" ] || CS=$d/compute-sanitizer/compute-sanitizer
    [ -n "$CS" ] || [ -z "$d" ] || [ ! -x "$d/bin/compute-sanitizer" ] || CS=$d/bin/compute-sanitizer
  done
fi
{ [ -n "$CS" ] && [ -x "$CS" ]; } || die "compute-sanitizer not found (set COMPUTE_SANITIZER=/path; it ships with the CUDA toolkit)"
[ -x "$TESTS" ] || die "$TESTS: not built (make cuda)"
nvidia-smi -L >/dev/null 2>&1 || die "no GPU visible (nvidia-smi -L failed): compute-sanitizer needs one"

mkdir -p "$OUT"
failed=0
summary=()
for tool in $TOOLS; do
  for np in $NPS; do
    log=$OUT/$tool-np$np.log
    echo "== compute-sanitizer --tool $tool, $np rank(s), filter $FILTER -> $log =="
    start=$SECONDS
    rc=0
    timeout "$LIMIT" "$MPIRUN" "${MPIRUN_FLAGS[@]}" -np "$np" \
      "$CS" --tool "$tool" --error-exitcode 99 --print-limit 50 \
      "$TESTS" --gtest_filter="$FILTER" >"$log" 2>&1 || rc=$?
    # racecheck prints no ERROR SUMMARY, only "RACECHECK SUMMARY: 0 hazards displayed (0 errors,
    # 0 warnings)" (compute-sanitizer of CUDA 13.0 on an H200).
    clean=$(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors' "$log" || true)
    errors=$(grep -E '(ERROR SUMMARY: [1-9][0-9]* error|RACECHECK SUMMARY: [1-9])' "$log" | head -1 || true)
    tests=$(grep -E '^tests: ' "$log" | tail -1 || true)
    line="$tool np=$np: rc=$rc, $clean/$np ranks with 0 errors, ${tests:-no test summary}, $((SECONDS - start)) s"
    if [ "$rc" -ne 0 ] || [ "$clean" -ne "$np" ]; then
      failed=1
      line="FAIL $line${errors:+; $errors}"
      grep -E '^=========' "$log" | head -20 >&2 || true
    fi
    echo "$line"
    summary+=("$line")
  done
done
echo "== compute-sanitizer summary ($("$CS" --version 2>/dev/null | tail -1)) =="
printf '  %s\n' "${summary[@]}"
exit $failed
