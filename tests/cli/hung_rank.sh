#!/usr/bin/env bash
# A stalled rank mid-training (the step timeout, nn_train --timeout; src/train/watchdog.h):
# starts a training under mpirun in the background, waits until it is training, SIGSTOPs one
# rank (a rank that stops answering without dying: a hung GPU, a node swapping, a stuck
# filesystem), and checks that the job ends by itself:
#
#   - mpirun exits within TIMEOUT + HUNG_EXIT_S (5) x F seconds of the stop, with status 6
#     (kExitTimeout, src/app/exit_codes.h; docs/usage.md#exit-codes), where F >= 1 is the
#     host's slowdown measured right after the stop (tests/cli/slowdown.sh: a busy host widens
#     the window; the timeout itself is not scaled, so a job that hangs still fails);
#   - rank 0 (or, when rank 0 is the stopped one, another rank) printed the one-line timeout
#     message naming the step and the MPI call it waits in; the stopped rank printed none;
#   - none of the job's nn_train processes is left once mpirun has exited.
#
# Cases NP:RANK:DEVICE[:STRATEGY[:COMM]] (the rank stopped): 2:1:cpu 3:2:cpu 2:1:gpu 3:0:gpu:ps
# 2:1:gpu:allreduce:nccl (--comm nccl on the emulator's NCCL, a device a rank: the live rank waits
# for the stream that holds the all-reduce, and its line must name ncclAllReduce) (HUNG_CASES
# overrides). With MPIRUN=tests/multinode/launch.sh the same runs over simulated
# nodes (make test-multinode). Prints the ranks' lines after the stop, so they can be read.
#
#   tests/cli/hung_rank.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), HUNG_CASES,
#   HUNG_TIMEOUT (5: the --timeout given), HUNG_EXIT_S (5), HUNG_START_S (120; both times the
#   measured slowdown), SLOWDOWN (a fixed factor instead), SIM_WORKERS (1), CLI_KEEP=1 keeps the logs.
# Prints "ok ..."/"FAIL ..." per case, then "hung_rank: N passed, M failed"; exits non-zero
# on any failure. Every process it starts is ended before it exits (SIGCONT, then SIGKILL).
set -uo pipefail
export LC_ALL=C

if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$1 data=$2
if [ ! -x "$train" ] || [ ! -d "$data" ]; then
  echo "FAIL trainer $train or data directory $data not found"
  echo "hung_rank: 0 passed, 1 failed"
  exit 1
fi
case $train in /*) ;; *) train=$PWD/$train ;; esac
case $data in /*) ;; *) data=$PWD/$data ;; esac
train_real=$(readlink -f "$train")

mpirun_cmd=${MPIRUN:-$(cd "$(dirname "$0")/../.." && pwd)/slurm/mpirun.sh}
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"
read -r -a cases <<<"${HUNG_CASES:-2:1:cpu 3:2:cpu 2:1:gpu 3:0:gpu:ps 2:1:gpu:allreduce:nccl}"
timeout_s=${HUNG_TIMEOUT:-5}
exit_s=${HUNG_EXIT_S:-5}
. "$(cd "$(dirname "$0")" && pwd)/slowdown.sh"
start_factor=$(slowdown)
start_limit=$(scaled "${HUNG_START_S:-120}" "$start_factor")
export SIM_WORKERS=${SIM_WORKERS:-1}
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-hung-rank.XXXXXX")
keep=${CLI_KEEP:-0}
mpid=""
tag=""
# Our trainer's processes of this case: the exe is ours and the environment holds the case's
# tag (passed to every rank with mpirun -x, so this also finds ranks on simulated nodes).
ranks_of_case() {
  local f p env
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$train_real" ] || continue
    # (read whole first: with pipefail, grep -q quitting early could fail tr with SIGPIPE)
    env=$(tr '\0' '\n' <"$f" 2>/dev/null) || continue
    grep -qx "NN_HUNG_TAG=$tag" <<<"$env" && echo "$p"
  done
}
rank_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }
stop_ours() {
  local p
  [ -n "$tag" ] && for p in $(ranks_of_case); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  if [ -n "$mpid" ] && kill -0 "$mpid" 2>/dev/null; then
    kill -TERM "$mpid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$mpid" 2>/dev/null || break; sleep 0.3; done
    kill -KILL "$mpid" 2>/dev/null
  fi
  if [ -n "$mpid" ]; then wait "$mpid" 2>/dev/null; fi
  return 0
}
cleanup() {
  stop_ours
  if [ "$keep" = 1 ]; then echo "hung_rank: logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

usec() { local t=${1/./}; echo $((10#$t)); }  # EPOCHREALTIME -> microseconds
since() { awk -v d=$(($(usec "$EPOCHREALTIME") - $(usec "$1"))) 'BEGIN { printf "%.1f", d / 1e6 }'; }
over() { awk -v s="$(since "$1")" -v l="$2" 'BEGIN { exit !(s > l) }'; }

passed=0 failed=0
failed_names=()
echo "== hung_rank: $train, --timeout $timeout_s, cases (ranks:stopped rank:device[:strategy]) ${cases[*]}; slowdown now $start_factor =="

# With --comm nccl the victim may be stopped after its all-reduce and before the step's flag
# exchange (agree_after_step): the live rank then rightly waits in MPI_Allreduce, and the case runs
# again (at most twice) for a stop inside the all-reduce.
queue=("${cases[@]}") again=0
while [ "${#queue[@]}" -gt 0 ]; do
  c=${queue[0]} queue=("${queue[@]:1}")
  IFS=: read -r np victim device strategy comm <<<"$c"
  strategy=${strategy:-allreduce} comm=${comm:-host}
  name="np=$np, SIGSTOP rank $victim, --device $device --strategy $strategy --comm $comm"
  # What the live rank's line must name: the MPI call it waits in, or NCCL's all-reduce.
  waits_in='MPI_[A-Za-z]+'; [ "$comm" = nccl ] && waits_in=ncclAllReduce
  log=$work/case.$np.$victim.$device.$strategy.$comm.log
  problems=()
  tag=$RANDOM$RANDOM
  : >"$log"
  NN_HUNG_TAG=$tag SIM_DEVICES=$np "$mpirun_cmd" "${mpirun_flags[@]}" -x NN_HUNG_TAG -x SIM_DEVICES -np "$np" "$train" --data "$data" \
    --device "$device" --strategy "$strategy" --comm "$comm" --hidden 32 --batch 100 --train-size 2000 --test-size 500 \
    --epochs 100000 --timeout "$timeout_s" >"$log" 2>&1 </dev/null &
  mpid=$!
  t_start=$EPOCHREALTIME
  started=no
  while kill -0 "$mpid" 2>/dev/null && ! over "$t_start" "$start_limit"; do
    if grep -Eq '^epoch +2 ' "$log"; then started=yes; break; fi
    sleep 0.2
  done
  victim_pid="" all=()
  if [ "$started" = yes ]; then
    for p in $(ranks_of_case); do
      all+=("$p")
      [ "$(rank_of "$p")" = "$victim" ] && victim_pid=$p
    done
  fi
  if [ "$started" != yes ]; then
    problems+=("training did not reach epoch 2 within ${start_limit}s (or mpirun ended first)")
  elif [ "${#all[@]}" != "$np" ] || [ -z "$victim_pid" ]; then
    problems+=("found ${#all[@]} rank processes (${all[*]}), expected $np including rank $victim")
  else
    t_stop=$EPOCHREALTIME
    kill -STOP "$victim_pid"
    stopped_at=$(grep -E '^epoch ' "$log" | tail -n 1)
    # The calibration while the live ranks wait (they poll in MPI): it runs inside the window.
    factor=$(slowdown)
    exit_limit=$((timeout_s + $(scaled "$exit_s" "$factor")))
    while kill -0 "$mpid" 2>/dev/null && ! over "$t_stop" "$exit_limit"; do sleep 0.1; done
    if kill -0 "$mpid" 2>/dev/null; then
      problems+=("mpirun still running ${exit_limit}s after the stop (the job hangs)")
      secs="> $exit_limit" rc="(none)"
    else
      secs=$(since "$t_stop")
      wait "$mpid"
      rc=$?
      [ "$rc" = 6 ] || problems+=("mpirun exited with status $rc, expected 6 (kExitTimeout)")
    fi
    live=0; [ "$victim" = 0 ] && live=1
    grep -Eq "^nn_train: timeout on rank $live \(.*\): (step [0-9]+ \(epoch [0-9]+, batch [0-9]+/[0-9]+\)|the end of epoch [0-9]+ .*) did not complete within $timeout_s(\.0)? s \(--timeout\); .* in $waits_in.*exit code 6\)$" "$log" ||
      problems+=("no timeout line from rank $live naming the step and the call it waits in ($waits_in)")
    grep -q "^nn_train: timeout on rank $victim " "$log" &&
      problems+=("the stopped rank $victim printed a timeout line (it cannot have been waiting)")
    sleep 1
    for p in "${all[@]}"; do
      st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)
      [ -n "$st" ] && [ "$st" != Z ] && problems+=("nn_train process $p (rank $(rank_of "$p")) left after mpirun exited")
    done
  fi
  stop_ours
  mpid="" tag=""
  if [ "$comm" = nccl ] && [ "${#problems[@]}" = 1 ] && [[ ${problems[0]} == "no timeout line"* ]] && [ "$again" -lt 2 ] &&
     grep -Eq "^nn_train: timeout on rank $live \(.*\): step [0-9]+ .* in MPI_Allreduce .*exit code 6\)$" "$log"; then
    again=$((again + 1)) queue=("$c" "${queue[@]}")
    echo "again $name: rank $live waits in the step's flag exchange (MPI_Allreduce): the stop came after rank $victim's all-reduce"
    unset secs rc stopped_at factor exit_limit
    continue
  fi
  if [ "${#problems[@]}" = 0 ]; then
    passed=$((passed + 1))
    echo "ok   $name: mpirun exited with status $rc ${secs} s after the stop (limit ${exit_limit} s: $timeout_s + $exit_s x slowdown $factor)"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    echo "FAIL $name${secs:+ (mpirun status ${rc:-?}, ${secs} s after the stop, limit ${exit_limit:-?} s)}"
    for p in "${problems[@]}"; do echo "       - $p"; done
  fi
  echo "       stopped after: ${stopped_at:-?}"
  grep -E '^nn_train: ' "$log" | sed 's/^/       | /'
  unset secs rc stopped_at factor exit_limit
done

echo "hung_rank: $passed passed, $failed failed ($((SECONDS)) s)"
if [ "$failed" -ne 0 ]; then
  printf '  failed: %s\n' "${failed_names[@]}"
  exit 1
fi
