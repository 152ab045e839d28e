#!/usr/bin/env bash
# Every --device cpu thread on a core of its own (issue 24, part 1), end to end:
#   - slurm/mpirun.sh's placement, with a stand-in launcher that prints the options it gets:
#     --map-by slot:PE=t for t threads per rank when the ranks fit in this host's cores,
#     SLURM_CPUS_PER_TASK inside a job, nothing when the caller placed the ranks itself, when
#     t = 1, when they do not fit, or for a launcher that is not Open MPI's;
#   - 1 rank x 2 BLAS threads through slurm/mpirun.sh: the header says 2 threads, nothing is
#     warned, and the training uses both cores: CPU time / wall time >= 1.6 (RATIO_MIN) over
#     epochs 2..4 (the trainer's `cores:` line, from the kernel's CPU clock of the process),
#     and >= 1.2 (WHOLE_MIN) over the whole launch as the shell's `time` sees it (loading the
#     data, one thread's work, included; a 4-epoch minus 1-epoch difference was tried and is
#     too noisy now that an epoch takes a fraction of a second);
#   - the same through plain mpirun, which binds the rank to one core: the rank runs 1 thread,
#     says so in exactly one warning line that names the fix, and CPU / wall (launch and
#     cores line) stays < 1.3;
#   - 2 ranks x 2 threads on a 2-core host: the warning says the node lacks the cores;
#   - OMP_PROC_BIND=true OMP_PLACES=cores, one rank without a launcher, nothing asked: libgomp
#     binds the main thread to one core before main, yet with oneDNN the rank runs a thread
#     per core of its OpenMP places (its OpenMP team spreads over them), warns nothing, and
#     keeps >= 1.6 cores busy; with OpenBLAS (a USE_DOUBLE=1 build), whose threads stay on the
#     one place, it runs 1 thread and says why; a build without OpenMP (DNNL=0) is not bound.
# The timed cases need 2 cores, and the placement cases one hardware thread per core (the
# script maps physical cores; nproc counts hardware threads); elsewhere they are skipped (said so).
#
#   tests/cli/cores.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), NN_MPIRUN (the real mpirun, default mpirun on PATH),
#   CORE_ARGS (training options of the timed runs, a few seconds each here), RATIO_MIN (1.6),
#   WHOLE_MIN (1.2).
# Prints "ok ..."/"FAIL ..." and "cores: N passed, M failed".
set -uo pipefail
export LC_ALL=C
if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$1 data=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
wrapper=${MPIRUN:-$root/slurm/mpirun.sh}
real_mpirun=${NN_MPIRUN:-mpirun}
read -r -a args <<<"${CORE_ARGS:---hidden 1024 --batch 1000 --test-size 1000}"
ratio_min=${RATIO_MIN:-1.6}   # CPU/wall over the epochs
whole_min=${WHOLE_MIN:-1.2}   # over the whole launch, the loading included
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS SLURM_CPUS_PER_TASK SLURM_JOB_ID
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-cores.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
cores=$(nproc)
tpc=$(lscpu 2>/dev/null | awk -F: '/^Thread\(s\) per core/ {gsub(/ /, "", $2); print $2}')
tpc=${tpc:-1}
if [ "$tpc" != 1 ]; then
  echo "skip the cases on this host's cores: $tpc hardware threads per core (they assume 1)"
  cores=1
fi

# ---- slurm/mpirun.sh's placement, with a stand-in launcher ----------------------------------
cat >"$work/fake-mpirun" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { echo "mpirun (Open MPI) 4.1.4"; exit 0; }
echo "$*"
EOF
cat >"$work/other-mpirun" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { echo "HYDRA build details: MPICH"; exit 0; }
echo "$*"
EOF
chmod +x "$work/fake-mpirun" "$work/other-mpirun"
# placed WANT ENV... -- ARGS...: the options slurm/mpirun.sh puts before ARGS are WANT.
placed() {
  local want=$1 got
  shift
  local -a envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  got=$(env NN_MPIRUN="$work/fake-mpirun" "${envs[@]}" "$wrapper" "$@")
  got=${got%"$*"}
  got=${got% }
  if [ "$got" = "$want" ]; then
    ok "placement: ${envs[*]} mpirun.sh $*  ->  ${want:-(nothing added)}"
  else
    fail "placement: ${envs[*]} mpirun.sh $*: added '$got', expected '$want'"
  fi
}
if [ "$cores" -ge 2 ]; then
  placed "--map-by slot:PE=$cores" -- -np 1 prog
  placed "--map-by slot:PE=2" OPENBLAS_NUM_THREADS=2 -- -np 1 prog
  placed "--map-by slot:PE=2" OMP_NUM_THREADS=2 -- --oversubscribe -x OMP_NUM_THREADS -np 1 prog --np 9
  placed "--map-by slot:PE=$cores" -- -np 1 -s prog --np 9 # -s (--preload-binary) takes no value
  placed "" -- --use-hwthread-cpus -np 1 prog
  placed "" -- --bind-to none -np 1 prog
  placed "" -- --map-by core -np 1 prog
  placed "" OMPI_MCA_hwloc_base_binding_policy=none -- -np 1 prog
  placed "" OPENBLAS_NUM_THREADS=1 -- -np 1 prog
  placed "" OPENBLAS_NUM_THREADS=$((cores + 1)) -- -np 1 prog
  placed "" -- prog # no -np: Open MPI fills the slots, one rank per core
else
  echo "skip placement cases that need 2 cores (this machine has $cores)"
fi
placed "" -- -np $((cores + 1)) prog
if [ "$tpc" = 1 ]; then
  placed "--map-by slot:PE=4" SLURM_JOB_ID=1 SLURM_CPUS_PER_TASK=4 OPENBLAS_NUM_THREADS=2 -- -np 8 prog
else
  placed "--map-by slot:PE=4 --use-hwthread-cpus" SLURM_JOB_ID=1 SLURM_CPUS_PER_TASK=4 -- -np 8 prog
fi
placed "" SLURM_JOB_ID=1 -- -np 8 prog
placed "" OMP_NUM_THREADS=3 -- -H a,b -np 2 prog # hosts named: their cores are not known here
got=$(NN_MPIRUN="$work/other-mpirun" OPENBLAS_NUM_THREADS=2 "$wrapper" -np 1 prog)
if [ "$got" = "-np 1 prog" ]; then
  ok "placement: a launcher that is not Open MPI's gets the options as they are"
else
  fail "placement: MPICH's launcher got '$got'"
fi

# ---- timed runs -------------------------------------------------------------------------------
# run NAME ENV... -- LAUNCHER...: runs nn_train with $args, keeps its output in $work/NAME.log,
# the launch's wall and CPU seconds (children included) in $wall and $cpu, their ratio in $ratio.
ratio='' wall='' cpu=''
run() {
  local name=$1 t0 t1 t2
  shift
  local -a envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  TIMEFORMAT='%R %U %S'
  { time env "${envs[@]}" "$@" "$train" --data "$data" --device cpu "${args[@]}" >"$work/$name.log" 2>&1; } 2>"$work/$name.time"
  read -r t0 t1 t2 < <(tail -n 1 "$work/$name.time")
  wall=$t0 cpu=$(awk -v u="$t1" -v s="$t2" 'BEGIN { print u + s }')
  ratio=$(awk -v w="$t0" -v c="$cpu" 'BEGIN { printf "%.2f", c / (w > 0 ? w : 1) }')
}
has() { grep -qE -- "$2" "$work/$1.log"; }
warnings() { grep -c '^nn_train: warning:' "$work/$1.log"; }
if [ "$cores" -ge 2 ]; then
  args+=(--epochs 4)
  run launcher OPENBLAS_NUM_THREADS=2 -- "$wrapper" -np 1
  if has launcher '^test precision:' && has launcher '2 BLAS threads each \(OPENBLAS_NUM_THREADS\)\)$' &&
    [ "$(warnings launcher)" = 0 ]; then
    ok "slurm/mpirun.sh -np 1, OPENBLAS_NUM_THREADS=2: the rank runs 2 threads, no warning"
  else
    fail "slurm/mpirun.sh -np 1, OPENBLAS_NUM_THREADS=2: $(grep -E 'ranks on|warning|error' "$work/launcher.log" | head -n 3)"
  fi
  # Over the whole launch, as the shell's `time` sees it (the single-threaded loading included).
  if awk -v r="$ratio" -v m="$whole_min" 'BEGIN { exit !(r >= m) }'; then
    ok "slurm/mpirun.sh -np 1 x 2 threads: CPU/wall over the whole launch = $ratio >= $whole_min"
  else
    fail "slurm/mpirun.sh -np 1 x 2 threads: CPU/wall over the whole launch = $ratio < $whole_min ($cpu CPU-s in $wall s)"
  fi
  # Over the epochs alone: the trainer's `cores: rank 0 kept X cores busy over epochs 2..4`,
  # from the kernel's CPU clock of the process (CLOCK_PROCESS_CPUTIME_ID) and the wall clock.
  busy=$(awk '/^cores: rank 0 kept/ { print $5 }' "$work/launcher.log")
  if awk -v r="${busy:-0}" -v m="$ratio_min" 'BEGIN { exit !(r >= m) }'; then
    ok "slurm/mpirun.sh -np 1 x 2 threads uses both cores: rank 0 kept $busy cores busy over epochs 2..4 (>= $ratio_min)"
  else
    fail "nn_train's cores line: '${busy:-missing}' < $ratio_min: $(grep '^cores:' "$work/launcher.log")"
  fi

  run plain OPENBLAS_NUM_THREADS=2 OMPI_MCA_orte_tmpdir_base="$work" -- "$real_mpirun" -np 1
  line=$(grep '^nn_train: warning:' "$work/plain.log")
  if has plain '^test precision:' && [ "$(warnings plain)" = 1 ] &&
    [[ $line == *"rank 0 on "*" runs 1 BLAS thread (OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask)"* ]] &&
    [[ $line == *"slurm/mpirun.sh (one host), mpirun --map-by slot:PE=2 or srun --cpus-per-task=2" ]]; then
    ok "plain mpirun -np 1, OPENBLAS_NUM_THREADS=2: one warning line with the fix: $line"
  else
    fail "plain mpirun -np 1, OPENBLAS_NUM_THREADS=2: expected one warning line with the fix, got: $(grep -E 'ranks on|warning|error' "$work/plain.log" | head -n 3)"
  fi
  busy=$(awk '/^cores: rank 0 kept/ { print $5 }' "$work/plain.log")
  if has plain '1 BLAS thread each \(OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask\)\)$' &&
    awk -v r="$ratio" -v b="${busy:-9}" 'BEGIN { exit !(r < 1.3 && b < 1.3) }'; then
    ok "plain mpirun: the rank runs 1 thread on its one core (CPU/wall = $ratio; its cores line: $busy)"
  else
    fail "plain mpirun: header, CPU/wall ($ratio) or cores line (${busy:-missing}) not that of one thread: $(grep 'ranks on' "$work/plain.log")"
  fi

  run bind OMP_PROC_BIND=true OMP_PLACES=cores --
  busy=$(awk '/^cores: rank 0 kept/ { print $5 }' "$work/bind.log")
  if has bind "OpenBLAS's threads stay there"; then  # OpenBLAS under libgomp's binding: 1 thread, said why
    if has bind '^test precision:' && has bind '1 BLAS thread each' && [ "$(warnings bind)" = 0 ]; then
      ok "OMP_PROC_BIND=true OMP_PLACES=cores with OpenBLAS: 1 thread, and the header says why"
    else
      fail "OMP_PROC_BIND=true OMP_PLACES=cores with OpenBLAS: $(grep -E 'ranks on|warning|error' "$work/bind.log" | head -n 3)"
    fi
  elif has bind '^test precision:' && has bind "$cores BLAS threads each" && [ "$(warnings bind)" = 0 ] &&
    { ! has bind 'host GEMM oneDNN' || has bind 'in this rank.s OpenMP places \(OMP_PROC_BIND\)\)\)$'; } &&
    awk -v r="${busy:-0}" -v m="$ratio_min" 'BEGIN { exit !(r >= m) }'; then
    ok "OMP_PROC_BIND=true OMP_PLACES=cores, no launcher: $cores threads, $busy cores busy"
  else
    fail "OMP_PROC_BIND=true OMP_PLACES=cores: cores line '${busy:-missing}': $(grep -E 'ranks on|warning|error' "$work/bind.log" | head -n 3)"
  fi
else
  echo "skip the timed cases: they need 2 cores (this machine has $cores)"
fi

if [ "$cores" = 2 ]; then
  args=(--hidden 16 --batch 100 --epochs 1 --train-size 1000 --test-size 100)
  run node OPENBLAS_NUM_THREADS=2 -- "$wrapper" -np 2
  line=$(grep '^nn_train: warning:' "$work/node.log")
  if has node '^test precision:' && [ "$(warnings node)" = 1 ] &&
    [[ $line == *"; so do 1 more rank: "*" has 2 cores for 2 ranks x 2 threads: run at most 1 rank per node there, or ask for 1 thread" ]]; then
    ok "2 ranks x 2 threads on 2 cores: one warning line: the node lacks the cores"
  else
    fail "2 ranks x 2 threads on 2 cores: $(grep -E 'ranks on|warning|error' "$work/node.log" | head -n 3)"
  fi
fi

echo "cores: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
