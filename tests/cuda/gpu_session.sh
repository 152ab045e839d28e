#!/usr/bin/env bash
# Every check and measurement that needs a GPU, in one call, most valuable first:
#   bash tests/cuda/gpu_session.sh KIT OUT [BUDGET_S]
# KIT: the folder holding kit.txz from tests/cuda/gpu_kit.sh (the CUDA build and the libraries
# it needs); OUT: where logs.tgz and summary.txt go; BUDGET_S (default 420): the whole script's time.
# Each step has its own limit and never runs past the budget; a step that fails is reported and
# the next one runs. The last lines are a table: step, status, seconds, what it found.
# Run from the repository root (bench/peer_torch.py is read from there).
# STEPS="name ..." runs only those steps (the names in the table, or shell patterns such as
# 'peer_*' for the whole peer comparison), for a short second call.
# PEER_BUDGET (default 240): the seconds the peer comparison (3b) may take in all; its steps
# stop there (the table is still written from what ran).
# DRY_RUN=1 (KIT: -): no GPU and no kit; each selected step's command runs on the emulator build
# (build/cpu/bin; data/current) for at most DRY_LIMIT seconds (default 20), and one cut short there
# counts as started: a check that the commands of new steps start, before a GPU session spends time.
set -uo pipefail
DRY=${DRY_RUN:-}
KIT=${1:?usage: gpu_session.sh KIT OUT [BUDGET_S]}
[ -n "$DRY" ] || KIT=$(readlink -f "$KIT")
OUT=$(mkdir -p "${2:?usage: gpu_session.sh KIT OUT [BUDGET_S]}" && readlink -f "$2")
cd "$(dirname "$0")/../.." || exit 1
BUDGET=${3:-420}
# Logs and CSVs go to LOGS, packed into OUT/logs.tgz after every step (so a run cut short still
# returns what it had); OUT itself holds only logs.tgz and summary.txt.
LOGS=$OUT.logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
T0=$SECONDS
rows=()
log() { echo "[$((SECONDS - T0)) s] $*"; }

if [ -n "$DRY" ]; then  # the emulator build in place of the kit (see DRY_RUN above)
  BIN=$PWD/build/cpu/bin
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  KITENV=(env SIM_WORKERS=0 OMPI_MCA_rmaps_base_oversubscribe=1)
  ONE=("${KITENV[@]}")
  MPIRUN=$PWD/slurm/mpirun.sh
  TWO=("${KITENV[@]}" "$MPIRUN" -np 2)
  PY=$(command -v python3)
  echo "dry run: $BIN" >"$LOGS/machine.log"
else
  # ---- unpack and wire up (Open MPI's Debian paths, the libraries, the data) ----
  R=/tmp/nnkit
  rm -rf "$R" && mkdir -p "$R"
  if command -v xz >/dev/null; then tar -C "$R" -xJf "$KIT/kit.txz"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$KIT/kit.txz" "$R"
  fi || { echo "gpu_session: cannot unpack $KIT/kit.txz"; exit 1; }
  while read -r p; do   # Open MPI and PMIx look for plugins and help texts under these paths
    [ -e "/$p" ] || { mkdir -p "$(dirname "/$p")" && ln -s "$R/ompi/$p" "/$p"; }
  done <"$R/ompi/PATHS"
  ln -sf orterun "$R/ompi/usr/bin/mpirun"
  export PATH=$R/ompi/usr/bin:$PATH
  cuda_lib=
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    [ -e "$d/libcublas.so.13" ] && { cuda_lib=$d; break; }
  done
  if [ -z "$cuda_lib" ]; then
    found=$(find /usr /opt -name 'libcublas.so.13' 2>/dev/null | head -1)
    [ -n "$found" ] && cuda_lib=$(dirname "$found")
  fi
  # NCCL (the kit leaves it out, see gpu_kit.sh): the toolkit's, the linker's cache, the wheel of
  # the python3 that runs the peers (PyTorch depends on nvidia-nccl-cu12/13), anywhere under /usr, /opt.
  nccl_lib=
  for d in "$cuda_lib" $(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 .*x86-64/ {print $NF}' | xargs -r -n1 dirname) \
           $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null); do
    [ -n "$d" ] && [ -e "$d/libnccl.so.2" ] && { nccl_lib=$d; break; }
  done
  if [ -z "$nccl_lib" ]; then
    found=$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -1)
    [ -n "$found" ] && nccl_lib=$(dirname "$found")
  fi
  # Our libraries only for our programs (never for python3 and PyTorch).
  KITLD=$R/lib${cuda_lib:+:$cuda_lib}${nccl_lib:+:$nccl_lib}
  if ! LD_LIBRARY_PATH=$KITLD OMPI_MCA_ess_singleton_isolated=1 "$R/bin/nn_train" --help >/dev/null 2>"$LOGS/compat.log"; then
    KITLD=$KITLD:$R/lib-compat   # the machine's C++ runtime is older than ours
  fi
  plugins=$(sed -n 1p "$R/ompi/PATHS")/lib/openmpi3
  pmix=$(grep '/pmix2$' "$R/ompi/PATHS")
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  KITENV=(env LD_LIBRARY_PATH=$KITLD OMPI_MCA_mca_base_component_path=$R/ompi/$plugins
          ${pmix:+PMIX_MCA_mca_base_component_path=$R/ompi/$pmix/lib/pmix}
          OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1)
  mkdir -p data && { [ -e data/current ] || ln -sfn "$R/data" data/current; }
  BIN=$R/bin
  MPIRUN=$PWD/slurm/mpirun.sh
  # One rank: no launcher at all (an isolated singleton needs no orted); two: orterun from the kit.
  ONE=("${KITENV[@]}" OMPI_MCA_ess_singleton_isolated=1)
  TWO=("${KITENV[@]}" "$MPIRUN" -np 2)
  PY=$(command -v python3)

  {
    echo "== machine"; date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
    nvcc --version 2>&1 | tail -2; echo "cuBLAS from: ${cuda_lib:-not found}"; echo "NCCL from: ${nccl_lib:-not found}"; nproc
    echo "== libraries not found"; LD_LIBRARY_PATH=$KITLD ldd "$BIN/nn_tests" "$BIN/nn_train" | grep 'not found' || echo none
    echo "LD_LIBRARY_PATH for ours: $KITLD"; cat "$LOGS/compat.log"; cat /etc/os-release | head -2
  } >"$LOGS/machine.log" 2>&1
  log "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
fi

# step NAME LIMIT_S CMD...: run CMD with its output in OUT/NAME.log; record status and seconds.
known=()
read -r -a wanted <<<"${STEPS:-}"  # names or patterns (read: no pathname expansion)
selected() {  # is step $1 named by STEPS (all are when STEPS is empty)?
  [ ${#wanted[@]} -eq 0 ] && return 0
  local w
  for w in "${wanted[@]}"; do [[ $1 == $w ]] && return 0; done
  return 1
}
step() {
  local name=$1 limit=$2; shift 2
  known+=("$name")
  selected "$name" || return 0
  local left=$((BUDGET - (SECONDS - T0) - 5))
  if [ "$left" -lt 15 ]; then rows+=("$(printf '%-28s %-8s %5s  %s' "$name" skipped - "budget spent")"); return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  [ -n "$DRY" ] && [ "$limit" -gt "${DRY_LIMIT:-20}" ] && limit=${DRY_LIMIT:-20}
  local t=$SECONDS rc=0
  log "$name (limit $limit s)"
  timeout -k 5 "$limit" "$@" >"$LOGS/$name.log" 2>&1 || rc=$?
  local what
  what=$(summarise "$name")
  local status=ok
  [ "$rc" -eq 0 ] || status="rc=$rc"
  [ "$rc" -eq 124 ] && status=timeout
  [ -n "$DRY" ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && status=started
  rows+=("$(printf '%-28s %-8s %5d  %s' "$name" "$status" $((SECONDS - t)) "$what")")
  log "$name: $status, $((SECONDS - t)) s: $what"
  tar -C "$LOGS" -czf "$OUT/logs.tgz" .
}
summarise() {
  local f=$LOGS/$1.log
  case $1 in
    tc_peak) { grep -iE 'tflop|peak' "$f" | tail -4 | tr '\n' ' ' | cut -c1-200; } ;;
    wgmma_tests) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|Failure|expected' "$f" | head -4 | tr '\n' ' ' | cut -c1-200; } ;;
    wgmma_gemm*) { echo "$(grep -ciE 'mismatch|error' "$f") failed rows; $(grep -E 'wgmma' "$f" | grep -E '^square4096' | awk '{printf "%s %s ", $6, $9}')" | cut -c1-200; } ;;
    wgmma_jax*) { grep -E '^(epoch_seconds|startup_seconds|error)' "$f" | tr '\n' ' ' | cut -c1-200; } ;;
    wgmma_sanitize*) { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-200; } ;;
    wgmma_*) { grep -iE 'test (precision|accuracy)|verif|max.*diff|s/epoch|^step:' "$f" | tail -3 | tr '\n' ' ' | cut -c1-200; } ;;
    tf32_tests) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$f" | tr '\n' ' ' | cut -c1-160; } ;;
    tf32_gemm*) { echo "$(grep -ciE 'mismatch|error' "$f") failed rows; 4096: $(grep -E '^square4096' "$f" | awk '{printf "%s %s ", $6, $9}')" | cut -c1-200; } ;;
    tf32_jax*) { grep -E '^(epoch_seconds|startup_seconds|error)' "$f" | tr '\n' ' ' | cut -c1-200; } ;;
    tf32_sanitize*) { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-200; } ;;
    tf32_*) { grep -iE 'test (precision|accuracy)|verif|max.*diff|s/epoch|^step:' "$f" | tail -3 | tr '\n' ' ' | cut -c1-200; } ;;
    tests_np*) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|^tests: ' "$f" | tr '\n' ' ' | cut -c1-160; } ;;
    train_*) { grep -iE 'test (precision|accuracy)|verif|max.*diff|s/epoch|epoch [0-9]+' "$f" | tail -3 | tr '\n' ' ' | cut -c1-200; } ;;
    gemm_bench|gemm_splits*) { grep -ciE 'fail|mismatch' "$f" | sed 's/^/lines with fail|mismatch: /'; } ;;
    torch_*|peer_jax_*|peer_torch_*) { grep -E '^(epoch_seconds|startup_seconds|test precision|check: max|error)' "$f" | tr '\n' ' ' | cut -c1-200; } ;;
    peer_ours*) { grep -E '^step: fused|test precision' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    peer_table) { grep -cE '^\| [0-9]+:[0-9]+ ' "$f" | sed 's/^/table rows: /'; } ;;
    sanitize_script) { grep -E '^  (FAIL )?[a-z]+ np=' "$f" | cut -c1-60 | tr '\n' ';' | cut -c1-200; } ;;
    sanitize_*) { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^tests: |FAILED' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-200; } ;;
    nccl_tests) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|SKIPPED|Failure' "$f" | head -4 | tr '\n' ' ' | cut -c1-200; } ;;
    nccl_*) { grep -E '^communication:|verify:|share the GPU|^error' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    cluster_tests) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|SKIPPED|Failure' "$f" | head -4 | tr '\n' ' ' | cut -c1-200; } ;;
    table_*) { grep -iE 'test precision|^epoch +4|GEMM variant|refus|error' "$f" | tail -3 | tr '\n' ' ' | cut -c1-200; } ;;
    probe_v*) { grep -h '^# persistent probe' "$LOGS/$1.txt" 2>/dev/null | tail -1 | sed 's/.*us://' | cut -c1-200; } ;;
    sanitize_v*) { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY|test precision' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-200; } ;;
    gemm_4096) { grep -E '^square4096' "$f" | awk '{printf "%s %s ", $6, $9}' | cut -c1-200; } ;;
    persist2_tests) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|Failure' "$f" | head -4 | tr '\n' ' ' | cut -c1-200; } ;;
    persist2_probe*) { grep -h '^# persistent probe' "$LOGS/$1.txt" 2>/dev/null | tail -1 | sed 's/.*us://' | cut -c1-200; } ;;
    persist2_sanitize*) { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY|test precision' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-200; } ;;
    persist2_ncu*) { grep -E '"gpu__time_duration.sum"|Duration|Registers Per|Achieved Occupancy' "$f" | head -4 | tr -s ' ' | tr '\n' ';' | cut -c1-200; } ;;
    check_*|sweep_*) { grep -iE 'test precision|^epoch +4' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    xchg_*|gemm5w_*) { grep -iE 'test precision|verif|^exchange:|^epoch +[0-9]+' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    persist2_*|pdl_*) { grep -iE 'test (precision|accuracy)|verif|max.*diff|^step:|--persistent on:' "$f" | tail -3 | tr '\n' ' ' | cut -c1-200; } ;;
    persist_tests) { grep -E '^\[  (PASSED|FAILED)  \]|tests? ran|Failure' "$f" | head -4 | tr '\n' ' ' | cut -c1-200; } ;;
    persist_sanitize*) { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-200; } ;;
    persist_*) { grep -iE 'test (precision|accuracy)|verif|max.*diff|^step:' "$f" | tail -3 | tr '\n' ' ' | cut -c1-200; } ;;
    latency_probe) { grep -E 'us/' "$f" | awk '{print $NF, $(NF-1)}' | tr '\n' ' ' | cut -c1-200; } ;;
    lat_*) { grep -iE 'test (precision|accuracy)|s/epoch|epoch [0-9]+' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    exch_*|scalcal_parts*|scalcal_allreduce*) { grep -E '^(d2h|h2d|allreduce|reduce) ' "$f" | awk '{printf "%s %s %sus; ", $1, $5, $6}' | cut -c1-200; } ;;
    scalcal_*) { grep -iE '^epoch +[0-9]+|test precision|error' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    scal_*) { grep -iE 'test precision|s/epoch|epoch [0-9]+' "$f" | tail -2 | tr '\n' ' ' | cut -c1-200; } ;;
    ncu_*) { grep -c '"gpu__time_duration.sum"' "$f" | sed 's/^/kernel rows: /'; } ;;
    *) tail -1 "$f" | cut -c1-160 ;;
  esac
}

TRAIN=(--data data/current --hidden 256 --batch 100 --lr 0.5 --reg 1e-4)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
# 0w. What decides the defaults, in one call (STEPS='cluster_tests table_* peer_jax_scan_* peer_torch_graph_*
#     probe_v* sanitize_v* gemm_4096'): the kernel tests of the new paths on the GPU (the emulator's
#     cluster tests, variants 3 and 4 of the persistent step, --gemm auto's rules); at the four
#     shapes the default (--gemm auto), the fused step with --gemm 4, --gemm 5 (mma.sync) and
#     --gemm 5 with wgmma (NN_TF32_WGMMA=1), the persistent step's variants 2, 3 (16-byte windows,
#     the tail in phase A) and 4 (clusters, one grid barrier a step), each 4 epochs
#     (`python3 bench/auto_table.py --run OUT.logs` prints the table's rows from the table_* CSVs);
#     the per-phase probe of variants 2 and 3 at the plan's tile; compute-sanitizer on variants 3
#     and 4; the GEMM lab at 4096^3 (wgmma against cuBLAS SGEMM). The peers come from 0q's steps.
step cluster_tests 90 "${ONE[@]}" "$BIN/nn_tests" \
  --gtest_filter='SimCluster*:PersistentStep*:PersistentCluster*:PersistentVariant*:PersistentPlan*:GemmAuto*'
for hb in 256:100 512:800 1024:1000 1024:3000; do
  s=${hb/:/_}
  TB=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  step "table_default_$s" 30 "${ONE[@]}" "$BIN/nn_train" "${TB[@]}" --metrics "$LOGS/table_default_$s.csv" \
    --report "$LOGS/table_default_$s.json"
  for g in 4 5; do
    step "table_gemm${g}_$s" 30 "${ONE[@]}" NN_PDL=0 "$BIN/nn_train" "${TB[@]}" --persistent off --gemm $g \
      --metrics "$LOGS/table_gemm${g}_$s.csv"
  done
  step "table_gemm5w_$s" 30 "${ONE[@]}" NN_PDL=0 NN_TF32_WGMMA=1 "$BIN/nn_train" "${TB[@]}" --persistent off --gemm 5 \
    --metrics "$LOGS/table_gemm5w_$s.csv"
  for v in 2 3 4; do
    step "table_persist${v}_$s" 30 "${ONE[@]}" NN_PERSISTENT_VARIANT=$v "$BIN/nn_train" "${TB[@]}" --persistent on \
      --metrics "$LOGS/table_persist${v}_$s.csv"
  done
done
for v in 2 3; do
  step "probe_v${v}_256_100" 60 "${ONE[@]}" NN_PERSISTENT_VARIANT=$v NN_PERSISTENT_PROBE="$LOGS/probe_v${v}_256_100.txt" \
    NN_PERSISTENT_PROBE_LAUNCHES=5 "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 20000
done
if [ -n "$CS" ]; then
  for v in 3 4; do
    for tool in memcheck racecheck synccheck; do
      step "sanitize_v${v}_$tool" 150 "${ONE[@]}" NN_PERSISTENT_VARIANT=$v "$CS" --tool "$tool" --error-exitcode 99 \
        --print-limit 20 "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 3200
    done
  done
fi
step gemm_4096 120 "${ONE[@]}" "$BIN/gemm_bench" --variants 0,4,5 --tf32 --only square4096 --csv "$LOGS/gemm_4096.csv"
# 0s. The second persistent kernel (kernels/ops/persistent_step2.cu: each block's W1 tiles in shared
#     memory for the launch, its input slice gathered once a step, a step ahead, by asynchronous
#     copies; every phase on every block) and programmatic dependent launch (PDL) of the fused step
#     (kernels/common/pdl.h). Their kernel tests and the emulator's models of the primitives on the
#     GPU; the per-phase probe at 256:100 (NN_PERSISTENT_PROBE: each phase's median over the steps of
#     its slowest block, the model's prediction beside it); --persistent on at the four shapes (a
#     shape the plan does not admit is refused in one line) with the first kernel beside it
#     (NN_PERSISTENT_VARIANT=1); --verify; compute-sanitizer memcheck, racecheck and synccheck on
#     nn_train at 256:100; Nsight Compute of one launch (caches and clocks as they are); the fused
#     step with PDL (the default) and without (NN_PDL=0) at the four shapes.
# 0n. NCCL (--comm nccl): NVIDIA's all-reduce on a one-rank communicator, its sums checked
#     (tests/comm/test_nccl.cpp: a one-rank trainer skips the exchange, so the test forces it), the
#     trainer's NCCL tests and --comm nccl --verify at one rank; two ranks on this one GPU must be
#     refused in one line before NCCL starts (NCCL cannot run them), so no 2-rank NCCL figure comes
#     from one GPU.
step nccl_tests 60 "${ONE[@]}" "$BIN/nn_tests" --gtest_filter='Nccl*:NcclTrain*'
step nccl_verify_np1 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --comm nccl --epochs 1 --verify
step nccl_refused_np2 30 bash -c 'out=$("$@" 2>&1); rc=$?; echo "$out"; [ "$rc" != 0 ] && grep -q "share the GPU" <<<"$out"' _ \
  "${TWO[@]}" "$BIN/nn_train" "${TRAIN[@]}" --comm nccl --epochs 1
P2_TESTS='PersistentStep*:PersistentPlan*:PersistentProbe*:Pdl.*:SimPdl*:SimAsyncCopy*:SimFlags*:SimCoop*'
step persist2_tests 90 "${ONE[@]}" "$BIN/nn_tests" --gtest_filter="$P2_TESTS"
step persist2_probe_256_100 60 "${ONE[@]}" NN_PERSISTENT_PROBE="$LOGS/persist2_probe_256_100.txt" \
  NN_PERSISTENT_PROBE_LAUNCHES=5 "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 20000
step persist2_verify_256_100 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --verify
# Variant 3 of the second kernel (NN_PERSISTENT_VARIANT=3: 16-byte windows, the conversion four
# bytes at a time, the tail in the next step's phase A) against variant 2 at 256:100, one after the
# other at the plan's tile and at 16x100: the probe with phase A split (wait, convert, gather,
# forward), --verify, four epochs each.
step persist2_probe_v3_256_100 60 "${ONE[@]}" NN_PERSISTENT_VARIANT=3 NN_PERSISTENT_PROBE="$LOGS/persist2_probe_v3_256_100.txt" \
  NN_PERSISTENT_PROBE_LAUNCHES=5 "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 20000
step persist2_v3_verify_256_100 60 "${ONE[@]}" NN_PERSISTENT_VARIANT=3 "$BIN/nn_train" "${TRAIN[@]}" --persistent on \
  --epochs 1 --verify
for tile in plan 16x100; do
  for v in 2 3; do
    step "persist2_v${v}_train_${tile}_256_100" 45 "${ONE[@]}" NN_PERSISTENT_VARIANT=$v \
      NN_PERSISTENT_TILE="${tile/plan/}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 4 --persistent on \
      --metrics "$LOGS/persist2_v${v}_train_${tile}_256_100.csv"
  done
done
step persist2_probe_v3_16x100_256_100 60 "${ONE[@]}" NN_PERSISTENT_VARIANT=3 NN_PERSISTENT_TILE=16x100 \
  NN_PERSISTENT_PROBE="$LOGS/persist2_probe_v3_16x100_256_100.txt" NN_PERSISTENT_PROBE_LAUNCHES=5 "$BIN/nn_train" \
  "${TRAIN[@]}" --persistent on --epochs 1 --train-size 20000
for hb in 256:100 512:800 1024:1000 1024:3000; do
  P2=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  step "persist2_train_${hb/:/_}" 45 "${ONE[@]}" "$BIN/nn_train" "${P2[@]}" --persistent on \
    --metrics "$LOGS/persist2_train_${hb/:/_}.csv" --report "$LOGS/persist2_train_${hb/:/_}.json"
  step "persist2_v1_train_${hb/:/_}" 45 "${ONE[@]}" NN_PERSISTENT_VARIANT=1 "$BIN/nn_train" "${P2[@]}" \
    --persistent on --metrics "$LOGS/persist2_v1_train_${hb/:/_}.csv"
done
for hb in 256:100 512:800 1024:1000 1024:3000; do
  PD=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4 --persistent off)
  step "pdl_on_${hb/:/_}" 30 "${ONE[@]}" "$BIN/nn_train" "${PD[@]}" --metrics "$LOGS/pdl_on_${hb/:/_}.csv"
  step "pdl_off_${hb/:/_}" 30 "${ONE[@]}" NN_PDL=0 "$BIN/nn_train" "${PD[@]}" --metrics "$LOGS/pdl_off_${hb/:/_}.csv"
done
# 0z. A second look at what decides the defaults: the persistent step's tiles at 256:100
#     (NN_PERSISTENT_TILE: one block a batch column against taller tiles with fewer slices), PDL on
#     and off twice more at 512:800 and 1024:1000 (run to run spread), --gemm 5 against 4 with the
#     fused step at 256:100 and 512:800.
for tile in 16x100 32x52 64x24; do
  step "sweep_tile_${tile}_256_100" 30 "${ONE[@]}" NN_PERSISTENT_TILE="$tile" "$BIN/nn_train" "${TRAIN[@]}" --epochs 4 \
    --persistent on --metrics "$LOGS/sweep_tile_${tile}_256_100.csv"
done
for rep in 1 2; do
  for hb in 512:800 1024:1000; do
    SW=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4 --persistent off)
    step "sweep_pdl1_${hb/:/_}_r$rep" 30 "${ONE[@]}" NN_PDL=1 "$BIN/nn_train" "${SW[@]}" --metrics "$LOGS/sweep_pdl1_${hb/:/_}_r$rep.csv"
    step "sweep_pdl0_${hb/:/_}_r$rep" 30 "${ONE[@]}" NN_PDL=0 "$BIN/nn_train" "${SW[@]}" --metrics "$LOGS/sweep_pdl0_${hb/:/_}_r$rep.csv"
  done
done
for hb in 256:100 512:800; do
  SW=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4 --persistent off)
  step "sweep_gemm5_${hb/:/_}" 30 "${ONE[@]}" NN_PDL=0 "$BIN/nn_train" "${SW[@]}" --gemm 5 --metrics "$LOGS/sweep_gemm5_${hb/:/_}.csv"
  step "sweep_gemm4_${hb/:/_}" 30 "${ONE[@]}" NN_PDL=0 "$BIN/nn_train" "${SW[@]}" --gemm 4 --metrics "$LOGS/sweep_gemm4_${hb/:/_}.csv"
done
# 0y. The persistent step as --persistent auto plans it (the model with its terms fitted to the
#     tiles measured at 256:100) beside the tiles it weighs, and auto at 512:800.
step check_auto_256_100 30 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 4 --metrics "$LOGS/check_auto_256_100.csv"
for tile in 64x28 32x52; do
  step "check_tile_${tile}_256_100" 30 "${ONE[@]}" NN_PERSISTENT_TILE="$tile" "$BIN/nn_train" "${TRAIN[@]}" --epochs 4 \
    --persistent on --metrics "$LOGS/check_tile_${tile}_256_100.csv"
done
step check_auto_512_800 30 "${ONE[@]}" "$BIN/nn_train" --data data/current --hidden 512 --batch 800 --lr 0.5 --reg 1e-4 \
  --epochs 4 --metrics "$LOGS/check_auto_512_800.csv"
# 0e. The staged exchange in pieces (--exchange-chunk: layer 1's piece i summed while piece i + 1
#     is copied down and piece i - 1 up) against one piece, 2 ranks sharing the one GPU (so a rank's
#     copies and kernels wait for the other process's: these runs compare the two exchanges, they do
#     not show two GPUs), --report's exchange beside the compute; --verify with pieces at 2 ranks.
for hb in 256:100 1024:1000 1024:3000; do
  XC=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 3)
  for chunk in 0 auto; do
    step "xchg_${chunk}_${hb/:/_}_np2" 40 "${KITENV[@]}" OMP_NUM_THREADS=1 "$MPIRUN" -np 2 "$BIN/nn_train" "${XC[@]}" \
      --exchange-chunk "$chunk" --metrics "$LOGS/xchg_${chunk}_${hb/:/_}_np2.csv" --report "$LOGS/xchg_${chunk}_${hb/:/_}_np2.json"
  done
done
step xchg_verify_np2 60 "${KITENV[@]}" OMP_NUM_THREADS=1 "$MPIRUN" -np 2 "$BIN/nn_train" "${TRAIN[@]}" --epochs 1 \
  --exchange-chunk 65536 --verify
# 0g. --gemm 5 with variant 5's wgmma kernel in its plan (NN_TF32_WGMMA=1) and without, and the
#     default --gemm 4, training at the H = 1024 shapes (what decides variant 5's default on sm_90).
for hb in 1024:1000 1024:3000; do
  G5=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  step "gemm5w_wgmma_${hb/:/_}" 30 "${ONE[@]}" NN_TF32_WGMMA=1 "$BIN/nn_train" "${G5[@]}" --gemm 5 \
    --metrics "$LOGS/gemm5w_wgmma_${hb/:/_}.csv"
  step "gemm5w_mma_${hb/:/_}" 30 "${ONE[@]}" "$BIN/nn_train" "${G5[@]}" --gemm 5 --metrics "$LOGS/gemm5w_mma_${hb/:/_}.csv"
done
# 0q. The peer comparison, same GPU, same data and hyperparameters, 4 epochs each
#     (bench/peers_gpu_table.py takes the median of epochs 2-4), at four shapes: ours (the
#     default, the fused step where it applies, and --fused off) against the strongest peers,
#     JAX with the epoch in one jitted lax.scan and with a jitted step per batch (precision
#     HIGHEST: FP32, no TF32; peer_jax_check first checks a step against float64 numpy on the
#     GPU, which TF32 would fail), PyTorch with the whole step, optimizer included, in one CUDA
#     graph, and PyTorch eager (TF32 off). Each peer run is mostly startup (imports, CUDA, XLA's
#     compile and autotuning, the graph capture): its `startup_seconds:` line says how much.
#     The table (ms per epoch, ours / peer, the FP32 limit of each shape) goes to OUT/peers_gpu.md.
#     Expected, per shape: ours 2 x 1-2 s, each peer about 8-17 s (mostly startup): 3-3.5 min in
#     all; PEER_BUDGET caps the block.
PEER_BUDGET=${PEER_BUDGET:-240}
peer_t0=$SECONDS
peer_step() {  # step NAME LIMIT CMD..., within what is left of PEER_BUDGET
  local name=$1 limit=$2 left=$((PEER_BUDGET - (SECONDS - peer_t0)))
  shift 2
  if [ "$left" -lt 10 ]; then
    known+=("$name")
    selected "$name" && rows+=("$(printf '%-28s %-8s %5s  %s' "$name" skipped - "PEER_BUDGET spent")")
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  step "$name" "$limit" "$@"
}
peer_step peer_jax_check 45 "$PY" bench/peer_jax.py --check --device gpu --mode step
for hb in 256:100 512:800 1024:1000 1024:3000; do
  s=${hb/:/_}
  PEER=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  peer_step "peer_ours_$s" 20 "${ONE[@]}" "$BIN/nn_train" "${PEER[@]}" --metrics "$LOGS/peer_ours_$s.csv"
  peer_step "peer_ours_fused_$s" 20 "${ONE[@]}" "$BIN/nn_train" "${PEER[@]}" --persistent off \
    --metrics "$LOGS/peer_ours_fused_$s.csv"
  peer_step "peer_ours_persistent_$s" 20 "${ONE[@]}" "$BIN/nn_train" "${PEER[@]}" --persistent on \
    --metrics "$LOGS/peer_ours_persistent_$s.csv"
  peer_step "peer_ours_unfused_$s" 20 "${ONE[@]}" "$BIN/nn_train" "${PEER[@]}" --fused off \
    --metrics "$LOGS/peer_ours_unfused_$s.csv"
  peer_step "peer_jax_scan_$s" 45 "$PY" bench/peer_jax.py "${PEER[@]}" --device gpu --mode scan
  peer_step "peer_jax_step_$s" 45 "$PY" bench/peer_jax.py "${PEER[@]}" --device gpu --mode step
  peer_step "peer_torch_graph_$s" 45 "$PY" bench/peer_torch.py "${PEER[@]}" --device cuda --cuda-graph
  peer_step "peer_torch_eager_$s" 45 "$PY" bench/peer_torch.py "${PEER[@]}" --device cuda
done
step peer_table 20 "$PY" bench/peers_gpu_table.py "$LOGS" --out "$LOGS/peers_gpu.md" --csv "$LOGS/peers_gpu.csv"
[ -s "$LOGS/peers_gpu.md" ] && cp "$LOGS/peers_gpu.md" "$OUT/"
# 0t. The second persistent kernel under compute-sanitizer and Nsight Compute (0s says what).
if [ -n "$CS" ]; then
  for tool in memcheck racecheck synccheck; do
    step "persist2_sanitize_$tool" 150 "${ONE[@]}" "$CS" --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 3200
  done
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  step persist2_ncu_256_100 90 "${ONE[@]}" "$NCU" --cache-control none --clock-control none \
    --kernel-name regex:persistent2 --launch-skip 2 --launch-count 1 --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --metrics gpu__time_duration.sum \
    "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 20000
fi
# 0. GEMM variant 5 (tensor cores at FP32 accuracy, 3xTF32): its tests (the
#    TF32 rounding against the hardware, accuracy against float64 beside variant 4 and plain
#    TF32, every op/epilogue case, the gathered B and the step epilogue); the GEMM lab against
#    cuBLAS at the trainer's two big shapes (H 1024, B 3000) and 4096^3, every tile
#    configuration and plain TF32, with each row's largest error; at H 256, B 100 too;
#    --verify with --gemm 5 at 1 and 2 ranks; 1024:3000 timed with --gemm 5 and 4 and JAX's
#    scan (precision HIGHEST) in the same call; compute-sanitizer's four tools on its tests.
# 0p. The persistent step (kernels/ops/persistent_step.cu: runs of steps in one cooperative
#     launch, two grid barriers a step): its kernel tests and the emulator's grid-barrier tests on
#     the GPU, --verify at 256:100 and 128:50, a 256:100 run with the step's kernel time (ncu, one
#     launch of 32 steps), compute-sanitizer's four tools on its tests.
step persist_tests 60 "${ONE[@]}" "$BIN/nn_tests" --gtest_filter='PersistentStep*:SimCoop*:Persistent.*:Resume.Persistent*'
step persist_verify 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --verify \
  --report "$LOGS/persist_verify.json"
step persist_verify_128_50 60 "${ONE[@]}" "$BIN/nn_train" --data data/current --hidden 128 --batch 50 --lr 0.5 \
  --reg 1e-4 --persistent on --epochs 1 --verify
step persist_train_256_100 30 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 4 \
  --metrics "$LOGS/persist_train_256_100.csv"
step persist_train_512_800 30 "${ONE[@]}" "$BIN/nn_train" --data data/current --hidden 512 --batch 800 --lr 0.5 \
  --reg 1e-4 --persistent on --epochs 4 --metrics "$LOGS/persist_train_512_800.csv"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  step ncu_persist_256_100 60 "${ONE[@]}" "$NCU" --clock-control none --csv --kernel-name regex:persistent \
    --launch-skip 2 --launch-count 2 --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread \
    "$BIN/nn_train" "${TRAIN[@]}" --persistent on --epochs 1 --train-size 20000
fi
if [ -n "$CS" ]; then
  for tool in memcheck racecheck initcheck synccheck; do
    # --report-api-errors no: SimCoop.GridLargerThanTheDeviceHoldsIsRefused provokes a refused launch on purpose.
    step "persist_sanitize_$tool" 90 "${ONE[@]}" "$CS" --tool "$tool" --error-exitcode 99 --report-api-errors no \
      --print-limit 20 "$BIN/nn_tests" --gtest_filter='PersistentStep*:SimCoop*'
  done
fi
# 0x. The gradient exchange's parts, the scaling model's inputs (bench/exchange_parts.cu,
#     docs/scaling.md): pinned D2H and H2D at the gradient sizes of H = 256 and 1024 (814,120 and
#     3,256,360 bytes) with 1, 2 and 4 ranks copying at once (sharing the one GPU), the host's
#     reduction rate, the host all-reduce at 2-16 ranks, one core each, for Open MPI's default
#     (0), recursive doubling (3), ring (4) and Rabenseifner (6); then the trainer at 1-16 CPU
#     ranks (--device cpu, one core each: strong scaling at a fixed global batch) and at 1, 2 and
#     4 ranks sharing the GPU, each with --report (its phases: compute, copies, exchange).
XB=(--bytes 814120,3256360 --csv "$LOGS/exchange_parts.csv")
step exch_copies_np1 30 "${ONE[@]}" "$BIN/exchange_parts" "${XB[@]}" --parts copies,reduce
for np in 2 4; do
  step "exch_copies_np$np" 30 "${KITENV[@]}" OMP_NUM_THREADS=1 "$MPIRUN" -np "$np" "$BIN/exchange_parts" "${XB[@]}" \
    --parts copies
done
for np in 2 4 8 16; do
  for algo in 0 3 4 6; do
    step "exch_allreduce_np${np}_a$algo" 30 "${KITENV[@]}" OMP_NUM_THREADS=1 OMPI_MCA_coll_tuned_use_dynamic_rules=1 \
      OMPI_MCA_coll_tuned_allreduce_algorithm="$algo" "$MPIRUN" -np "$np" "$BIN/exchange_parts" "${XB[@]}" --parts allreduce
  done
done
for hb in 256:100 1024:1000; do
  SC=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 2)
  for np in 1 2 4 8 16; do
    step "scal_cpu_${hb/:/_}_np$np" 60 "${KITENV[@]}" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$MPIRUN" -np "$np" \
      "$BIN/nn_train" "${SC[@]}" --device cpu --train-size 20000 --report "$LOGS/scal_cpu_${hb/:/_}_np$np.json"
  done
  for np in 1 2 4; do
    step "scal_gpu_${hb/:/_}_np$np" 60 "${KITENV[@]}" OMP_NUM_THREADS=1 "$MPIRUN" -np "$np" "$BIN/nn_train" "${SC[@]}" \
      --epochs 4 --report "$LOGS/scal_gpu_${hb/:/_}_np$np.json"
  done
done
# 0s. The scaling model's GPU parts (bench/scaling_model.py, docs/scaling.md; `bench/scaling_fit.py
#     fit --gpu-session LOGS` refits from these files): one rank's step at the per-rank batch
#     b = ceil(B/P) of P = 1..64 at the four shapes (scalcal_gpu_H_B_bb.json; the fused step a rank
#     among P runs: --persistent off, PDL off as in the trainer's default), the separate-kernel
#     step of a model-parallel rank at (ceil(H/P), B) (scalcal_unfused_*), pinned copies, the host's
#     reduction and the host all-reduce at 2-8 ranks from 8 bytes to 3.26 MB (scalcal_parts.csv),
#     and ranks sharing the GPU at the shapes not yet run that way (scalcal_share_*). About 50 s.
SCAL_BYTES=8,4096,65536,262144,814120,1628240,3256360
step scalcal_parts_np1 30 "${ONE[@]}" "$BIN/exchange_parts" --bytes "$SCAL_BYTES" --repeats 100 --parts copies,reduce \
  --csv "$LOGS/scalcal_parts.csv"
for np in 2 4 8; do
  step "scalcal_allreduce_np$np" 30 "${KITENV[@]}" OMP_NUM_THREADS=1 "$MPIRUN" -np "$np" "$BIN/exchange_parts" \
    --bytes "$SCAL_BYTES" --repeats 100 --parts allreduce --csv "$LOGS/scalcal_parts.csv"
done
for hb in 256:100 512:800 1024:1000 1024:3000; do
  h=${hb%:*} b=${hb#*:}
  for p in 1 2 4 8 16 32 64; do
    s=$(((b + p - 1) / p)) n=$((((b + p - 1) / p) * 2000 / 9 + 1))  # about 200 steps an epoch
    [ "$n" -gt 54000 ] && n=0
    step "scalcal_gpu_${h}_${b}_b$s" 20 "${ONE[@]}" NN_PDL=0 "$BIN/nn_train" --data data/current --hidden "$h" --batch "$s" \
      --lr 0.1 --reg 1e-4 --epochs 3 --train-size "$n" --test-size 1000 --persistent off \
      --report "$LOGS/scalcal_gpu_${h}_${b}_b$s.json"
  done
done
for hb in 1024:1000 1024:3000; do
  h=${hb%:*} b=${hb#*:}
  for p in 2 8 64; do
    hp=$(((h + p - 1) / p))
    step "scalcal_unfused_${hp}_b$b" 20 "${ONE[@]}" "$BIN/nn_train" --data data/current --hidden "$hp" --batch "$b" \
      --lr 0.1 --reg 1e-4 --epochs 3 --test-size 1000 --fused off --report "$LOGS/scalcal_unfused_${hp}_b$b.json"
  done
done
for run in 512:800:2 1024:3000:2 1024:3000:4; do
  IFS=: read -r h b np <<<"$run"
  step "scalcal_share_${h}_${b}_np$np" 30 "${KITENV[@]}" OMP_NUM_THREADS=1 "$MPIRUN" -np "$np" "$BIN/nn_train" \
    --data data/current --hidden "$h" --batch "$b" --lr 0.1 --reg 1e-4 --epochs 3 --test-size 1000 \
    --report "$LOGS/scalcal_share_${h}_${b}_np$np.json"
done
# 0l. The step's latency: what a kernel node of a replayed graph, a programmatic-dependent-launch
#     edge and a grid barrier cost on this GPU (bench/gpu/launch_latency.cu), and each kernel's time in
#     3 fused steps at 256:100 (launched one by one: --no-graph), with the epoch time beside it.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
step latency_probe 60 bash -c 'nvcc -arch=sm_90 -O2 -o /tmp/launch_latency bench/gpu/launch_latency.cu && /tmp/launch_latency'
if [ -n "$NCU" ]; then
  step ncu_fused_256_100 60 "${ONE[@]}" "$NCU" --clock-control none --csv \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread \
    --launch-skip 60 --launch-count 15 "$BIN/nn_train" --data data/current --hidden 256 --batch 100 \
    --lr 0.5 --reg 1e-4 --epochs 1 --train-size 5000 --no-graph
fi
for hb in 256:100 512:800; do
  L=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  step "lat_ours_${hb/:/_}" 30 "${ONE[@]}" "$BIN/nn_train" "${L[@]}" --metrics "$LOGS/lat_ours_${hb/:/_}.csv"
  step "lat_ours_nograph_${hb/:/_}" 30 "${ONE[@]}" "$BIN/nn_train" "${L[@]}" --no-graph --metrics "$LOGS/lat_ours_nograph_${hb/:/_}.csv"
done
TF32_TESTS='Tf32*:Wgmma*:SimWmma*:AllVariants/GemmVariant.*/tf32x3:GemmGather.*Tf32*'
# 0w. Variant 5's wgmma kernel (kernels/gemm/5_tf32x3_wgmma.cu): its tests (Wgmma.DescriptorAndFragmentAreThePtxLayout
#     checks the descriptor and fragment layouts alone: if it fails, its message says which
#     elements are wrong); 4096^3 and the trainer's big shapes against cuBLAS and the mma.sync
#     kernel (the wgmma rows of gemm_bench --tf32); --gemm 5 with the wgmma kernel in the plan
#     (NN_TF32_WGMMA=1) verified at 1 and 2 ranks and timed at 1024:3000 beside the mma.sync plan
#     and JAX's scan; memcheck and racecheck on its tests.
step wgmma_tests 60 "${ONE[@]}" "$BIN/nn_tests" --gtest_filter='Wgmma*:Tf32x3.BadArguments*'
step wgmma_gemm_1024_3000 90 "${KITENV[@]}" "$BIN/gemm_bench" --variants 0,5 --tf32 --splits 1,2,3 \
  --hidden 1024 --batch 3000 --repeats 20 --csv "$LOGS/wgmma_gemm_1024_3000.csv"
step wgmma_verify_np1 60 "${ONE[@]}" NN_TF32_WGMMA=1 "$BIN/nn_train" "${TRAIN[@]}" --gemm 5 --epochs 1 --verify
step wgmma_verify_np2 60 "${KITENV[@]}" NN_TF32_WGMMA=1 "$MPIRUN" -np 2 "$BIN/nn_train" "${TRAIN[@]}" --gemm 5 \
  --epochs 1 --verify
W3=(--data data/current --hidden 1024 --batch 3000 --lr 0.5 --reg 1e-4 --epochs 5)
step wgmma_train5_1024_3000 45 "${ONE[@]}" NN_TF32_WGMMA=1 "$BIN/nn_train" "${W3[@]}" --gemm 5 \
  --metrics "$LOGS/wgmma_train5.csv"
step wgmma_mma_train5_1024_3000 45 "${ONE[@]}" "$BIN/nn_train" "${W3[@]}" --gemm 5 --metrics "$LOGS/wgmma_mma_train5.csv"
step wgmma_jax_scan_1024_3000 60 "$PY" bench/peer_jax.py "${W3[@]}" --device gpu --mode scan
if [ -n "$CS" ]; then
  for tool in memcheck racecheck; do
    step "wgmma_sanitize_$tool" 60 "${ONE[@]}" "$CS" --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$BIN/nn_tests" --gtest_filter='Wgmma*'
  done
fi
#    The machine's limits first (bench/tc_peak.cu): WMMA TF32 MMAs a second with 1-8
#    independent accumulators a warp, and FP32 FMAs on the CUDA cores.
[ -x "$BIN/tc_peak" ] && step tc_peak 60 "${KITENV[@]}" "$BIN/tc_peak" --csv "$LOGS/tc_peak.csv"
step tf32_tests 60 "${ONE[@]}" "$BIN/nn_tests" --gtest_filter="$TF32_TESTS"
step tf32_gemm_1024_3000 90 "${KITENV[@]}" "$BIN/gemm_bench" --variants 0,4,5 --tf32 --splits 1,2,3,4,6 \
  --hidden 1024 --batch 3000 --repeats 20 --csv "$LOGS/gemm_tf32_1024_3000.csv"
step tf32_gemm_1024_1000 90 "${KITENV[@]}" "$BIN/gemm_bench" --variants 0,4,5 --tf32 --splits 1,2,3,4,6 \
  --hidden 1024 --batch 1000 --no-big --repeats 20 --csv "$LOGS/gemm_tf32_1024_1000.csv"
step tf32_gemm_256_100 45 "${KITENV[@]}" "$BIN/gemm_bench" --variants 0,4,5 --tf32 --hidden 256 --batch 100 \
  --no-big --repeats 20 --csv "$LOGS/gemm_tf32_256_100.csv"
step tf32_verify_np1 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --gemm 5 --epochs 1 --verify
step tf32_verify_np2 60 "${TWO[@]}" "$BIN/nn_train" "${TRAIN[@]}" --gemm 5 --epochs 1 --verify
step tf32_verify4_np1 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --gemm 4 --epochs 1 --verify
T3=(--data data/current --hidden 1024 --batch 3000 --lr 0.5 --reg 1e-4 --epochs 5)
step tf32_train5_1024_3000 45 "${ONE[@]}" "$BIN/nn_train" "${T3[@]}" --gemm 5 --metrics "$LOGS/tf32_train5.csv"
step tf32_train4_1024_3000 45 "${ONE[@]}" "$BIN/nn_train" "${T3[@]}" --gemm 4 --metrics "$LOGS/tf32_train4.csv"
step tf32_jax_scan_1024_3000 60 "$PY" bench/peer_jax.py "${T3[@]}" --device gpu --mode scan
step tf32_train5b_1024_3000 45 "${ONE[@]}" "$BIN/nn_train" "${T3[@]}" --gemm 5 --metrics "$LOGS/tf32_train5b.csv"
for hb in 1024:1000 512:800; do
  S2=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  step "tf32_train5_${hb/:/_}" 45 "${ONE[@]}" "$BIN/nn_train" "${S2[@]}" --gemm 5 --metrics "$LOGS/tf32_train5_${hb/:/_}.csv"
  step "tf32_train4_${hb/:/_}" 45 "${ONE[@]}" "$BIN/nn_train" "${S2[@]}" --gemm 4 --metrics "$LOGS/tf32_train4_${hb/:/_}.csv"
done
# 0b. Nsight Compute (ncu), where the machine has it: each kernel's time in 3 steps of the
#     fused and the separate step at 1024:1000 (launched one by one: --no-graph), and variant
#     5's kernel at 4096^3 (speed of light, occupancy, warp stalls, the tensor pipe).
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  T2=(--data data/current --hidden 1024 --batch 1000 --lr 0.5 --reg 1e-4 --epochs 1 --train-size 20000 --no-graph)
  NCUM=(--clock-control none --csv --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread)
  step ncu_fused_1024_1000 60 "${ONE[@]}" "$NCU" "${NCUM[@]}" --launch-skip 40 --launch-count 12 \
    "$BIN/nn_train" "${T2[@]}"
  step ncu_unfused_1024_1000 60 "${ONE[@]}" "$NCU" "${NCUM[@]}" --launch-skip 40 --launch-count 36 \
    "$BIN/nn_train" "${T2[@]}" --fused off
  step ncu_tf32_4096 60 "${KITENV[@]}" "$NCU" --clock-control none --kernel-name regex:tf32x3 --launch-skip 3 \
    --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    "$BIN/gemm_bench" --variants 5 --only square4096 --repeats 1
fi
if [ -n "$CS" ]; then
  for tool in memcheck racecheck initcheck synccheck; do
    step "tf32_sanitize_$tool" 60 "${ONE[@]}" "$CS" --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$BIN/nn_tests" --gtest_filter="$TF32_TESTS"
  done
fi
# 1. The gtest suite on the GPU, one rank (every kernel test, the trainer's GPU paths).
step tests_np1 150 "${ONE[@]}" "$BIN/nn_tests"
# 2. Training on the GPU, replayed on the CPU reference (--verify), and timed.
step train_verify 90 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 2 --verify --metrics "$LOGS/train_verify.csv"
step train_epochs 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 4 --metrics "$LOGS/ours_gpu.csv" --report "$LOGS/ours_gpu.json"
# 3. Ours at a second, GEMM-heavier shape, and ours with CUDA Graphs (PyTorch eager at these
#    shapes: the peer comparison below).
step train_graph 60 "${ONE[@]}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 4 --graph --metrics "$LOGS/ours_gpu_graph.csv"
BIG=(--data data/current --hidden 1024 --batch 1000 --lr 0.5 --reg 1e-4 --epochs 4)
step train_big 60 "${ONE[@]}" "$BIN/nn_train" "${BIG[@]}" --metrics "$LOGS/ours_gpu_big.csv"
step train_big_cublas 60 "${ONE[@]}" "$BIN/nn_train" "${BIG[@]}" --gemm 0 --metrics "$LOGS/ours_gpu_big_cublas.csv"
#    The CPU peer comparison's shapes (make peer), 512:800 and 1024:3000.
for hb in 512:800 1024:3000; do
  SHAPE=(--data data/current --hidden "${hb%:*}" --batch "${hb#*:}" --lr 0.5 --reg 1e-4 --epochs 4)
  step "train_${hb/:/_}" 60 "${ONE[@]}" "$BIN/nn_train" "${SHAPE[@]}" --metrics "$LOGS/ours_gpu_${hb/:/_}.csv"
done
# 4. The GEMM lab: every variant validated against cuBLAS, then timed (and variant 4's tile configs).
step gemm_bench 100 "${KITENV[@]}" "$BIN/gemm_bench" --configs --repeats 30 --csv "$LOGS/gemm_gpu.csv"
#    Every configuration at 1-16 k-slices at the trainer's shapes (warptile_plan's input).
step gemm_splits 100 "${KITENV[@]}" "$BIN/gemm_bench" --variants 0,4 --configs --splits 1,2,3,4,6,8,12,16 \
  --no-big --repeats 20 --csv "$LOGS/gemm_splits.csv"
#    The same sweep at the other shapes the trainer is timed at (H = 1024 with B = 1000 and 3000,
#    H = 256 with B = 100), so the plan is checked beyond H = 512.
for hb in 1024:1000 1024:3000 256:100; do
  step "gemm_splits_${hb/:/_}" 100 "${KITENV[@]}" "$BIN/gemm_bench" --variants 0,4 --configs \
    --splits 1,2,3,4,6,8,12,16 --hidden "${hb%:*}" --batch "${hb#*:}" --no-big --repeats 20 \
    --csv "$LOGS/gemm_splits_${hb/:/_}.csv"
done
# 5. Two ranks on one GPU: the suite, then the three strategies with --verify.
step tests_np2 120 "${TWO[@]}" "$BIN/nn_tests"
step train_ps_np2 45 "${TWO[@]}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 1 --strategy ps --verify
step train_model_np2 45 "${TWO[@]}" "$BIN/nn_train" "${TRAIN[@]}" --epochs 1 --strategy model --verify
# 6. compute-sanitizer, one rank: memcheck on the whole suite (its tests provoke API errors on
#    purpose, so those are not counted: --report-api-errors no); racecheck, initcheck and
#    synccheck on the kernel, GEMM and training tests (racecheck on the whole suite takes over
#    2 minutes on an H200).
if [ -n "$CS" ]; then
  KERNEL_TESTS='AllVariants/*:Gemm*:Ops*:Train*'
  step sanitize_memcheck 120 "${ONE[@]}" "$CS" --tool memcheck --error-exitcode 99 --report-api-errors no --print-limit 20 "$BIN/nn_tests"
  step sanitize_racecheck 120 "${ONE[@]}" "$CS" --tool racecheck --error-exitcode 99 --print-limit 20 "$BIN/nn_tests" --gtest_filter="$KERNEL_TESTS"
  step sanitize_initcheck 90 "${ONE[@]}" "$CS" --tool initcheck --error-exitcode 99 --print-limit 20 "$BIN/nn_tests" --gtest_filter="$KERNEL_TESTS"
  step sanitize_synccheck 90 "${ONE[@]}" "$CS" --tool synccheck --error-exitcode 99 --print-limit 20 "$BIN/nn_tests" --gtest_filter="$KERNEL_TESTS"
  # make sanitize-gpu's own script (tests/cuda/compute_sanitizer.sh) through the kit's mpirun,
  # on the elementwise kernel tests at 1 and 2 ranks.
  step sanitize_script 120 "${KITENV[@]}" COMPUTE_SANITIZER="$CS" CS_NP="1 2" CS_FILTER='Ops*' \
    OUT="$LOGS/cs" bash tests/cuda/compute_sanitizer.sh "$BIN/nn_tests"
elif [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" sanitize"* ]]; then
  rows+=("sanitize               skipped     -  compute-sanitizer not found")
fi

# 7. PyTorch 2 compiled (Inductor), then with CUDA Graphs (mode reduce-overhead), the fairest
#    peers to ours and to ours with --graph. Compilation falls in epoch 1, left out of the median.
step torch_compile 120 "$PY" bench/peer_torch.py "${TRAIN[@]}" --epochs 4 --device cuda --compile
step torch_graphs 120 "$PY" bench/peer_torch.py "${TRAIN[@]}" --epochs 4 --device cuda --compile-mode reduce-overhead
step torch_graphs_big 120 "$PY" bench/peer_torch.py "${BIG[@]}" --device cuda --compile-mode reduce-overhead

for w in "${wanted[@]}"; do  # a misspelt name would otherwise run nothing, silently
  hit=
  for name in "${known[@]}"; do [[ $name == $w ]] && { hit=1; break; }; done
  [ -n "$hit" ] || rows+=("$(printf '%-28s %-8s %5s  %s' "$w" unknown - "no such step")")
done

{
  echo "== gpu_session: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%F), $((SECONDS - T0)) s"
  printf '%-28s %-8s %5s  %s\n' step status s found
  printf '%s\n' "${rows[@]}"
} | tee "$LOGS/summary.txt"
cp "$LOGS/summary.txt" "$OUT/" && tar -C "$LOGS" -czf "$OUT/logs.tgz" .
