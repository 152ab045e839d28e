#!/usr/bin/env bash
# nsys.sh under a real Nsight Systems: two short trainings at 2 ranks with the emulator build
# (--device gpu: our CUDA kernels on the SIMT emulator; --device cpu), each profiled by nsys.sh;
# then, from each rank's exported NVTX summary, that every expected range is there as often as
# it should be (tests/nsys/check_ranges.py: the table of ranges and counts); and that nsys.sh
# fails with one line where nsys is missing or the profiled run fails.
#
#   tests/nsys/check_nsys.sh NN_TRAIN DATA_DIR
#
# NN_TRAIN  the emulator build's trainer (build/cpu/bin/nn_train); DATA_DIR: IDX files (make data)
# Environment: NSYS_TEST_OUT (work directory, default a temporary one, removed on success),
# NSYS_TEST_TIMEOUT (seconds per profiled run, default 120), MPIRUN, MPIRUN_FLAGS (--oversubscribe).
# Prints "ok ..."/"FAIL ..." per check, then "nsys: N passed, M failed"; exit 1 on any failure.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$1 data=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
# The run: 1000 images, 10% held out for validation -> 900 / batch 100 = 9 batches per epoch.
EPOCHS=2 BATCHES=9 NP=2
TRAIN_ARGS=(--train-size 1000 --val-fraction 0.1 --test-size 100 --epochs "$EPOCHS" --batch 100 --hidden 16)
timeout_s=${NSYS_TEST_TIMEOUT:-120}
export MPIRUN_FLAGS=${MPIRUN_FLAGS---oversubscribe}
[ -z "${MPIRUN:-}" ] || export MPIRUN
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
finish() {
  echo "nsys: $passed passed, $failed failed"
  if [ "$failed" -gt 0 ]; then echo "nsys: outputs kept in $work"; exit 1; fi
  [ -n "${NSYS_TEST_OUT:-}" ] || rm -rf "$work"
  exit 0
}

work=${NSYS_TEST_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/nsys-check.XXXXXX")}
mkdir -p "$work"
for f in "$train" "$root/nsys.sh"; do [ -x "$f" ] || [ -f "$f" ] || { fail "missing $f"; finish; }; done
[ -d "$data" ] || { fail "missing data directory $data (make data)"; finish; }
if ! command -v nsys >/dev/null 2>&1; then fail "nsys not on PATH (make setup-nsys installs Debian's nsight-systems)"; finish; fi
echo "== $(nsys --version 2>&1 | head -n 1), $NP ranks, $EPOCHS epochs of $BATCHES batches, work directory $work =="

# profile DEVICE SAMPLE: nsys.sh on a short training; the log in $work/DEVICE.log.
# Nsight Systems 2022.4 on a busy VM now and then loses a rank's agent at start ("Connection to
# the Agent lost": that rank never starts, the other waits in MPI_Init until NSYS_TIMEOUT).
# Seen in the log, nsys.sh is stopped (its TERM trap stops the ranks' nsys) and run again, up to
# three tries (it hit one start in four on a VM busy with four builds; a CI run should not fail
# on it). --device gpu runs with --no-graph: a replayed CUDA graph repeats the step's kernels but
# not the host's NVTX ranges, so the per-batch counts below need every launch from the host.
profile() {
  local device=$1 sample=$2 try rc start pid lost
  local -a extra=()
  [ "$device" = gpu ] && extra=(--no-graph)
  for try in 1 2 3; do
    start=$(date +%s) lost=
    # SLURM_SUBMIT_DIR: nsys.sh's working directory (the repository), without a subshell,
    # so that $! is nsys.sh itself.
    SLURM_SUBMIT_DIR=$root NP=$NP NN_BIN=$train NN_DATA=$data OUT=$work/$device NSYS_SAMPLE=$sample \
      NSYS_TIMEOUT=$timeout_s bash "$root/nsys.sh" "${TRAIN_ARGS[@]}" "${extra[@]}" --device "$device" >"$work/$device.log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$try" -lt 3 ] && grep -q "Connection to the Agent lost" "$work/$device.log"; then
        lost=yes
        kill -TERM "$pid" 2>/dev/null
        break
      fi
      sleep 1
    done
    rc=0
    wait "$pid" || rc=$?
    echo "   nsys.sh --device $device (NSYS_SAMPLE=$sample): exit $rc, $(($(date +%s) - start)) s"
    if [ -n "$lost" ]; then
      echo "   (nsys lost a rank's agent at start, a known hiccup of nsys 2022.4 here: stopped, trying again)"
      mv "$work/$device.log" "$work/$device.try$try.log"
      continue
    fi
    return "$rc"
  done
}

check_run() {  # check_run DEVICE SAMPLE
  local device=$1 sample=$2 rc=0 r n
  profile "$device" "$sample" || rc=$?
  if [ "$rc" = 0 ]; then ok "[$device] nsys.sh exits 0"; else
    fail "[$device] nsys.sh exits 0 (exit $rc; last lines of $work/$device.log:)"
    tail -n 15 "$work/$device.log" | sed 's/^/     /'
    return 0
  fi
  if grep -q "^nsys.sh: reports and CSV summaries in $work/$device/" "$work/$device.log"; then
    ok "[$device] nsys.sh says where its reports and CSVs are"
  else fail "[$device] nsys.sh's last line names $work/$device/"; fi
  if grep -q '^test precision: [0-9.]' "$work/$device.log"; then ok "[$device] the trainer finished under nsys"
  else fail "[$device] the trainer's 'test precision:' line"; fi
  if [ "$sample" = auto ]; then
    if grep -qE '^nsys.sh: (note: a probe profile|CPU sampling and context-switch tracing: on)' "$work/$device.log"; then
      ok "[$device] NSYS_SAMPLE=auto: the probe decided ($(grep -oE 'probe profile with .*(did not finish|finished)' "$work/$device.log" | head -n 1))"
    else fail "[$device] NSYS_SAMPLE=auto printed what its probe decided"; fi
  fi
  n=$(find "$work/$device" -name 'nn_rank*.nsys-rep' | wc -l)
  if [ "$n" = "$NP" ]; then ok "[$device] one report per rank ($n)"; else fail "[$device] $n reports, expected $NP"; fi
  for ((r = 0; r < NP; r++)); do
    [ ! -e "$work/$device/nn_rank$r.qdstrm" ] || fail "[$device] rank $r: a .qdstrm left unimported"
  done
  if python3 "$root/tests/nsys/check_ranges.py" "$device" "$EPOCHS" "$BATCHES" "$NP" "$work/$device" >"$work/$device.ranges" 2>&1; then
    ok "[$device] NVTX ranges and counts on every rank ($(tail -n 1 "$work/$device.ranges"))"
  else
    fail "[$device] NVTX ranges and counts (tests/nsys/check_ranges.py):"
    grep -v '^ok' "$work/$device.ranges" | sed 's/^/     /'
  fi
}

# nsys.sh's default: CPU sampling and context-switch tracing off (they hang nsys on this VM
# now and then, NSYS_SAMPLE=auto's probe notwithstanding).
check_run gpu off
check_run cpu off

# Failures: one `nsys.sh: error:` line and a non-zero exit.
one_error() {  # one_error WHAT LOG RC
  local lines
  lines=$(grep -c '^nsys.sh: error: ' "$2" || true)
  if [ "$3" != 0 ] && [ "$lines" = 1 ]; then ok "$1: exit $3, one error line ($(grep '^nsys.sh: error: ' "$2" | cut -c1-90)...)"
  else fail "$1: exit $3, $lines error line(s), expected a non-zero exit and one (see $2)"; fi
}
set +e
(cd "$root" && NSYS=nsys-not-installed NN_BIN=$train OUT=$work/none bash nsys.sh) >"$work/no-nsys.log" 2>&1
one_error "no nsys" "$work/no-nsys.log" $?
(cd "$root" && NSYS_SAMPLE=sometimes NN_BIN=$train OUT=$work/none bash nsys.sh) >"$work/bad-option.log" 2>&1
one_error "NSYS_SAMPLE=sometimes" "$work/bad-option.log" $?
(cd "$root" && NP=$NP NN_BIN=$train NN_DATA=$work/no-such-data OUT=$work/fails NSYS_SAMPLE=off NSYS_TIMEOUT=$timeout_s \
  bash nsys.sh --epochs 1) >"$work/run-fails.log" 2>&1
one_error "a profiled run that fails (no data)" "$work/run-fails.log" $?
set -e
finish
