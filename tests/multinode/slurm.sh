#!/usr/bin/env bash
# A two-node Slurm cluster on the simulated nodes (tests/multinode/nodes.sh): slurmctld in
# the root namespace on the bridge address ($NNSIM_NET.1), one slurmd per node namespace
# (hostname node-a / node-b, NodeAddr its own address, the same SlurmdPort in each: every
# node has its own network stack), munged shared (its socket is a file), private config,
# state, spool, pid and log paths. Each node has 2 GPUs in gres.conf (device files,
# AutoDetect=off: tests/multinode/slurm_gpus.sh), which the emulator build presents as the
# devices CUDA_VISIBLE_DEVICES lists. Submits, each with `-N 2 --ntasks-per-node=2 --ntasks=4`:
#   train          slurm/train.sbatch, srun, --gpus-per-task=1
#   train-gres     the same with --gpus-per-task=0 --gres=gpu:2 (GPUs per node)
#   train-mpirun   LAUNCHER=mpirun, --gpus-per-task=1
#   train-shared   --gpus-per-task=0 --gres=gpu:1: two ranks per GPU (the check's counter-case)
#   test           slurm/test.sbatch, --gpus-per-task=1: the emulator's steps bind no GPU
# and checks that each job ends COMPLETED with ranks 0,1 on node-a and 2,3 on node-b, each
# rank on a GPU of its own (two bus ids per node, no shared-GPU warning; train-shared: the
# warning), and that sbatch refuses 3 ranks x --gpus-per-task=1 on one 2-GPU node.
# And --exact on (MN_EXACT_ARGS: shuffled, --batch 70: chunks 32, 32, 6 and a partial last
# batch, so the 4 ranks own them unevenly and one owns none), each --device (cpu, gpu: the
# emulator) twice, --gpus-per-task=0, --save F:
#   exact-DEV-2x2  -N 2 --ntasks-per-node=2 --ntasks=4 (ranks 0,1 on node-a, 2,3 on node-b)
#   exact-DEV-1x4  -N 1 --ntasks=4 --overcommit (the 4 ranks on one node)
# the two F's weights (W1|b1|W2|b2, the bytes after the 32-byte header) cmp-identical; the
# training state after them holds per-rank sums and may differ.
#
#   tests/multinode/slurm.sh            (root; called by run.sh when MULTINODE_SLURM=1)
#
# Expects the nodes to be up (run.sh brings them up; alone: tests/multinode/nodes.sh up 2
# first, or NNSIM_OWN=1 to bring them up and down here). Prints PASS/FAIL lines and
# "multinode-slurm: N passed, M failed"; exits non-zero on a failure.
#
# Environment: NN_TRAIN, NN_TESTS, NN_DATA (build/cpu/bin/..., data/current),
# MN_OUT (build/multinode: job outputs in $MN_OUT/slurm), SLURM_TEST_FILTER (gtest filter of
# the test job; default Comm*:Strategies*, '*' = all), SLURM_TIMEOUT (300 s for all jobs; each
# job also has --time=5 minutes),
# MN_TRAIN_ARGS (a small training), MN_EXACT_ARGS (the --exact on training; needs --hidden).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
here=tests/multinode
# shellcheck source=tests/multinode/nodes.sh
. "$here/nodes.sh"
# shellcheck source=tests/multinode/slurm_gpus.sh
. "$here/slurm_gpus.sh"
NN_TRAIN=${NN_TRAIN:-build/cpu/bin/nn_train}
NN_TESTS=${NN_TESTS:-build/cpu/bin/nn_tests}
NN_DATA=${NN_DATA:-data/current}
OUT=${MN_OUT:-build/multinode}/slurm
TIMEOUT=${SLURM_TIMEOUT:-300}
TRAIN_ARGS=${MN_TRAIN_ARGS:---epochs 1 --train-size 2000 --test-size 500 --hidden 32}
# The jobs that only show where their ranks run: the header, then a few steps.
SHORT_ARGS="--epochs 1 --train-size 400 --test-size 100 --hidden 16"
# --exact on: the same weights at any layout of the ranks.
EXACT_ARGS=${MN_EXACT_ARGS:---hidden 32 --batch 70 --train-size 1000 --test-size 200 --epochs 2 --exact on}
# Not the whole suite by default: with node-local /tmp (below) the tests that pass a file
# through /tmp from rank 0 to the others fail on node-b (Faults.NonFiniteLoss...: "cannot
# read checkpoint: No such file or directory"), the ranks fall out of step and the job hangs
# until its time limit. SLURM_TEST_FILTER='*' runs everything.
TEST_FILTER=${SLURM_TEST_FILTER:-Comm*:Strategies*}
start_time=$(date +%s)
passes=0 fails=0
pass() { echo "PASS slurm: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL slurm: $*"; fails=$((fails + 1)); }
say() { echo "multinode-slurm: $*"; }
finish() {
  echo "multinode-slurm: $passes passed, $fails failed ($(($(date +%s) - start_time)) s)"
  [ "$fails" = 0 ]
}

for c in slurmctld slurmd sbatch scontrol munged munge; do
  if ! command -v "$c" >/dev/null 2>&1; then
    fail "$c not found (apt-get install slurm-wlm munge, or make setup-multinode)"
    finish
    exit 1
  fi
done

own_nodes=0
if [ "${NNSIM_OWN:-0}" = 1 ]; then
  nnsim_up 2 || { fail "cannot bring the simulated nodes up"; finish; exit 1; }
  own_nodes=1
fi
nodes=$(nnsim_nodes | tr '\n' ' ')
nodes=${nodes% }
if [ "$(wc -w <<<"$nodes")" -lt 2 ]; then
  fail "the simulated nodes are not up (tests/multinode/nodes.sh up 2)"
  finish
  exit 1
fi

RUN=
CONF=
pids=() # munged, slurmctld, slurmd per node
job_ids=()
cleanup() {
  local rc=$? pid i env
  set +e
  if [ -n "$CONF" ] && [ ${#pids[@]} -gt 1 ]; then
    if [ ${#job_ids[@]} -gt 0 ]; then
      scancel --quiet --full "${job_ids[@]}" 2>/dev/null
      for _ in $(seq 40); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
    fi
    timeout 20 scontrol shutdown >/dev/null 2>&1
  fi
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
      kill -9 "$pid" 2>/dev/null
    fi
  done
  if [ -n "$RUN" ]; then
    cp -f "$RUN"/slurm.conf "$OUT/logs/" 2>/dev/null
    rm -rf "$RUN"
  fi
  [ "$own_nodes" = 1 ] && nnsim_down
  exit "$rc"
}
# Outside /tmp: each slurmd gets a /tmp of its own (below), which would hide it.
RUN=$(mktemp -d "$NNSIM_RUN/slurm.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 755 "$RUN"
mkdir -p "$RUN"/{state,munge}
for n in $nodes; do mkdir -p "$RUN/spool-$n"; done
mkdir -p "$OUT"
rm -rf "$OUT"/logs "$OUT"/*.out
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
CONF=$RUN/slurm.conf
export SLURM_CONF=$CONF
unset SLURM_JOB_ID SLURM_JOBID SLURM_NTASKS

# ---- munge: one daemon, its socket a file every namespace reaches -------------------------
dd if=/dev/urandom of="$RUN/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$RUN/munge/munge.key"
chmod 755 "$RUN/munge"
SOCK=$RUN/munge/munge.socket
munged --foreground --force --socket="$SOCK" --key-file="$RUN/munge/munge.key" \
  --log-file="$OUT/logs/munged.log" --pid-file="$RUN/munge/munged.pid" \
  --seed-file="$RUN/munge/munged.seed" >"$OUT/logs/munged.stdout" 2>&1 &
pids+=($!)
for _ in $(seq 40); do [ -S "$SOCK" ] && break; sleep 0.25; done
if ! munge -n -S "$SOCK" | unmunge -S "$SOCK" >/dev/null 2>&1; then
  fail "munged did not start: $(tail -n 3 "$OUT/logs/munged.log" 2>/dev/null)"
  finish
  exit 1
fi

# ---- slurm.conf ----------------------------------------------------------------------------
ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
read -r ctld_port slurmd_port <<<"$ports"
# shellcheck disable=SC2086  # the node names, one word each
if ! gres_types=$(gpus_conf "$RUN" $nodes); then
  fail "cannot create the GPU device files in $RUN (mknod)"
  finish
  exit 1
fi
{
  cat <<EOF
# Generated by tests/multinode/slurm.sh: simulated nodes (network + UTS namespaces), gres.conf GPUs.
ClusterName=nnsim
SlurmctldHost=$(hostname -s)($NNSIM_NET.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK,cred_expire=15
StateSaveLocation=$RUN/state
SlurmdSpoolDir=$RUN/spool-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$OUT/logs/slurmctld.log
SlurmdLogFile=$OUT/logs/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
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
MinJobAge=3600
KillWait=5
MailProg=/bin/true
EOF
  echo "$gres_types"
  i=2
  for n in $nodes; do
    echo "NodeName=$n NodeAddr=$NNSIM_NET.$i CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1024 $(gpus_node_gres) State=UNKNOWN"
    i=$((i + 1))
  done
  echo "PartitionName=sim Nodes=${nodes// /,} Default=YES MaxTime=INFINITE State=UP"
} >"$CONF"
say "$(scontrol --version): slurmctld on $NNSIM_NET.1:$ctld_port, slurmd on $nodes (port $slurmd_port), runtime in $RUN"

slurmctld -D -i -f "$CONF" >>"$OUT/logs/slurmctld.stdout" 2>&1 &
pids+=($!)
for _ in $(seq 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
if ! scontrol ping 2>/dev/null | grep -q UP; then
  fail "slurmctld did not come up: $(tail -n 5 "$OUT/logs/slurmctld.log" "$OUT/logs/slurmctld.stdout" 2>/dev/null)"
  finish
  exit 1
fi
for n in $nodes; do
  # In the node's namespaces: its hostname is the NodeName, its address the NodeAddr.
  # And a node-local /tmp, as real nodes have: Slurm's PMIx plugin creates
  # /tmp/spmix_appdir_<uid>_<job>.<step> on every node of a step, and on one shared /tmp
  # the second node fails with 'pmixp_mkdir: ... Cannot create directory
  # "/tmp/spmix_appdir_0_1.0": File exists (17)' and the step with it.
  # A repository under /tmp (a fresh clone in /tmp, as CI makes) stays visible: the host's
  # /tmp is bound aside first and the repository bound back into the node's /tmp.
  mkdir -p "$RUN/tmp-$n" "$RUN/hosttmp-$n" && chmod 1777 "$RUN/tmp-$n"
  in_tmp=
  case $PWD/ in /tmp/?*) in_tmp=${PWD#/tmp/} ;; esac
  # shellcheck disable=SC2016  # expanded by that sh
  nnsim_exec "$n" unshare --mount --propagation slave sh -c '
    set -e
    [ -z "$4" ] || mount --bind /tmp "$5"
    mount --bind "$1" /tmp
    if [ -n "$4" ]; then mkdir -p "/tmp/$4" && mount --bind "$5/$4" "/tmp/$4"; fi
    exec slurmd -D -N "$2" -f "$3"' sh "$RUN/tmp-$n" "$n" "$CONF" "$in_tmp" "$RUN/hosttmp-$n" \
    >>"$OUT/logs/slurmd-$n.stdout" 2>&1 &
  pids+=($!)
done
ok=1
for n in $nodes; do
  state=
  for _ in $(seq 60); do
    state=$(sinfo -h -n "$n" -o %T 2>/dev/null || true)
    case $state in idle* | mixed* | allocated*) break ;; esac
    sleep 0.5
  done
  case $state in
    idle* | mixed* | allocated*) ;;
    *)
      fail "slurmd on $n did not register (state '$state'): $(tail -n 6 "$OUT/logs/slurmd-$n.log" "$OUT/logs/slurmd-$n.stdout" 2>/dev/null | tr '\n' ' ')"
      ok=0
      ;;
  esac
done
if [ "$ok" = 1 ]; then
  pass "cluster up: $(sinfo -h -o '%P %D nodes %N %T, %G each' | head -n 1)"
else
  finish
  exit 1
fi

declare -A job_of=()
submit() { # NAME ENV... -- SBATCH_ARGS...
  local name=$1 id
  shift
  local -a envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  if id=$(env "${envs[@]}" sbatch --parsable --job-name="nn-$name" --output="$OUT/$name-%j.out" \
    --time=00:05:00 "$@" 2>&1); then
    id=${id%%;*}
    job_of[$name]=$id
    job_ids+=("$id")
    say "submitted $name as job $id: ${envs[*]} sbatch $*"
  else
    fail "$name: sbatch refused the job: $id"
  fi
}
gpus_check_requests
# NN_BUILD=cpu: the emulator build, which a job that asked for GPUs runs only when told to.
layout=(-N 2 --ntasks-per-node=2 --ntasks=4)
# shellcheck disable=SC2086
submit train NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- "${layout[@]}" --gpus-per-task=1 slurm/train.sbatch $TRAIN_ARGS
# shellcheck disable=SC2086
submit train-gres NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- "${layout[@]}" --gpus-per-task=0 --gres=gpu:2 \
  slurm/train.sbatch $SHORT_ARGS
# shellcheck disable=SC2086
submit train-mpirun NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" LAUNCHER=mpirun \
  MPIRUN_FLAGS="--mca oob_tcp_if_include $NNSIM_NET.0/24 --mca btl_tcp_if_include $NNSIM_NET.0/24" \
  -- "${layout[@]}" --gpus-per-task=1 slurm/train.sbatch $TRAIN_ARGS
# shellcheck disable=SC2086
submit train-shared NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- "${layout[@]}" --gpus-per-task=0 --gres=gpu:1 \
  slurm/train.sbatch $SHORT_ARGS
submit test NN_BUILD=cpu NN_TESTS="$NN_TESTS" NP_LIST=4 TEST_ARGS="${TEST_FILTER:+--gtest_filter=$TEST_FILTER}" -- \
  "${layout[@]}" --gpus-per-task=1 slurm/test.sbatch
# 4 ranks on one node of 2 CPUs: --overcommit (the job then holds one CPU).
for dev in cpu gpu; do
  rm -f "$OUT/exact-$dev-2x2.ckpt" "$OUT/exact-$dev-1x4.ckpt"
  # shellcheck disable=SC2086
  submit "exact-$dev-2x2" NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- "${layout[@]}" --gpus-per-task=0 \
    slurm/train.sbatch --device "$dev" $EXACT_ARGS --save "$OUT/exact-$dev-2x2.ckpt"
  # shellcheck disable=SC2086
  submit "exact-$dev-1x4" NN_BUILD=cpu NN_BIN="$NN_TRAIN" NN_DATA="$NN_DATA" -- -N 1 --ntasks=4 --overcommit --gpus-per-task=0 \
    slurm/train.sbatch --device "$dev" $EXACT_ARGS --save "$OUT/exact-$dev-1x4.ckpt"
done

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
        say "job ${job_of[$name]} ($name): $st, exit ${exit_of[$name]}, nodes $(sed -n 's/.* NodeList=\([^ ]*\).*/\1/p' <<<"$line") after $(($(date +%s) - start_time)) s"
        ;;
      *) pending=$((pending + 1)) ;;
    esac
  done
  [ "$pending" = 0 ] && break
  gpus_record_steps
  if [ "$(date +%s)" -ge "$deadline" ]; then
    for name in "${!job_of[@]}"; do
      if [ -z "${state_of[$name]:-}" ]; then
        fail "$name: job ${job_of[$name]} not finished after $TIMEOUT s: cancelled"
        scancel --full "${job_of[$name]}" 2>/dev/null
        state_of[$name]=NOT-FINISHED
      fi
    done
    break
  fi
  sleep 2
done

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
    pass "$name: $what: $(grep -E -- "$re" "$f" | head -n 4 | paste -sd'|' | sed 's/|/ | /g')"
  else
    fail "$name: $what: /$re/ found ${n:-0} times in $f, expected $want"
  fi
}
check_two_nodes() { # NAME: ranks 0,1 on node-a and 2,3 on node-b
  # One line per rank ("  rank 2 on node-b, ...") or per node ("ranks on node-b: 2->cpu 3->cpu ...").
  if grep -qE '^ *ranks on node-' "$(out_of "$1")"; then
    check_output "$1" '^ *ranks on node-a: 0->[^ ]+ 1->[^ ]+ |^ *ranks on node-b: 2->[^ ]+ 3->[^ ]+ ' "ranks 0,1 on node-a and 2,3 on node-b" 2
  else
    check_output "$1" '^  rank [01] on node-a,|^  rank [23] on node-b,' "ranks 0,1 on node-a and 2,3 on node-b" 4
  fi
}
for name in train train-gres train-mpirun train-shared; do
  if check_state "$name"; then
    check_output "$name" '^test precision: [0-9.]+' "trainer's test precision"
    check_output "$name" '^MPI ranks: 4 ' "4 ranks"
    check_two_nodes "$name"
    if [ "$name" = train-shared ]; then gpus_check_placement "$name" shared; else gpus_check_placement "$name" own; fi
  fi
done
if check_state test; then
  check_output test '^tests: [0-9]+ passed, 0 failed' "gtest summary at 4 ranks over node-a, node-b"
  check_output test '^\+ srun .*--gres=none .*nn_tests' "the emulator's srun step asks for no GPU"
  gpus_check_step_unbound test train
fi
# --exact on: the weight bytes of 2 nodes x 2 ranks against 1 node x 4 ranks.
# shellcheck disable=SC2086
set -- $EXACT_ARGS
exact_hidden=
while [ $# -gt 1 ]; do [ "$1" = --hidden ] && exact_hidden=$2; shift; done
exact_bytes=$((4 * (785 * ${exact_hidden:-0} + 10 * ${exact_hidden:-0} + 10)))
for dev in cpu gpu; do
  mn=exact-$dev-2x2 one=exact-$dev-1x4
  check_state "$mn" || continue
  check_state "$one" || continue
  check_two_nodes "$mn"
  check_output "$one" '^ *ranks on node-[ab]: 0->[^ ]+ 1->[^ ]+ 2->[^ ]+ 3->[^ ]+ ' "ranks 0-3 on one node"
  a=$OUT/$mn.ckpt b=$OUT/$one.ckpt
  if [ -z "$exact_hidden" ]; then
    fail "exact --device $dev: no --hidden in MN_EXACT_ARGS ($EXACT_ARGS): the weights' size is unknown"
  elif ! grep -q '^exact: on' "$(out_of "$mn")" || ! grep -q '^exact: on' "$(out_of "$one")"; then
    fail "exact --device $dev: no 'exact: on' line in $(out_of "$mn") or $(out_of "$one") (MN_EXACT_ARGS: $EXACT_ARGS)"
  elif [ "$(stat -c %s "$a" 2>/dev/null || echo 0)" -lt $((32 + exact_bytes)) ] ||
    [ "$(stat -c %s "$b" 2>/dev/null || echo 0)" -lt $((32 + exact_bytes)) ]; then
    fail "exact --device $dev: $a or $b missing or shorter than 32 + $exact_bytes bytes"
  elif cmp -s -i 32 -n "$exact_bytes" "$a" "$b"; then
    pass "exact --device $dev: $EXACT_ARGS: the weights ($exact_bytes bytes after the header) of 2 nodes x 2 ranks cmp-identical to 1 node x 4 ranks (whole files $(cmp -s "$a" "$b" && echo identical || echo 'differ in the training state'))"
  else
    fail "exact --device $dev: the weights of 2 nodes x 2 ranks and 1 node x 4 ranks differ: $(cmp -l -i 32 -n "$exact_bytes" "$a" "$b" 2>/dev/null | awk -v n="$exact_bytes" 'NR == 1 { f = $1 } END { print NR " of " n " weight bytes, the first at byte " f " after the header" }'): cmp $a $b"
  fi
done
finish
