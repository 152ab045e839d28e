#!/usr/bin/env bash
# Exact resumption with real signals: train uninterrupted with --save A; train
# the same configuration with --save B --resume --save-every 5, send SIGUSR1 to mpirun while
# it trains (mpirun forwards it to the ranks), and run the same command again until it exits
# 0; then A and B must be byte-identical (cmp). Each stopped run must exit 75 (kExitStopped).
#
#   tests/cli/resume_signal.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), NP (2), SIM_WORKERS (1),
#   RESUME_ARGS (training options), STOP_AFTER_DS (15: tenths of a second of training before each signal).
# Prints "ok ..."/"FAIL ..." and "resume_signal: N passed, M failed"; non-zero on failure.
set -uo pipefail
export LC_ALL=C
if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$1 data=$2
mpirun_cmd=${MPIRUN:-$(cd "$(dirname "$0")/../.." && pwd)/slurm/mpirun.sh}  # a private session directory per launch
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"
np=${NP:-2}
read -r -a args <<<"${RESUME_ARGS:---epochs 4 --train-size 12000 --test-size 500 --hidden 32 --batch 100}"
stop_after=${STOP_AFTER_DS:-15}
export SIM_WORKERS=${SIM_WORKERS:-1}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-resume.XXXXXX")
mpid=
cleanup() {
  if [ -n "$mpid" ] && kill -0 "$mpid" 2>/dev/null; then kill -KILL "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
ok() { echo "ok $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
run() { "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" "${args[@]}" "$@"; }

if run --save "$work/A" >"$work/a.log" 2>&1; then ok "uninterrupted run saved A"; else fail "uninterrupted run: exit $?"; tail -5 "$work/a.log"; fi

stops=0 rc=75
for attempt in $(seq 1 30); do
  # mpirun itself in the background (not a function's subshell), so the signal reaches it.
  "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" "${args[@]}" \
    --save "$work/B" --resume --save-every 5 >"$work/b$attempt.log" 2>&1 &
  mpid=$!
  # Signal once the run has trained for a while, unless it ended first, and not before its
  # first line is out: rank 0 prints it after MPI_Init, so every rank has its handler by then
  # (a busy host can take longer than STOP_AFTER_DS to get there; before the handler, the
  # signal would kill the rank instead of stopping it).
  for _ in $(seq 1 "$stop_after"); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
  while kill -0 "$mpid" 2>/dev/null && ! [ -s "$work/b$attempt.log" ]; do sleep 0.1; done
  [ "$attempt" -le 3 ] && kill -USR1 "$mpid" 2>/dev/null
  wait "$mpid"
  rc=$?
  mpid=
  [ "$rc" = 0 ] && break
  if [ "$rc" = 75 ]; then
    stops=$((stops + 1))
  else
    fail "attempt $attempt exited $rc, expected 0 or 75"
    tail -5 "$work/b$attempt.log"
    break
  fi
done
if [ "$rc" = 0 ] && [ "$stops" -ge 1 ]; then
  ok "resumed run finished after $stops stop(s) by SIGUSR1 (exit 75 each): $(grep -h '^stopped by a signal' "$work"/b*.log | sed 's/;.*//' | paste -sd, -)"
else
  fail "resumed run: last exit $rc after $stops stop(s) (the signal must stop at least one run; raise RESUME_ARGS' size on a fast machine)"
fi
if cmp "$work/A" "$work/B"; then ok "cmp A B: identical ($(stat -c %s "$work/A") bytes)"; else fail "A and B differ"; fi
echo "resume_signal: $passed passed, $failed failed"
[ "$failed" = 0 ]
