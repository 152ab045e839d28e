#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, to test the slurm/*.sbatch scripts:
# installs slurm-wlm and munge from Debian if missing (.ci/setup.sh slurm), writes a private slurm.conf (this
# host's CPUs and memory from `slurmd -C`, no GPUs), starts munged, slurmctld and slurmd
# on private ports, sockets and directories, submits the scripts with the emulator build
# and checks that every job ends COMPLETED with the expected output. Everything it
# started is stopped on exit (trap), whatever happens.
#
#   tests/slurm/run_local_slurm.sh          (make test-slurm; root, as slurmd must be)
#
# Jobs (each with --gpus-per-task=0: the cluster has no GPUs):
#   test       slurm/test.sbatch, the whole gtest suite at NP_LIST ranks, srun --mpi=pmix
#   train      slurm/train.sbatch, a small training, srun (default launcher)
#   train-mpi  slurm/train.sbatch with LAUNCHER=mpirun (and SBATCH_GPUS_PER_TASK=0)
#   train-cpu, train-cpu-mpi  the same with --device cpu, 1 task and --cpus-per-task=2, srun
#              and mpirun: the rank runs 2 BLAS threads and warns of nothing
#   profile    slurm/profile.sbatch -> nsys.sh, with a stand-in `nsys` that only runs the
#              program (no Nsight here); checks the wrapper's plumbing
#   scaling    slurm/scaling.sbatch -> bench/scaling.sh, only with TEST_SCALING=1
#   requeue    slurm/train.sbatch --save F --resume with a time limit of REQUEUE_TIME minutes
#              (1) and --signal=B:USR1@REQUEUE_MARGIN (10 s), a training that needs a few
#              of them: it must go through requeues by itself, end COMPLETED (exit 0:0) with
#              Restarts >= 1 in `scontrol show job`, and its F must be byte-identical (cmp)
#              to that of requeue-ref, the same training uninterrupted (same ranks, srun)
# plus: sbatch refuses the scripts' own --gpus-per-task=1 here (no GPU gres), so the
# override is what makes a CPU-only cluster work.
#
# Environment (defaults):
#   NN_TRAIN=build/cpu/bin/nn_train  NN_TESTS=build/cpu/bin/nn_tests  NN_DATA=data/current
#   NP_LIST="1 2"        rank counts for the test job (its --ntasks is the largest)
#   TRAIN_NP=2           ranks of the training jobs
#   TRAIN_ARGS="--epochs 1 --train-size 2000 --test-size 500 --hidden 32"
#   TEST_ARGS            gtest options for the test job (default: none, the full suite)
#   TEST_PROFILE=1       0 skips the profile job
#   TEST_SCALING=0       1 adds the scaling job (NP="1 2", SCALING_ARGS passed as arguments)
#   TEST_REQUEUE=1       0 skips the requeue and requeue-ref jobs
#   REQUEUE_ARGS="--epochs 30 --train-size 20000 --test-size 1000 --hidden 128 --save-every 100"
#                        their training (~1.5 min of 2 ranks on 2 cores): it must need more
#                        than one time limit, or nothing is requeued (then: FAIL)
#   REQUEUE_TIME=1 REQUEUE_MARGIN=10   the requeue job's --time (minutes) and signal margin (s)
#   SLURM_TEST_OUT=build/slurm   job outputs (*.out, profile/, scaling/) and daemon logs
#                        (logs/); the previous run's are removed at start
#   TIMEOUT=900          seconds for all jobs together (times the host's measured slowdown,
#                        SLOWDOWN=F fixes it); then they are cancelled: FAIL
# Prints "PASS ..."/"FAIL ..." per check and "test-slurm: PASS"/"test-slurm: FAIL" last;
# the exit status is non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/../.."
NN_TRAIN=${NN_TRAIN:-build/cpu/bin/nn_train}
NN_TESTS=${NN_TESTS:-build/cpu/bin/nn_tests}
NN_DATA=${NN_DATA:-data/current}
NP_LIST=${NP_LIST:-1 2}
TRAIN_NP=${TRAIN_NP:-2}
TRAIN_ARGS=${TRAIN_ARGS:---epochs 1 --train-size 2000 --test-size 500 --hidden 32}
TEST_ARGS=${TEST_ARGS:-}
TEST_PROFILE=${TEST_PROFILE:-1}
TEST_SCALING=${TEST_SCALING:-0}
TEST_REQUEUE=${TEST_REQUEUE:-1}
REQUEUE_ARGS=${REQUEUE_ARGS:---epochs 30 --train-size 20000 --test-size 1000 --hidden 128 --save-every 100}
REQUEUE_TIME=${REQUEUE_TIME:-1}
REQUEUE_MARGIN=${REQUEUE_MARGIN:-10}
SCALING_ARGS=${SCALING_ARGS:-}
OUT=${SLURM_TEST_OUT:-build/slurm}
# A hang guard, multiplied by the host's slowdown (tests/cli/slowdown.sh, a calibration of this
# run; 1 with a core to spare): a busy host makes the jobs slower, not wrong.
. tests/cli/slowdown.sh
TIMEOUT=${TIMEOUT:-$(scaled 900 "$(slowdown)")}
start_time=$(date +%s)

say() { echo "test-slurm: $*"; }
fatal() {
  echo "test-slurm: FAIL: $*" >&2
  echo "test-slurm: FAIL"
  exit 1
}

# ---- prerequisites ---------------------------------------------------------------------
[ "$(id -u)" = 0 ] || fatal "must run as root (slurmd starts jobs as their user; apt-get installs Slurm)"
for f in "$NN_TRAIN" "$NN_TESTS"; do [ -x "$f" ] || fatal "$f not found: make cpu"; done
[ -e "$NN_DATA" ] || fatal "$NN_DATA not found: make data"
np_max=0
for np in $NP_LIST; do
  case $np in '' | *[!0-9]* | 0) fatal "NP_LIST must hold positive integers, not '$np'" ;; esac
  [ "$np" -gt "$np_max" ] && np_max=$np
done

# Slurm's daemons and client, munge: checked (and installed with apt-get) by the project's setup.
bash .ci/setup.sh slurm || fatal "Slurm or munge missing (.ci/setup.sh slurm): install slurm-wlm and munge"

# ---- cleanup: everything started here is stopped on exit ------------------------------
RUN=
CONF=
pids=()    # daemons we started, in start order
job_ids=() # jobs we submitted
cleanup() {
  local rc=$? pid i
  set +e
  if [ -n "$CONF" ] && [ -f "$CONF" ] && [ ${#pids[@]} -gt 1 ]; then
    if [ ${#job_ids[@]} -gt 0 ]; then
      scancel --quiet --full "${job_ids[@]}" 2>/dev/null
      # Let slurmd end the cancelled steps itself before it goes (at most 30 s).
      for _ in $(seq 60); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
    fi
    timeout 20 scontrol shutdown >/dev/null 2>&1
  fi
  # slurmd and slurmctld end on `scontrol shutdown` (else SIGTERM after 10 s); munged on SIGTERM.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    if [ "$i" -gt 0 ]; then
      for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    fi
    kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  # Any job step left behind (slurmstepd and its tasks) carries our SLURM_CONF.
  [ -n "$CONF" ] && for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [ "$pid" = $$ ] && continue
    if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
      echo "test-slurm: stopping leftover process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-60))"
      kill -9 "$pid" 2>/dev/null
    fi
  done
  if [ -n "$RUN" ]; then
    cp -f "$RUN"/slurm.conf "$OUT/logs/" 2>/dev/null
    rm -rf "$RUN"
  fi
  say "stopped munged, slurmctld and slurmd; logs in $OUT/logs ($(($(date +%s) - start_time)) s in all)"
  exit "$rc"
}

# ---- private cluster directory -----------------------------------------------------
# Sockets need short paths (108 bytes), so the daemons' runtime lives in a temp directory;
# job outputs and daemon logs go to $OUT, kept for inspection.
RUN=$(mktemp -d "${TMPDIR:-/tmp}/nn-slurm.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 755 "$RUN" # munged: "execute permissions for all required" on the socket's directory
mkdir -p "$RUN"/{state,spool,munge,stub}
mkdir -p "$OUT"
rm -rf "$OUT"/logs "$OUT"/profile "$OUT"/scaling "$OUT"/*.out "$OUT"/requeue*.ckpt # this script's own files only
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
CONF=$RUN/slurm.conf
export SLURM_CONF=$CONF
unset SLURM_JOB_ID SLURM_JOBID SLURM_NTASKS # when run from inside another Slurm job

# ---- munge ------------------------------------------------------------------------------
dd if=/dev/urandom of="$RUN/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$RUN/munge/munge.key"
chmod 755 "$RUN/munge"
SOCK=$RUN/munge/munge.socket
munged --foreground --force --socket="$SOCK" --key-file="$RUN/munge/munge.key" \
  --log-file="$OUT/logs/munged.log" --pid-file="$RUN/munge/munged.pid" \
  --seed-file="$RUN/munge/munged.seed" >"$OUT/logs/munged.stdout" 2>&1 &
pids+=($!)
for _ in $(seq 40); do [ -S "$SOCK" ] && break; sleep 0.25; done
munge -n -S "$SOCK" | unmunge -S "$SOCK" >/dev/null 2>&1 ||
  fatal "munged did not start: $(tail -n 3 "$OUT/logs/munged.log" 2>/dev/null)"

# ---- slurm.conf ---------------------------------------------------------------------------
node=$(hostname -s)
hw=$(slurmd -C 2>/dev/null | head -n 1)
case $hw in NodeName=*CPUs=*RealMemory=*) ;; *) fatal "slurmd -C printed no node line: '$hw'" ;; esac
hw=${hw#NodeName=* } # keep CPUs=... Boards=... RealMemory=...
cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
read -r ctld_port slurmd_port <<<"$ports"
for np in "$np_max" "$TRAIN_NP"; do
  [ "$np" -le "$cpus" ] || fatal "$np ranks asked for, but this node has $cpus CPUs (one task per CPU): lower NP_LIST/TRAIN_NP"
done
cat >"$CONF" <<EOF
# Generated by tests/slurm/run_local_slurm.sh: one node, CPUs only, private everything.
ClusterName=nnlocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits cred_expire + 1 s before it may start again (default
# 120 s); 15 s keeps the requeue job's restarts short.
AuthInfo=socket=$SOCK,cred_expire=15
StateSaveLocation=$RUN/state
SlurmdSpoolDir=$RUN/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$OUT/logs/slurmctld.log
SlurmdLogFile=$OUT/logs/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: plain process tracking, no task binding, no accounting.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to scontrol for an hour (no accounting database for sacct).
MinJobAge=3600
KillWait=5
MailProg=/bin/true
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
say "$(scontrol --version), $(munged --version 2>&1 | awk '{print $1; exit}')"
say "cluster: node $node ($hw), ports $ctld_port/$slurmd_port, runtime in $RUN"

# ---- daemons --------------------------------------------------------------------------------
slurmctld -D -i -f "$CONF" >>"$OUT/logs/slurmctld.stdout" 2>&1 &
pids+=($!)
for _ in $(seq 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
scontrol ping 2>/dev/null | grep -q UP ||
  fatal "slurmctld did not come up: $(tail -n 5 "$OUT/logs/slurmctld.log" "$OUT/logs/slurmctld.stdout" 2>/dev/null)"
slurmd -D -N "$node" -f "$CONF" >>"$OUT/logs/slurmd.stdout" 2>&1 &
pids+=($!)
state=
for _ in $(seq 60); do
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
  case $state in idle* | mixed* | allocated*) break ;; esac
  kill -0 "${pids[2]}" 2>/dev/null || break
  sleep 0.5
done
case $state in
  idle* | mixed* | allocated*) say "slurmd up, node $node $state" ;;
  *) fatal "slurmd did not register (node state '$state'): $(tail -n 8 "$OUT/logs/slurmd.log" "$OUT/logs/slurmd.stdout" 2>/dev/null)" ;;
esac

# ---- checks -------------------------------------------------------------------------------
passes=0
fails=0
pass() { echo "PASS $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# The scripts ask for one GPU per task; a cluster without GPUs must refuse that, and
# --gpus-per-task=0 on the command line (or SBATCH_GPUS_PER_TASK=0) must lift it.
if msg=$(sbatch --test-only slurm/train.sbatch 2>&1); then
  fail "gpu-request: sbatch accepted --gpus-per-task=1 on a node without GPUs: $msg"
elif grep -q 'Invalid generic resource' <<<"$msg"; then
  pass "gpu-request: the scripts' --gpus-per-task=1 is refused here ($(tr '\n' ' ' <<<"$msg" | sed 's/ *$//')); --gpus-per-task=0 lifts it"
else
  fail "gpu-request: unexpected sbatch error: $msg"
fi

# submit NAME [env VAR=...] -- SBATCH_ARGS... : submits from the repository root; sbatch
# passes the whole environment (--export=ALL) to the job.
declare -A job_of=()
submit() {
  local name=$1 id
  shift
  local -a envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  if id=$(env "${envs[@]}" sbatch --parsable --job-name="nn-$name" --output="$OUT/$name-%j.out" \
    --time=00:15:00 "$@" 2>&1); then
    id=${id%%;*}
    job_of[$name]=$id
    job_ids+=("$id")
    say "submitted $name as job $id: ${envs[*]/#PATH=*/PATH=<stub nsys>:\$PATH} sbatch $*"
  else
    fail "$name: sbatch refused the job: $id"
  fi
}

# shellcheck disable=SC2086  # TRAIN_ARGS is a list of options, split on purpose
{
  if [ "$TEST_REQUEUE" = 1 ]; then
    # First in the queue: while it waits to restart, the other jobs use the node.
    submit requeue NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- \
      --gpus-per-task=0 --ntasks="$TRAIN_NP" --time="$REQUEUE_TIME" --signal="B:USR1@$REQUEUE_MARGIN" \
      slurm/train.sbatch $REQUEUE_ARGS --save "$OUT/requeue.ckpt" --resume
    submit requeue-ref NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- \
      --gpus-per-task=0 --ntasks="$TRAIN_NP" slurm/train.sbatch $REQUEUE_ARGS --save "$OUT/requeue-ref.ckpt"
  fi
  submit test NN_BUILD=cpu NN_TESTS="$NN_TESTS" NP_LIST="$NP_LIST" TEST_ARGS="$TEST_ARGS" -- \
    --gpus-per-task=0 --ntasks="$np_max" slurm/test.sbatch
  submit train NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- \
    --gpus-per-task=0 --ntasks="$TRAIN_NP" slurm/train.sbatch $TRAIN_ARGS
  submit train-mpi NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" LAUNCHER=mpirun SBATCH_GPUS_PER_TASK=0 -- \
    --ntasks="$TRAIN_NP" slurm/train.sbatch $TRAIN_ARGS
  # --device cpu with 2 cores per task: srun and mpirun must give the rank both.
  submit train-cpu NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- \
    --gpus-per-task=0 --ntasks=1 --cpus-per-task=2 slurm/train.sbatch $TRAIN_ARGS --device cpu
  submit train-cpu-mpi NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" LAUNCHER=mpirun -- \
    --gpus-per-task=0 --ntasks=1 --cpus-per-task=2 slurm/train.sbatch $TRAIN_ARGS --device cpu
  if [ "$TEST_PROFILE" = 1 ]; then
    # Stand-in for Nsight Systems: `nsys profile [--opt=..] PROG ARGS` runs PROG and writes
    # the --output report file (%q{VAR} expanded); `nsys stats ... --output BASE REP` writes
    # BASE_nvtx_sum.csv; `--version` and `stats --help-reports` answer as a 2023 nsys would.
    cat >"$RUN/stub/nsys" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
cmd=$1; shift
if [ "$cmd" = --version ]; then echo "NVIDIA Nsight Systems version 2023.1.1.0-stub"; exit 0; fi
if [ "$cmd" = stats ] && [ "${1:-}" = --help-reports ]; then echo "  nvtx_sum -- NVTX Range Summary"; exit 0; fi
out=
while [ $# -gt 0 ]; do
  case $1 in
    --output=*) out=${1#--output=} ;;
    --output) out=$2; shift ;;
    --*=* | --force-export=*) ;;
    --report | --format) shift ;;
    --*) ;;
    *) break ;;
  esac
  shift
done
if [ "$cmd" = profile ]; then
  while [[ $out =~ %q\{([A-Za-z_0-9]+)\} ]]; do
    var=${BASH_REMATCH[1]}
    out=${out//"%q{$var}"/${!var:-}}
  done
  echo "stub nsys profile -> $out.nsys-rep"
  "$@"
  echo stub >"$out.nsys-rep"
elif [ "$cmd" = stats ]; then
  echo "Range,Calls" >"${out}_nvtx_sum.csv"
fi
EOF
    chmod 755 "$RUN/stub/nsys"
    submit profile NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" OUT="$OUT/profile" PATH="$RUN/stub:$PATH" -- \
      --gpus-per-task=0 --ntasks="$TRAIN_NP" slurm/profile.sbatch $TRAIN_ARGS
  fi
  if [ "$TEST_SCALING" = 1 ]; then
    submit scaling NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" NP="1 2" OUT="$OUT/scaling" -- \
      --gpus-per-task=0 --ntasks=2 slurm/scaling.sbatch $SCALING_ARGS
  fi
}

# Wait for every job to reach a final state (scontrol keeps them for MinJobAge).
deadline=$((start_time + TIMEOUT))
declare -A state_of=() exit_of=()
while :; do
  pending=0
  for name in "${!job_of[@]}"; do
    [ -n "${state_of[$name]:-}" ] && continue
    line=$(scontrol -o show job "${job_of[$name]}" 2>/dev/null || true)
    st=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")
    case $st in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE)
        state_of[$name]=$st
        exit_of[$name]=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$line")
        say "job ${job_of[$name]} ($name): $st, exit ${exit_of[$name]} after $(($(date +%s) - start_time)) s"
        ;;
      *) pending=$((pending + 1)) ;;
    esac
  done
  [ "$pending" = 0 ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    for name in "${!job_of[@]}"; do
      if [ -z "${state_of[$name]:-}" ]; then
        fail "$name: job ${job_of[$name]} not finished after ${TIMEOUT} s (TIMEOUT): cancelled"
        scancel --full "${job_of[$name]}" 2>/dev/null || true
        state_of[$name]="NOT-FINISHED"
      fi
    done
    break
  fi
  sleep 2
done

# check_job NAME REGEX DESCRIPTION...: COMPLETED, exit 0:0, and the output matches.
out_of() { echo "$OUT/$1-${job_of[$1]}.out"; }
check_state() {
  local name=$1
  [ -n "${job_of[$name]:-}" ] || return 1
  if [ "${state_of[$name]:-}" = COMPLETED ] && [ "${exit_of[$name]:-}" = 0:0 ]; then
    pass "$name: job ${job_of[$name]} COMPLETED, ExitCode 0:0"
  else
    fail "$name: job ${job_of[$name]} ${state_of[$name]:-?}, ExitCode ${exit_of[$name]:-?}; last lines of $(out_of "$name"):"
    tail -n 15 "$(out_of "$name")" 2>/dev/null | sed 's/^/    /'
    return 1
  fi
}
check_output() { # NAME EXTENDED_REGEX WHAT [COUNT]
  local name=$1 re=$2 what=$3 want=${4:-1} n f
  f=$(out_of "$name")
  n=$(grep -cE -- "$re" "$f" 2>/dev/null || true)
  if [ "${n:-0}" -ge "$want" ]; then
    pass "$name: $what: $(grep -E -- "$re" "$f" | head -n 3 | paste -sd'|' | sed 's/|/ | /g')"
  else
    fail "$name: $what: /$re/ found ${n:-0} times in $f, expected $want"
  fi
}

check_absent() { # NAME EXTENDED_REGEX WHAT
  local f
  f=$(out_of "$1")
  if grep -qE -- "$2" "$f" 2>/dev/null; then
    fail "$1: $3: $(grep -E -- "$2" "$f" | head -n 1)"
  else
    pass "$1: $3"
  fi
}

n_np=$(wc -w <<<"$NP_LIST")
if check_state test; then
  check_output test '^tests: [0-9]+ passed, 0 failed' "gtest summary at each of $n_np rank counts ($NP_LIST)" "$n_np"
  check_output test 'srun --ntasks=[0-9]+ --mpi=pmix' "launched with srun --mpi=pmix" "$n_np"
  check_output test '^test.sbatch: PASS' "script verdict"
fi
if check_state train; then
  check_output train '^test precision: [0-9.]+' "trainer's test precision"
  check_output train "^MPI ranks: $TRAIN_NP " "$TRAIN_NP ranks"
  check_output train "srun --ntasks=$TRAIN_NP --mpi=pmix" "launched with srun --mpi=pmix"
fi
if check_state train-mpi; then
  check_output train-mpi '^test precision: [0-9.]+' "trainer's test precision"
  check_output train-mpi "^MPI ranks: $TRAIN_NP " "$TRAIN_NP ranks"
  check_output train-mpi "mpirun(\.sh)? -np $TRAIN_NP" "launched with mpirun (slurm/mpirun.sh) inside the allocation"
fi
for name in train-cpu train-cpu-mpi; do
  if check_state "$name"; then
    check_output "$name" '^test precision: [0-9.]+' "trainer's test precision (--device cpu)"
    check_output "$name" '2 BLAS threads each \(SLURM_CPUS_PER_TASK\)\)$' "--cpus-per-task=2: the rank runs 2 BLAS threads"
    check_absent "$name" '^nn_train: warning:' "no warning (each thread has its core)"
    [ "$name" != train-cpu ] ||
      check_output "$name" 'srun --ntasks=1 (--mpi=[a-z0-9]+ )?--cpus-per-task=2 ' "srun given the job's --cpus-per-task"
  fi
done
if [ "$TEST_PROFILE" = 1 ] && check_state profile; then
  check_output profile '^test precision: [0-9.]+' "trainer's test precision under nsys.sh"
  check_output profile '^nsys.sh: reports and CSV summaries in' "nsys.sh finished"
  n=$(find "$OUT/profile" -name 'nn_rank*.nsys-rep' 2>/dev/null | wc -l)
  if [ "$n" = "$TRAIN_NP" ]; then pass "profile: one report per rank ($n in $OUT/profile)"; else fail "profile: $n reports in $OUT/profile, expected $TRAIN_NP"; fi
fi
if [ "$TEST_SCALING" = 1 ] && check_state scaling; then
  n=$(find "$OUT/scaling" -name '*.csv' 2>/dev/null | wc -l)
  if [ "$n" -ge 1 ]; then pass "scaling: $n CSV file(s) in $OUT/scaling"; else fail "scaling: no CSV in $OUT/scaling"; fi
fi

if [ "$TEST_REQUEUE" = 1 ]; then
  check_state requeue-ref && check_output requeue-ref '^test precision: [0-9.]+' "uninterrupted reference training"
  if check_state requeue; then
    line=$(scontrol -o show job "${job_of[requeue]}" 2>/dev/null || true)
    restarts=$(sed -n 's/.* Restarts=\([0-9]*\).*/\1/p' <<<"$line")
    limit=$(sed -n 's/.* TimeLimit=\([0-9:-]*\).*/\1/p' <<<"$line")
    if [ "${restarts:-0}" -ge 1 ]; then
      pass "requeue: job ${job_of[requeue]} (TimeLimit=$limit) was requeued $restarts time(s) and then COMPLETED"
    else
      fail "requeue: Restarts=${restarts:-?} in scontrol show job: the training never met its time limit (TimeLimit=$limit; make REQUEUE_ARGS bigger)"
    fi
    check_output requeue '^train.sbatch: SIGUSR1 at .*passed on' "Slurm's SIGUSR1 passed on to srun" "${restarts:-1}"
    check_output requeue '^stopped by a signal after [0-9]+ steps; state saved' "the ranks saved and stopped (exit 75)" "${restarts:-1}"
    check_output requeue '^train.sbatch: training stopped with its state saved \(exit 75\): requeueing job' "the script requeued the job" "${restarts:-1}"
    check_output requeue '^resume: .*; continuing$' "every later run resumed the saved state" "${restarts:-1}"
    check_output requeue '^test precision: [0-9.]+' "the last run finished the training"
  fi
  if [ -f "$OUT/requeue.ckpt" ] && [ -f "$OUT/requeue-ref.ckpt" ] && cmp "$OUT/requeue-ref.ckpt" "$OUT/requeue.ckpt"; then
    pass "requeue: cmp $OUT/requeue-ref.ckpt $OUT/requeue.ckpt: byte-identical ($(stat -c %s "$OUT/requeue.ckpt") bytes)"
  else
    fail "requeue: the requeued run's --save file differs from the uninterrupted run's (or is missing)"
  fi
fi

elapsed=$(($(date +%s) - start_time))
if [ "$fails" = 0 ] && [ "$passes" -gt 0 ]; then
  say "$passes checks passed in $elapsed s; job outputs in $OUT/"
  echo "test-slurm: PASS"
else
  say "$fails of $((passes + fails)) checks failed ($elapsed s); job outputs and daemon logs in $OUT/"
  echo "test-slurm: FAIL"
  exit 1
fi
