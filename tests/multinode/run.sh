#!/usr/bin/env bash
# `make test-multinode`: MPI and Slurm over two simulated nodes on this one machine (root).
# Brings up node-a and node-b (tests/multinode/nodes.sh: network + UTS + mount namespaces,
# 10.213.77.2/.3 on a private bridge), launches 4 ranks, 2 per node, with
# tests/multinode/launch.sh (mpirun in node-a, orted on node-b through agent.sh) and checks:
#
#   layout     `mpirun -np 4 hostname` prints node-a node-a node-b node-b
#   no-shm     with --mca btl self,vader the ranks of node-a and node-b cannot reach each
#              other: Open MPI treats them as different nodes (TCP between them)
#   gtest      the gtest suite (nn_tests) at 4 ranks over the 2 nodes (MN_GTEST_FILTER)
#   train      every --strategy (allreduce ps model) x --device (gpu cpu) with --verify: exit 0,
#              verify ok, ranks 0,1 on node-a and 2,3 on node-b, and the --save file
#              cmp-identical to the same run at 4 ranks on ONE node (root namespace)
#   node-shared  --device cpu --node-shared on over the 2 nodes: refused in one line, exit 1
#              (the one-node allreduce cpu run above uses --node-shared off: same exchange)
#   traffic    during the allreduce training, node-b's veth received at least the bytes the
#              gradient allreduces must bring to it (steps x parameters x element size)
#   devices    SIM_DEVICES=4 --report F.json: ranks 0,1 on node-a and 2,3 on node-b, each pair
#              on devices 0,1 (the node-local rank, not the global one)
#   node-fault a longer training with --save F --save-every K; every nn_train on node-b
#              SIGKILLed mid-run: mpirun ends within FAULT_EXIT_S (10) s, non-zero, naming
#              node-b; the same command with --resume (again until exit 0) gives an F
#              cmp-identical to an uninterrupted run's
#   node-lost  the same, but every process in node-b's namespace (its orted too) SIGKILLed:
#              a node that vanishes
#   hung-rank  pgrep -f in the root namespace finds the 4 ranks (2 in node-b's namespace);
#              one on node-b SIGSTOPped: with nn_train --timeout SEC the job ends with
#              exit code 6 (tests/cli/hung_rank.sh is run through launch.sh too when present)
#   slurm      (MULTINODE_SLURM=1) tests/multinode/slurm.sh: slurmctld + one slurmd per node,
#              slurm/train.sbatch (srun and mpirun) and slurm/test.sbatch with -N 2
#              --ntasks-per-node=2; --exact on: the weights of -N 2 x 2 ranks identical to
#              -N 1 x 4 ranks, --device cpu and gpu
# Prints "PASS ..."/"FAIL ..."/"SKIP ..." per check and "multinode: N passed, M failed";
# exits non-zero when M > 0. Every launch has a timeout; the nodes are removed on exit.
#
# Environment (defaults): NN_TRAIN=build/cpu/bin/nn_train NN_TESTS=build/cpu/bin/nn_tests
#   NN_DATA=data/current MN_OUT=build/multinode (logs, --save files, reports)
#   MN_GTEST_FILTER (none: the whole suite) MN_TIMEOUT=300 (s per gtest run; 120 per training)
#   MN_TRAIN_ARGS="--epochs 1 --train-size 2000 --test-size 500 --hidden 32"
#   MN_FAULT_ARGS="--device cpu --epochs 12 --train-size 20000 --test-size 500 --hidden 64 --save-every 40"
#   FAULT_EXIT_S=10 (all three times the measured slowdown; SLOWDOWN=F fixes it) MULTINODE_SLURM=1 SLURM_TEST_FILTER (the Slurm test job's gtest filter)
#   NNSIM_NET=10.213.77 SIM_WORKERS=1
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
here=$root/tests/multinode
# shellcheck source=tests/multinode/nodes.sh
. "$here/nodes.sh"
NN_TRAIN=${NN_TRAIN:-build/cpu/bin/nn_train}
NN_TESTS=${NN_TESTS:-build/cpu/bin/nn_tests}
NN_DATA=${NN_DATA:-data/current}
OUT=${MN_OUT:-build/multinode}
# Every time limit below is a hang guard or a window; each is multiplied by the host's slowdown
# (tests/cli/slowdown.sh: a calibration of this run; 1 with a core to spare), so a busy host
# widens them instead of failing them. FAULT_EXIT_S's factor is measured right after the kill.
. "$root/tests/cli/slowdown.sh"
mn_factor=$(slowdown)
lim() { scaled "$1" "$mn_factor"; }
TIMEOUT=${MN_TIMEOUT:-$(lim 300)}
TRAIN_ARGS=${MN_TRAIN_ARGS:---epochs 1 --train-size 2000 --test-size 500 --hidden 32}
FAULT_ARGS=${MN_FAULT_ARGS:---device cpu --epochs 12 --train-size 20000 --test-size 500 --hidden 64 --save-every 40}
FAULT_EXIT_S=${FAULT_EXIT_S:-10}
GTEST_FILTER=${MN_GTEST_FILTER:-}
export SIM_WORKERS=${SIM_WORKERS:-1}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
start=$(date +%s)

passes=0 fails=0 skips=0
pass() { echo "PASS $*"; passes=$((passes + 1)); }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
skip() { echo "SKIP $*"; skips=$((skips + 1)); }
summary() {
  echo "multinode: $passes passed, $fails failed, $skips skipped ($(($(date +%s) - start)) s; logs in $OUT)"
  [ "$fails" = 0 ]
}
# tail_of FILE: its last lines, indented, for a FAIL.
tail_of() { tail -n "${2:-12}" "$1" 2>/dev/null | sed 's/^/    | /'; }

if [ "$(id -u)" != 0 ]; then
  fail "setup: must run as root (network namespaces)"
  summary
  exit 1
fi
for f in "$NN_TRAIN" "$NN_TESTS"; do
  if [ ! -x "$f" ]; then fail "setup: $f not found (make cpu)"; summary; exit 1; fi
done
if [ ! -e "$NN_DATA" ]; then fail "setup: $NN_DATA not found (make data)"; summary; exit 1; fi
case $NN_TRAIN in /*) ;; *) NN_TRAIN=$root/$NN_TRAIN ;; esac
case $NN_TESTS in /*) ;; *) NN_TESTS=$root/$NN_TESTS ;; esac
train_real=$(readlink -f "$NN_TRAIN")

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "${OUT:?}"/{logs,saves,reports}
mkdir -p "$OUT"/{logs,saves,reports}

bg=()
cleanup() {
  local rc=$? p
  set +e
  for p in "${bg[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
  # Ranks or orteds still in a node (a check cut short): theirs only.
  for n in $(nnsim_nodes); do
    for p in $(nnsim_node_pids "$n"); do kill -KILL "$p" 2>/dev/null; done
  done
  nnsim_down
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! nnsim_up 2; then
  fail "setup: the simulated nodes did not come up"
  summary
  exit 1
fi
echo "multinode: $(nnsim_status | paste -sd';' | sed 's/;/; /g')"

L() { "$here/launch.sh" "$@"; }                                 # over node-a and node-b
ONE() { "$root/slurm/mpirun.sh" --oversubscribe "$@"; }         # 4 ranks on one node

# ---- layout -----------------------------------------------------------------------------
got=$(timeout -k 5 "$(lim 60)" tests/multinode/launch.sh -np 4 hostname 2>"$OUT/logs/hostname.err" | sort | paste -sd' ')
if [ "$got" = "node-a node-a node-b node-b" ]; then
  pass "layout: mpirun -np 4 hostname over the simulated nodes: $got"
else
  fail "layout: mpirun -np 4 hostname printed '$got', expected node-a node-a node-b node-b"
  tail_of "$OUT/logs/hostname.err"
fi

# ---- no shared memory between the nodes -----------------------------------------------
# shellcheck disable=SC2086
NNSIM_BTL=self,vader timeout -k 5 "$(lim 60)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $TRAIN_ARGS \
  >"$OUT/logs/btl-vader.log" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q 'unable to reach each other' "$OUT/logs/btl-vader.log" &&
  grep -q 'is on host: node-b' "$OUT/logs/btl-vader.log"; then
  pass "no-shm: with --mca btl self,vader (no TCP) the job fails, exit $rc: '$(grep -m1 -o 'Process 1 .*is on host: node-a' "$OUT/logs/btl-vader.log")' cannot reach '$(grep -m1 -o 'Process 2 .*is on host: node-b' "$OUT/logs/btl-vader.log")': ranks on different nodes must use TCP"
else
  fail "no-shm: with --mca btl self,vader the job ended with exit $rc and without Open MPI's 'unable to reach each other' (the nodes would share memory)"
  tail_of "$OUT/logs/btl-vader.log"
fi

# ---- gtest suite --------------------------------------------------------------------------
t0=$(date +%s)
SIM_ORDER=random SIM_SEED=4 timeout -k 5 "$TIMEOUT" "$here/launch.sh" -np 4 "$NN_TESTS" \
  ${GTEST_FILTER:+"--gtest_filter=$GTEST_FILTER"} >"$OUT/logs/gtest.log" 2>&1
rc=$?
line=$(grep -E '^tests: [0-9]+ passed' "$OUT/logs/gtest.log" | tail -n 1)
if [ "$rc" = 0 ] && [[ $line =~ ^tests:\ [0-9]+\ passed,\ 0\ failed ]]; then
  pass "gtest: nn_tests at 4 ranks over node-a, node-b${GTEST_FILTER:+ (filter $GTEST_FILTER)}: $line ($(($(date +%s) - t0)) s)"
else
  fail "gtest: nn_tests at 4 ranks over 2 nodes: exit $rc${line:+, $line}$([ "$rc" = 124 ] && echo " (timed out after $TIMEOUT s)")"
  grep -E '^\[  FAILED|^tests:' "$OUT/logs/gtest.log" | head -n 20 | sed 's/^/    | /'
  tail_of "$OUT/logs/gtest.log" 8
fi

# ---- strategies x devices, multi-node vs one node ------------------------------------------
# Lower bound of what node-b must receive for one allreduce training: every step, the sum
# of node-a's gradients (one full parameter set) has to reach node-b.
params_of() { # HIDDEN -> parameter count of 784-H-10
  echo $((784 * $1 + $1 + $1 * 10 + 10))
}
arg_of() { # NAME ARGS... -> the value after --NAME
  local name=$1
  shift
  while [ $# -gt 1 ]; do
    [ "$1" = "--$name" ] && { echo "$2"; return; }
    shift
  done
}
# shellcheck disable=SC2086
set -- $TRAIN_ARGS
hidden=$(arg_of hidden "$@")
hidden=${hidden:-256}
tsize=$(arg_of train-size "$@")
batch=$(arg_of batch "$@")
batch=${batch:-100}
epochs=$(arg_of epochs "$@")
epochs=${epochs:-10}
has_node_shared=no
# The help read whole first: `grep -q` in a pipe stops reading at the match, and under pipefail
# the trainer's SIGPIPE then fails the test (the longer the help, the likelier).
train_help=$("$NN_TRAIN" --help 2>&1)
grep -q -- '--node-shared' <<<"$train_help" && has_node_shared=yes
for strategy in allreduce ps model; do
  for device in gpu cpu; do
    name=$strategy-$device
    # --device cpu on one node keeps the weights in shared memory by default (--node-shared
    # auto), another summation order than the all-reduce that 2 nodes use: compare like with like.
    one_args=()
    [ "$has_node_shared" = yes ] && [ "$device" = cpu ] && [ "$strategy" = allreduce ] && one_args=(--node-shared off)
    mn=$OUT/saves/$name.multinode.ckpt
    one=$OUT/saves/$name.onenode.ckpt
    before=$(nnsim_veth_bytes | awk '$1 == "node-b" { print $3 }')
    # shellcheck disable=SC2086
    timeout -k 5 "$(lim 120)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $TRAIN_ARGS --strategy "$strategy" \
      --device "$device" --verify --save "$mn" >"$OUT/logs/train-$name.multinode.log" 2>&1
    rc=$?
    after=$(nnsim_veth_bytes | awk '$1 == "node-b" { print $3 }')
    # shellcheck disable=SC2086
    timeout -k 5 "$(lim 120)" "$root/slurm/mpirun.sh" --oversubscribe -np 4 "$NN_TRAIN" --data "$NN_DATA" $TRAIN_ARGS \
      --strategy "$strategy" --device "$device" "${one_args[@]}" --save "$one" >"$OUT/logs/train-$name.onenode.log" 2>&1
    rc1=$?
    log=$OUT/logs/train-$name.multinode.log
    problems=()
    [ "$rc" = 0 ] || problems+=("exit $rc over 2 nodes")
    [ "$rc1" = 0 ] || problems+=("exit $rc1 on one node")
    grep -qE '^verify: .* ok$' "$log" || problems+=("no 'verify: ... ok' line")
    # One line per rank ("  rank 2 on node-b, ...") or per node ("ranks on node-b: 2->gpu0 3->gpu0 ...").
    n=$(grep -cE '^  rank [01] on node-a,|^  rank [23] on node-b,' "$log")
    n2=$(grep -cE '^ *ranks on node-a: 0->[^ ]+ 1->[^ ]+ |^ *ranks on node-b: 2->[^ ]+ 3->[^ ]+ ' "$log")
    [ "$n" = 4 ] || [ "$n2" = 2 ] || problems+=("ranks not 0,1 on node-a and 2,3 on node-b (rank lines: $(grep -E '^ *ranks? ' "$log" | head -n 4 | paste -sd'|'))")
    if [ -f "$mn" ] && [ -f "$one" ] && cmp -s "$mn" "$one"; then :; else problems+=("--save files differ (or are missing): cmp $mn $one"); fi
    if [ ${#problems[@]} = 0 ]; then
      pass "train $strategy --device $device: 4 ranks over 2 nodes, $(grep -E '^verify:' "$log" | sed 's/ (tolerance.*//'), --save cmp-identical to 4 ranks on one node ($(stat -c %s "$mn") bytes)"
    else
      fail "train $strategy --device $device: $(IFS=';'; echo "${problems[*]}")"
      tail_of "$log" 8
    fi
    if [ "$strategy" = allreduce ] && [ "$device" = gpu ] && [ -n "$tsize" ]; then
      # steps: train images less the validation tenth, in batches.
      elem=4
      grep -qE '^nn_train: .*trainer, double' "$log" && elem=8
      images=$((tsize - tsize / 10))
      steps=$((epochs * ((images + batch - 1) / batch)))
      need=$((steps * $(params_of "$hidden") * elem))
      got=$((after - before))
      if [ "$rc" = 0 ] && [ "$got" -ge "$need" ]; then
        pass "traffic: node-b's veth received $got bytes during the allreduce training, >= $need (the $steps allreduces' minimum: $steps x $(params_of "$hidden") parameters x $elem bytes): MPI went over the node addresses"
      else
        fail "traffic: node-b's veth received $got bytes during the allreduce training, expected >= $need"
      fi
    fi
  done
done
# --node-shared on needs every rank on one node: over 2 nodes, one line and exit 1.
if [ "$has_node_shared" = yes ]; then
  ns_log=$OUT/logs/node-shared-on.multinode.log
  # shellcheck disable=SC2086
  timeout -k 5 "$(lim 120)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $TRAIN_ARGS --device cpu \
    --node-shared on >"$ns_log" 2>&1
  rc=$?
  if [ "$rc" = 1 ] && grep -q 'error: --node-shared on needs every rank on one node' "$ns_log"; then
    pass "node-shared: --device cpu --node-shared on over 2 nodes refused (exit 1): $(grep -m1 'error:' "$ns_log" | cut -c1-120)"
  else
    fail "node-shared: --node-shared on over 2 nodes: exit $rc, expected 1 with 'needs every rank on one node'"
    tail_of "$ns_log" 6
  fi
fi

# ---- device mapping ---------------------------------------------------------------------------
rep=$OUT/reports/devices.json
# shellcheck disable=SC2086
SIM_DEVICES=4 timeout -k 5 "$(lim 120)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $TRAIN_ARGS --report "$rep" \
  >"$OUT/logs/devices.log" 2>&1
rc=$?
if [ "$rc" != 0 ] || [ ! -s "$rep" ]; then
  fail "devices: SIM_DEVICES=4 --report: exit $rc, report ${rep} $([ -s "$rep" ] && echo written || echo missing)"
  tail_of "$OUT/logs/devices.log" 8
else
  verdict=$(python3 - "$rep" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
ranks = None
for key in ("ranks", "rank_devices"):  # the array of {"rank", "host", "local_rank", "device", ...}
    if isinstance(rep, dict) and isinstance(rep.get(key), list):
        ranks = rep[key]; break
if ranks is None:
    print("SKIP no ranks array in the report (neither 'ranks' nor 'rank_devices' is a list)"); sys.exit()
want = {0: ("node-a", 0, 0), 1: ("node-a", 1, 1), 2: ("node-b", 0, 0), 3: ("node-b", 1, 1)}
got = {r.get("rank"): (r.get("host"), r.get("local_rank"), r.get("device")) for r in ranks}
desc = ", ".join(f"rank {k}: {v[0]} local {v[1]} device {v[2]}" for k, v in sorted(got.items(), key=lambda kv: str(kv[0])))
counts = sorted({r.get("device_count") for r in ranks}, key=str)
if got == want and counts == [4]:
    print(f"PASS {desc} (device_count 4)")
else:
    print(f"FAIL {desc}; device_count {counts}; want ranks 0,1 on node-a and 2,3 on node-b, devices 0,1 on each, device_count 4")
PY
)
  case $verdict in
    PASS*) pass "devices: SIM_DEVICES=4, 2 nodes x 2 ranks: ${verdict#PASS }" ;;
    SKIP*) skip "devices: SIM_DEVICES=4 ($rep): ${verdict#SKIP }" ;;
    *) fail "devices: SIM_DEVICES=4 ($rep): ${verdict#FAIL }" ;;
  esac
fi

# ---- node fault ---------------------------------------------------------------------------------
# wait_for FILE REGEX SECONDS PID: until REGEX appears in FILE (0), PID ends or time runs out (1).
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -Eq -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$4" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
usec() { local t=${1/./}; echo $((10#$t)); }
since() { awk -v d=$(($(usec "$EPOCHREALTIME") - $(usec "$1"))) 'BEGIN { printf "%.1f", d / 1e6 }'; }

ref=$OUT/saves/fault-ref.ckpt
t0=$(date +%s)
# shellcheck disable=SC2086
timeout -k 5 "$(lim 300)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $FAULT_ARGS --save "$ref" \
  >"$OUT/logs/fault-ref.log" 2>&1
rc=$?
ref_s=$(($(date +%s) - t0))
echo "multinode: reference training for the fault checks: ${ref_s} s"
if [ "$rc" != 0 ] || [ ! -f "$ref" ]; then
  fail "node-fault: the uninterrupted reference training failed (exit $rc)"
  tail_of "$OUT/logs/fault-ref.log" 8
fi

# fault_case NAME WHAT: WHAT = ranks (the nn_train processes on node-b) | node (every process
# in node-b's namespace: orted and ranks).
fault_case() {
  local name=$1 what=$2 f=$OUT/saves/$1.ckpt log=$OUT/logs/$1.log mpid rc victims secs runs problems=()
  rm -f "$f"
  # shellcheck disable=SC2086
  timeout -k 5 "$(lim 300)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $FAULT_ARGS --save "$f" --resume \
    --print-every 10 >"$log" 2>&1 </dev/null &
  mpid=$!
  bg+=("$mpid")
  # Mid-run: after the first epoch's first loss lines and at least one --save-every save.
  if ! wait_for "$log" '^[[:space:]]*epoch[[:space:]]+2[[:space:]]' 200 "$mpid"; then
    fail "$name: the training did not reach epoch 2 (exit or 200 s)"
    tail_of "$log" 8
    kill -TERM "$mpid" 2>/dev/null
    wait "$mpid" 2>/dev/null
    return
  fi
  if [ "$what" = ranks ]; then
    victims=$(nnsim_node_pids node-b "$train_real" | paste -sd' ')
  else
    victims=$(nnsim_node_pids node-b | paste -sd' ')
  fi
  local t_kill=$EPOCHREALTIME
  # shellcheck disable=SC2086
  kill -KILL $victims 2>/dev/null
  local fault_limit
  fault_limit=$(scaled "$FAULT_EXIT_S" "$(slowdown)")
  while kill -0 "$mpid" 2>/dev/null && awk -v s="$(since "$t_kill")" 'BEGIN { exit !(s < 60) }'; do sleep 0.1; done
  secs=$(since "$t_kill")
  if kill -0 "$mpid" 2>/dev/null; then
    problems+=("mpirun still running 60 s after the kill")
    kill -TERM "$mpid" 2>/dev/null
  fi
  wait "$mpid"
  rc=$?
  [ "$rc" != 0 ] || problems+=("mpirun exited 0")
  awk -v s="$secs" -v l="$fault_limit" 'BEGIN { exit !(s <= l) }' || problems+=("ended ${secs} s after the kill, limit $fault_limit s ($FAULT_EXIT_S x the slowdown)")
  local named
  # mpirun's own words: "mpirun noticed that process rank 3 with PID ... on node node-b
  # exited on signal 9 (Killed)." or "Remote daemon: [[...],1] on node node-b".
  named=$(grep -m1 -E 'on node node-b' "$log" | sed 's/^ *//' | cut -c1-200)
  [ -n "$named" ] || problems+=("no line of mpirun's output names node-b")
  # Resume on the same layout until the training completes (a few tries).
  runs=0
  local rrc=1
  while [ "$runs" -lt 3 ] && [ "$rrc" != 0 ]; do
    runs=$((runs + 1))
    # shellcheck disable=SC2086
    timeout -k 5 "$(lim 300)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" $FAULT_ARGS --save "$f" --resume \
      >"$log.resume$runs" 2>&1 </dev/null
    rrc=$?
  done
  [ "$rrc" = 0 ] || problems+=("--resume did not complete in $runs runs (last exit $rrc)")
  grep -q '^resume: .*; continuing$' "$log.resume1" 2>/dev/null || problems+=("the first rerun did not resume the saved state")
  if [ -f "$f" ] && [ -f "$ref" ] && cmp -s "$f" "$ref"; then :; else problems+=("cmp $f $ref: differ (or missing)"); fi
  if [ ${#problems[@]} = 0 ]; then
    pass "$name: SIGKILL of $(wc -w <<<"$victims") processes on node-b ($(if [ "$what" = ranks ]; then echo "its nn_train ranks"; else echo "everything in its namespace: orted + ranks"; fi)) mid-run: mpirun exited $rc after ${secs} s (limit $fault_limit), saying: \"$named\"; $runs --resume run(s) completed it, $(sed -n 's/^resume: //p' "$log.resume1" | head -n 1 | cut -c1-80); --save cmp-identical to the uninterrupted run's"
  else
    fail "$name: $(IFS=';'; echo "${problems[*]}")"
    tail_of "$log" 10
  fi
}
if [ -f "$ref" ]; then
  fault_case node-fault ranks
  fault_case node-lost node
fi

# ---- hung rank: SIGSTOP of a rank on node-b ------------------------------------------------------
hung_log=$OUT/logs/hung.log
has_timeout=no
grep -q -- '--timeout' <<<"$train_help" && has_timeout=yes
hung_args=(--device cpu --epochs 1000 --train-size 2000 --test-size 500 --hidden 32 --print-every 5)
[ "$has_timeout" = yes ] && hung_args+=(--timeout 3)
timeout -k 5 "$(lim 200)" "$here/launch.sh" -np 4 "$NN_TRAIN" --data "$NN_DATA" "${hung_args[@]}" >"$hung_log" 2>&1 </dev/null &
mpid=$!
bg+=("$mpid")
if wait_for "$hung_log" '^[[:space:]]*epoch[[:space:]]+[0-9]+[[:space:]]+batch' 120 "$mpid"; then
  sleep 1
  # As the lead's script does: pgrep -f in the root namespace.
  # pgrep -f also matches the launcher's command lines (they hold the program's): keep the
  # processes that are nn_train.
  found=()
  for p in $(pgrep -f -- "$NN_TRAIN --data" || true); do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$train_real" ] && found+=("$p")
  done
  victim="" on_b=0
  nsb=$(readlink "/proc/$(nnsim_pid_of node-b)/ns/net")
  for p in "${found[@]}"; do
    [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$nsb" ] || continue
    on_b=$((on_b + 1))
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ "$r" = 3 ] && victim=$p
  done
  if [ "${#found[@]}" = 4 ] && [ "$on_b" = 2 ] && [ -n "$victim" ]; then
    pass "hung-rank: pgrep -f in the root namespace finds the 4 ranks (pids ${found[*]}), 2 of them in node-b's network namespace; rank 3 is pid $victim"
    t_stop=$EPOCHREALTIME
    kill -STOP "$victim"
    if [ "$has_timeout" = yes ]; then
      while kill -0 "$mpid" 2>/dev/null && awk -v s="$(since "$t_stop")" 'BEGIN { exit !(s < 150) }'; do sleep 0.2; done
      secs=$(since "$t_stop")
      if kill -0 "$mpid" 2>/dev/null; then
        fail "hung-rank: rank 3 (node-b) SIGSTOPped, nn_train --timeout 3: the job still runs after $secs s"
        kill -CONT "$victim" 2>/dev/null
        kill -TERM "$mpid" 2>/dev/null
        wait "$mpid" 2>/dev/null
      else
        wait "$mpid"
        rc=$?
        if [ "$rc" = 6 ]; then
          pass "hung-rank: rank 3 on node-b SIGSTOPped, --timeout 3: mpirun exited 6 after $secs s: \"$(grep -m1 -iE 'timeout|timed out|waits' "$hung_log" | cut -c1-160)\""
        else
          fail "hung-rank: rank 3 on node-b SIGSTOPped, --timeout 3: mpirun exited $rc after $secs s, expected 6"
          tail_of "$hung_log" 8
        fi
      fi
    else
      sleep 3
      if kill -0 "$mpid" 2>/dev/null; then
        skip "hung-rank: rank 3 SIGSTOPped on node-b, the job hangs as expected; nn_train has no --timeout yet (exit 6 not checked)"
      else
        fail "hung-rank: the job ended while a rank was stopped"
      fi
      kill -CONT "$victim" 2>/dev/null
      kill -TERM "$mpid" 2>/dev/null
      wait "$mpid" 2>/dev/null
    fi
  else
    fail "hung-rank: pgrep -f found ${#found[@]} ranks (${found[*]}), $on_b in node-b's namespace, rank 3: '${victim}'; expected 4, 2, a pid"
    kill -TERM "$mpid" 2>/dev/null
    wait "$mpid" 2>/dev/null
  fi
else
  fail "hung-rank: the training did not start"
  tail_of "$hung_log" 8
  kill -TERM "$mpid" 2>/dev/null
  wait "$mpid" 2>/dev/null
fi
if [ -f tests/cli/hung_rank.sh ]; then
  # --map-by node: rank r on node r % 2, so 2 ranks span both nodes; both devices, ps once.
  timeout -k 5 "$(lim 300)" env MPIRUN="$here/launch.sh" MPIRUN_FLAGS="--map-by node" \
    HUNG_EXIT_S=8 HUNG_CASES="2:1:cpu 2:1:gpu 3:1:cpu 3:2:gpu:ps" bash tests/cli/hung_rank.sh "$NN_TRAIN" "$NN_DATA" \
    >"$OUT/logs/hung_rank.sh.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    pass "hung-rank: MPIRUN=tests/multinode/launch.sh tests/cli/hung_rank.sh: $(tail -n 1 "$OUT/logs/hung_rank.sh.log")"
  else
    fail "hung-rank: MPIRUN=tests/multinode/launch.sh tests/cli/hung_rank.sh: exit $rc"
    tail_of "$OUT/logs/hung_rank.sh.log" 10
  fi
fi

# ---- Slurm ------------------------------------------------------------------------------------------
if [ "${MULTINODE_SLURM:-1}" = 1 ]; then
  mn_slurm_timeout=${SLURM_TIMEOUT:-$(lim 300)}
  MN_OUT=$OUT NN_TRAIN=$NN_TRAIN NN_TESTS=$NN_TESTS NN_DATA=$NN_DATA MN_TRAIN_ARGS=$TRAIN_ARGS \
    SLURM_TIMEOUT=$mn_slurm_timeout timeout -k 60 $((mn_slurm_timeout + 120)) bash "$here/slurm.sh" >"$OUT/logs/slurm.log" 2>&1
  rc=$?
  grep -E '^(PASS|FAIL|SKIP) ' "$OUT/logs/slurm.log"
  p=$(grep -c '^PASS ' "$OUT/logs/slurm.log")
  f=$(grep -c '^FAIL ' "$OUT/logs/slurm.log")
  passes=$((passes + p))
  fails=$((fails + f))
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    fail "slurm: tests/multinode/slurm.sh exit $rc without a FAIL line"
    tail_of "$OUT/logs/slurm.log" 10
  fi
else
  skip "slurm: MULTINODE_SLURM=0"
fi

summary
