#!/usr/bin/env bash
# make test-gpgpusim: the CUDA build, as nvcc made it, executed on GPGPU-Sim (functional mode).
#   1. the simulator fixes, each by a standalone program with known answers (programs/*.cu);
#   2. the CUDA build's own kernel tests (tests/kernels: every GEMM variant but cuBLAS, and transpose,
#      the split-K plans, the gathered-B GEMM and its step epilogue, every ops.cu kernel, the fused
#      step's layer2.cu, at the CUDA build's grid sizes) less those that
#      cannot run here, listed in SKIPPED below with the reason; then a check, from the
#      simulator's logs, that every __global__ kernel of kernels/ ran (the cuBLAS epilogue aside);
#   3. nn_train of the CUDA build at 2 ranks, one simulated GPU each, --gemm 4 (the fused step) and
#      --gemm 2 (the separate kernels), overlap on, and at 1 rank with --gemm 4: --verify must pass and a test precision be printed; --gemm 0, --gemm 5, --graph
#      and --persistent on must be refused in one line.
# Usage: test.sh CUDA_BIN_DIR PROGRAM_BIN_DIR DATA_DIR   (run by the Makefile; MPIRUN, MPIRUN_FLAGS
# and the Open MPI root variables come from it). Ends with `gpgpusim: N passed, M failed`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 progs=$2 data=$3
run=$here/run.sh
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_FLAGS=${MPIRUN_FLAGS:-}
passed=0 failed=0
ok() { echo "PASS $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
out=$(mktemp -d "${TMPDIR:-/tmp}/test-gpgpusim.XXXXXX")
export GPGPUSIM_WORKDIR  # each run's simulator directory, under $out: kept with it on failure
# Every simulated process of this script reads the same binaries' PTX: ptxas's register reports
# of the first serve the others (run.sh, ptxas_cached.sh).
export GPGPUSIM_PTXAS_CACHE=${GPGPUSIM_PTXAS_CACHE:-$out/ptxas-cache}

# ---- 1. the simulator's fixes ----
for p in "$progs"/*; do
  name=$(basename "$p")
  start=$SECONDS
  GPGPUSIM_WORKDIR=$out/sim-$name
  if "$run" "$p" > "$out/$name.txt" 2>&1 && grep -q "^$name: PASS" "$out/$name.txt"; then
    ok "programs/$name.cu ($((SECONDS - start)) s)"
  else
    bad "programs/$name.cu:"; sed 's/^/    /' "$out/$name.txt" | tail -n 15
  fi
done

# refuse OPTION...: nn_train with each OPTION, side by side, must be refused in one line. Each is a
# simulated process of its own (GPGPU-Sim reads the binary's PTX and asks ptxas about it at start).
refuse() {
  local opts=("$@") pids=() i rc
  for i in "${!opts[@]}"; do
    # shellcheck disable=SC2086  # an option and its value
    GPGPUSIM_WORKDIR=$out/sim-refused$i NN_MPIRUN=env "$MPIRUN" "$run" "${train[@]}" ${opts[$i]} > "$out/refused$i.txt" 2>&1 &
    pids+=($!)
  done
  for i in "${!opts[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -cE "^error: (rank [0-9]+: )?${opts[$i]} .*does not run on GPGPU-Sim" "$out/refused$i.txt")" -eq 1 ]; then
      ok "nn_train ${opts[$i]} on GPGPU-Sim: refused in one line (exit $rc)"
    else
      bad "nn_train ${opts[$i]} on GPGPU-Sim was not refused in one line (exit $rc):"; tail -n 8 "$out/refused$i.txt" | sed 's/^/    /'
    fi
  done
}
train=("$bin/nn_train" --data "$data" --hidden 32 --batch 100 --train-size 400 --test-size 200
       --epochs 1 --verify)
# The first refusal alone: its start fills the ptxas cache with the library's kernels, which
# nn_tests shares, before the kernel tests start several processes at once.
# This one without the ptxas cache, as a program the docs show runs (run.sh alone): nn_train's
# start asks ptxas about every kernel, and the simulator must read each report whole.
GPGPUSIM_PTXAS_CACHE= refuse "--gemm 0"

# ---- 2. the kernel tests of the CUDA build ----
# Not run here, and why (everything else in these suites runs):
#   *cublas*: GPGPU-Sim cannot run cuBLAS (CUDA 13's libcublas holds SASS only, no PTX);
#   GemmApi.InvalidArgumentsThrow, GemmApi.EveryVariantWorksAfterReleaseAndDeviceReset: they
#     call variant 0 (cuBLAS) too;
#   GemmWarptile.GraphKeepsItsScratchWhenALaterGemmGrowsIt: captures a CUDA graph (not simulated);
#   GemmApi.WideProblemsRunInColumnChunks: N > 4 million columns, about 6.5 minutes
#     functional on 2 cores (measured); the chunking it checks is host code.
KERNEL_TESTS=${GPGPUSIM_KERNEL_TESTS:-'Gemm*:Ops*:Layer2Fused*:AllVariants/GemmVariant.*'}  # the override is for debugging
# Variant 5 (TF32 tensor cores) is built without PTX (GPGPU-Sim has no TF32 wmma): its tests are skipped.
SKIPPED='*cublas*:GemmApi.InvalidArgumentsThrow:GemmApi.EveryVariantWorksAfterReleaseAndDeviceReset:*tf32x3*:*Tf32*'
SKIPPED+=':GemmWarptile.GraphKeepsItsScratchWhenALaterGemmGrowsIt:GemmApi.WideProblemsRunInColumnChunks'
# In SHARDS processes at once (gtest's sharding), one simulated GPU each: twice as many as cores,
# as the tests differ in length.
SHARDS=${GPGPUSIM_SHARDS:-$((2 * $(nproc)))}
start=$SECONDS
pids=()
for ((i = 0; i < SHARDS; i++)); do
  GPGPUSIM_WORKDIR=$out/sim-kernels$i GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i NN_MPIRUN=env \
    "$MPIRUN" "$run" "$bin/nn_tests" --gtest_filter="$KERNEL_TESTS-$SKIPPED" > "$out/kernels$i.txt" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
cat "$out"/kernels[0-9]*.txt > "$out/kernels.txt"
grep -E '^\[ +(OK|FAILED) +\]' "$out/kernels.txt" | grep -v ' tests\?, listed below' | sort -u > "$out/cases.txt"
n_ok=$(grep -c '^\[ *OK' "$out/cases.txt")
n_fail=$(grep -c '^\[ *FAILED' "$out/cases.txt")
if [ $rc -eq 0 ] && [ "$n_ok" -gt 0 ] && [ "$n_fail" -eq 0 ]; then
  ok "nn_tests (CUDA build) --gtest_filter='$KERNEL_TESTS-$SKIPPED': $n_ok tests in $SHARDS shards ($((SECONDS - start)) s)"
else
  bad "nn_tests (CUDA build) kernel tests, exit $rc, $n_ok passed, $n_fail failed:"
  grep -E 'FAILED|Failure|error|gpgpusim:' "$out/kernels.txt" | head -n 30 | sed 's/^/    /'
fi

# Every kernel of kernels/ must have executed in those tests, but the cuBLAS path's epilogue.
cublas_only=gemm_bias_epilogue_kernel
# Variant 5's kernel has no PTX (TF32 wmma, which GPGPU-Sim cannot parse): not expected to run.
tf32_only=gemm_tf32x3_kernel
# Its sm_90 kernel is wgmma, sm_90a machine code only (and for compute capability 9.0 alone).
wgmma_only=gemm_tf32x3_wgmma_kernel
# The persistent step needs a cooperative launch (its grid barrier), which GPGPU-Sim does not have
# (our patch answers cudaLaunchCooperativeKernel with "not supported"; the kernel is built as SASS
# only, its grid barrier's PTX does not parse here); the emulator runs it.
coop_only=persistent_step_kernel
coop2_only=persistent2_kernel  # the second persistent kernel: SASS only (cp.async, the grid barrier)
# The fourth: thread block clusters (sm_90 code alone) and a cooperative launch; the emulator runs it.
cluster_only=persistent4_kernel
# Queried for the PTX version its code came from (kernels/common/pdl.cu), never launched.
probe_only=pdl_probe_kernel
defined=$(grep -h -A1 '__global__' "$here"/../../kernels/*/*.cu | grep -o '[a-z_0-9]*_kernel' | sort -u)
executed=$(sed -n 's/^GPGPU-Sim: Performing Functional Simulation, executing kernel \(.*\)\.\.\.$/\1/p' \
             "$out"/sim-kernels*/sim.log 2>/dev/null | c++filt | grep -o '[a-z_0-9]*_kernel' | sort -u)
missing=$(comm -23 <(echo "$defined") <(echo "$executed") | grep -vx -e "$cublas_only" -e "$tf32_only" -e "$wgmma_only" -e "$coop_only" -e "$coop2_only" -e "$cluster_only" -e "$probe_only" | tr '\n' ' ')
if [ -n "$defined" ] && [ -z "$missing" ]; then
  ok "every kernel of kernels/ executed on GPGPU-Sim: $(echo "$defined" | grep -cvx -e "$cublas_only" -e "$tf32_only" -e "$wgmma_only" -e "$coop_only" -e "$coop2_only" -e "$cluster_only" -e "$probe_only") of $(echo "$defined" | wc -l) ($cublas_only serves cuBLAS only; $tf32_only and $wgmma_only, variant 5, have no PTX: GPGPU-Sim has no TF32 MMA, no wgmma; $coop_only and $coop2_only need a cooperative launch, which it does not simulate, $cluster_only clusters and sm_90 too; $probe_only is never launched)"
else
  bad "kernels of kernels/ that never executed on GPGPU-Sim: ${missing:-none found at all}"
fi

# ---- 3. nn_train at 2 ranks (the training of `train` above) ----
# RANKS:GEMM: --gemm 4 runs the fused step (gradients exchanged at 2 ranks; at 1 rank the SGD
# step inside its kernels), --gemm 2 the separate kernels.
# The first case is the command docs/testing.md and tests/gpgpusim/README.md show, run as written
# from the repository root without the ptxas cache (--gemm 4 is nn_train's default) when the
# build is the default one; the same options through the variables otherwise.
doc_cmd='mpirun -np 2 tests/gpgpusim/run.sh build/cuda/bin/nn_train --hidden 32 --batch 100 --train-size 400 --test-size 200 --epochs 1 --verify'
root=$(cd "$here/../.." && pwd)
for case in 2:4 2:2 1:4; do
  np=${case%%:*} gemm=${case#*:}
  start=$SECONDS
  GPGPUSIM_WORKDIR=$out/sim-train$np-$gemm
  log=$out/train$np-$gemm.txt
  if [ "$case" = 2:4 ] && [ "$root/build/cuda/bin/nn_train" -ef "$bin/nn_train" ] && [ "$root/data/current" -ef "$data" ]; then
    echo "   as the docs show it: $doc_cmd"
    (cd "$root" && GPGPUSIM_PTXAS_CACHE='' eval "$doc_cmd") > "$log" 2>&1
  else
    # shellcheck disable=SC2086
    $MPIRUN $MPIRUN_FLAGS -np "$np" "$run" "${train[@]}" --gemm "$gemm" > "$log" 2>&1
  fi
  rc=$?
  gpus='0->gpu[0-9]+(\[[^]]*\])?'  # each rank's GPU, then its PCI bus id and UUID
  [ "$np" = 2 ] && gpus+=' 1->gpu[0-9]+(\[[^]]*\])?'
  step='separate kernels'
  [ "$gemm" = 4 ] && step='fused'
  if [ $rc -eq 0 ] && grep -q '^verify: .* ok$' "$log" && grep -q '^test precision: ' "$log" &&
     grep -q "^step: $step" "$log" && grep -Eq "^ranks on [^:]+: $gpus \(.*GPGPU-Sim" "$log"; then
    ok "mpirun -np $np run.sh nn_train --gemm $gemm ($step) --verify: $(grep '^verify:' "$log" | cut -c9-60)... $(grep '^test precision:' "$log") ($((SECONDS - start)) s)"
  else
    bad "mpirun -np $np run.sh nn_train --gemm $gemm --verify (exit $rc):"; tail -n 15 "$log" | sed 's/^/    /'
  fi
done
refuse "--gemm 5" "--graph" "--persistent on"

if [ $failed -eq 0 ]; then rm -rf "$out"; else echo "the outputs and the simulator's directories: $out"; fi
echo "gpgpusim: $passed passed, $failed failed"
[ $failed -eq 0 ]
