#!/usr/bin/env bash
# Every --device cpu thread on a core of its own, end to end:
#   - slurm/mpirun.sh's placement, with a stand-in launcher that prints the options it gets:
#     --map-by slot:PE=t for t threads per rank when the ranks fit in this host's cores,
#     SLURM_CPUS_PER_TASK inside a job, nothing when the caller placed the ranks itself, when
#     t = 1, when they do not fit, or for a launcher that is not Open MPI's;
#   - 1 rank x 2 BLAS threads through slurm/mpirun.sh: the header says 2 threads, nothing is
#     warned, the rank's affinity mask holds 2 cores, and 2 of its threads compute (each has a
#     good share of the CPU time the busiest one has: /proc/PID/task/TID/stat), on 2 CPUs;
#   - the same through plain mpirun, which binds the rank to one core: the rank runs 1 thread,
#     says so in exactly one warning line that names the fix, its mask holds 1 core and 1
#     thread computes;
#   - 2 ranks x 2 threads on a 2-core host: the warning says the node lacks the cores;
#   - OMP_PROC_BIND=true OMP_PLACES=cores, one rank without a launcher, nothing asked: libgomp
#     binds the main thread to one core before main, yet with oneDNN the rank runs a thread
#     per core of its OpenMP places (its OpenMP team spreads over them: that many threads
#     compute, each bound to a core of its own), warns nothing; with OpenBLAS (a USE_DOUBLE=1
#     build), whose threads stay on the one place, it runs 1 thread and says why; a build
#     without OpenMP (DNNL=0) is not bound.
# No check uses CPU time / wall time or any other rate: a busy host changes how long the runs
# take, not which threads work or where they may run (docs/testing.md#timing-sensitive-checks).
# The trainer's own `cores:` line (CPU / wall over epochs 2..4) is printed, for information.
# The runs need 2 cores, and the placement cases one hardware thread per core (the script
# maps physical cores; nproc counts hardware threads); elsewhere they are skipped (said so).
#
#   tests/cli/cores.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), NN_MPIRUN (the real mpirun, default mpirun on PATH),
#   CORE_ARGS (training options of the runs, a few seconds each here), WORK_SHARE (25: the %
#   of the busiest thread's CPU time that makes a thread a computing one).
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

# ---- runs, each watched while it trains ------------------------------------------------------
# What these prove -- the rank runs 2 threads that both compute, on 2 cores -- is read from the
# rank's process while it trains, not from CPU time / wall time (which a busy host lowers):
#   - each thread's own CPU time (/proc/PID/task/TID/stat, utime + stime), which counts the work
#     the thread did whatever else runs on the host: a thread "computes" when it has at least
#     WORK_SHARE (25) % of the busiest thread's CPU time (and >= 0.1 s); BLAS threads split
#     the GEMMs about evenly, a helper thread (MPI, the watchdog) has next to none;
#   - each computing thread's affinity (Cpus_allowed_list in /proc/PID/task/TID/status), and
#     the CPUs of all of them together: 2 threads that may only share one core prove nothing.
# run NAME ENV... -- LAUNCHER...: runs nn_train with $args in the background, its output in
# $work/NAME.log, samples its rank's threads every 0.1 s until it ends; sets $rc, $computing
# (the computing threads), $cpus (how many CPUs their affinity masks cover together), $threads
# (the threads seen), $mask (the main thread's Cpus_allowed_list) and $detail (per thread:
# TID:CPU-seconds@CPUs).
work_share=${WORK_SHARE:-25}
train_real=$(readlink -f "$train")
rc='' computing='' cpus='' threads='' mask='' detail=''
# Count the CPUs of a list such as 0-1,4.
cpu_count() {
  local n=0 part a b
  local -a parts
  IFS=, read -r -a parts <<<"$1"
  for part in "${parts[@]}"; do
    a=${part%-*} b=${part#*-}
    [ -n "$a" ] && n=$((n + b - a + 1))
  done
  echo "$n"
}
# The process of this run: our trainer's exe, the run's tag in its environment.
find_rank() {
  local f p
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    [ "/proc/$p/exe" -ef "$train_real" ] || continue  # (no process started per pid)
    tr '\0' '\n' <"$f" 2>/dev/null | grep -qx "NN_CORES_TAG=$1" && { echo "$p"; return 0; }
  done
  return 1
}
run() {
  local name=$1 tag=$RANDOM$RANDOM launched pid='' t line rest key
  shift
  local -a envs=() f
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local -A ticks=() allowed=()
  env NN_CORES_TAG="$tag" "${envs[@]}" "$@" "$train" --data "$data" --device cpu "${args[@]}" >"$work/$name.log" 2>&1 </dev/null &
  launched=$!
  while kill -0 "$launched" 2>/dev/null; do
    [ -n "$pid" ] || pid=$(find_rank "$tag")
    if [ -n "$pid" ]; then
      for t in /proc/"$pid"/task/[0-9]*; do
        { read -r line <"$t/stat"; } 2>/dev/null || continue
        rest=${line##*) }
        read -r -a f <<<"$rest"
        ticks[${t##*/}]=$((f[11] + f[12]))
        { while read -r key line; do
          [ "$key" = Cpus_allowed_list: ] && { allowed[${t##*/}]=$line; break; }
        done <"$t/status"; } 2>/dev/null
      done
    fi
    sleep 0.1
  done
  wait "$launched"
  rc=$?
  local hz max=0 tid list='' all=() c
  hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
  for tid in "${!ticks[@]}"; do [ "${ticks[$tid]}" -gt "$max" ] && max=${ticks[$tid]}; done
  computing=0 threads=${#ticks[@]} mask=${allowed[$pid]:-?} detail=''
  for tid in $(printf '%s\n' "${!ticks[@]}" | sort -n); do
    detail+="$tid:$(awk -v t="${ticks[$tid]}" -v h="$hz" 'BEGIN { printf "%.1f", t / h }')s@${allowed[$tid]:-?} "
    if [ "${ticks[$tid]}" -ge $((max * work_share / 100)) ] && [ "${ticks[$tid]}" -ge $((hz / 10)) ]; then
      computing=$((computing + 1))
      list+=${list:+,}${allowed[$tid]:-}
    fi
  done
  # The CPUs the computing threads' masks cover together.
  for c in $(IFS=,; for part in $list; do [ -n "$part" ] && seq "${part%-*}" "${part#*-}"; done | sort -un); do all+=("$c"); done
  cpus=${#all[@]}
  detail=${detail% }
}
has() { grep -qE -- "$2" "$work/$1.log"; }
warnings() { grep -c '^nn_train: warning:' "$work/$1.log"; }
cores_line() { grep '^cores:' "$work/$1.log" | sed 's/^cores: //'; }
if [ "$cores" -ge 2 ]; then
  args+=(--epochs 4)
  run launcher OPENBLAS_NUM_THREADS=2 -- "$wrapper" -np 1
  if [ "$rc" = 0 ] && has launcher '^test precision:' && has launcher '2 BLAS threads each \(OPENBLAS_NUM_THREADS\)\)$' &&
    [ "$(warnings launcher)" = 0 ]; then
    ok "slurm/mpirun.sh -np 1, OPENBLAS_NUM_THREADS=2: the header says 2 threads, no warning"
  else
    fail "slurm/mpirun.sh -np 1, OPENBLAS_NUM_THREADS=2 (exit $rc): $(grep -E 'ranks on|warning|error' "$work/launcher.log" | head -n 3)"
  fi
  if [ "$(cpu_count "$mask")" -ge 2 ] && [ "$computing" -ge 2 ] && [ "$cpus" -ge 2 ]; then
    ok "slurm/mpirun.sh -np 1 x 2 threads uses both cores: affinity $mask, $computing threads compute, on $cpus CPUs (threads TID:CPU-s@CPUs: $detail; for information: $(cores_line launcher))"
  else
    fail "slurm/mpirun.sh -np 1 x 2 threads: affinity '$mask', $computing computing thread(s) on $cpus CPU(s), expected 2+ on 2+ CPUs (of $threads threads, TID:CPU-s@CPUs: $detail)"
  fi

  run plain OPENBLAS_NUM_THREADS=2 OMPI_MCA_orte_tmpdir_base="$work" -- "$real_mpirun" -np 1
  line=$(grep '^nn_train: warning:' "$work/plain.log")
  if [ "$rc" = 0 ] && has plain '^test precision:' && [ "$(warnings plain)" = 1 ] &&
    [[ $line == *"rank 0 on "*" runs 1 BLAS thread (OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask)"* ]] &&
    [[ $line == *"slurm/mpirun.sh (one host), mpirun --map-by slot:PE=2 or srun --cpus-per-task=2" ]]; then
    ok "plain mpirun -np 1, OPENBLAS_NUM_THREADS=2: one warning line with the fix: $line"
  else
    fail "plain mpirun -np 1, OPENBLAS_NUM_THREADS=2 (exit $rc): expected one warning line with the fix, got: $(grep -E 'ranks on|warning|error' "$work/plain.log" | head -n 3)"
  fi
  if has plain '1 BLAS thread each \(OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask\)\)$' &&
    [ "$(cpu_count "$mask")" = 1 ] && [ "$computing" = 1 ]; then
    ok "plain mpirun: the rank runs 1 thread on its one core (affinity $mask, 1 computing thread; TID:CPU-s@CPUs: $detail)"
  else
    fail "plain mpirun: header, affinity ('$mask') or computing threads ($computing) not those of one thread on one core: $(grep 'ranks on' "$work/plain.log"); TID:CPU-s@CPUs: $detail"
  fi

  run bind OMP_PROC_BIND=true OMP_PLACES=cores --
  if has bind "OpenBLAS's threads stay there"; then  # OpenBLAS under libgomp's binding: 1 thread, said why
    if [ "$rc" = 0 ] && has bind '^test precision:' && has bind '1 BLAS thread each' && [ "$(warnings bind)" = 0 ] &&
      [ "$computing" = 1 ]; then
      ok "OMP_PROC_BIND=true OMP_PLACES=cores with OpenBLAS: 1 thread, and the header says why"
    else
      fail "OMP_PROC_BIND=true OMP_PLACES=cores with OpenBLAS (exit $rc, $computing computing threads): $(grep -E 'ranks on|warning|error' "$work/bind.log" | head -n 3)"
    fi
  elif [ "$rc" = 0 ] && has bind '^test precision:' && has bind "$cores BLAS threads each" && [ "$(warnings bind)" = 0 ] &&
    { ! has bind 'host GEMM oneDNN' || has bind 'in this rank.s OpenMP places \(OMP_PROC_BIND\)\)\)$'; } &&
    [ "$computing" -ge "$cores" ] && [ "$cpus" -ge "$cores" ]; then
    ok "OMP_PROC_BIND=true OMP_PLACES=cores, no launcher: $cores threads, $computing compute, on $cpus CPUs (main thread bound to $mask; TID:CPU-s@CPUs: $detail)"
  else
    fail "OMP_PROC_BIND=true OMP_PLACES=cores (exit $rc): $computing computing thread(s) on $cpus CPU(s), expected $cores on $cores (TID:CPU-s@CPUs: $detail): $(grep -E 'ranks on|warning|error' "$work/bind.log" | head -n 3)"
  fi
else
  echo "skip the runs on 2 cores: this machine has $cores"
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
