#!/usr/bin/env bash
# --exact on end to end: the same training at several rank counts must leave the same weights,
# byte for byte (the --save file's W1 | b1 | W2 | b2; its training state holds per-rank sums
# and differs), and --verify must pass. The configuration (--batch 70: chunks of 32, 32 and 6
# images, a partial last batch of 60 with two chunks, shuffled) splits unevenly over 2 and 4
# ranks, and at 4 ranks one rank owns no chunk. Each device of DEVICES:
#   - a 1-rank run is the reference; every count of NP_LIST (other than 1) must match it, with
#     --strategy allreduce and, at the largest count, --strategy ps;
#   - --device cpu at 1 rank with one thread must match the reference's (the host's threads);
#   - without --exact, 1 and 2 ranks must differ (so the comparison can tell);
#   - RESUME=1: one epoch at 2 ranks, resumed at 3 for the second, must match the reference.
#
#   tests/cli/exact.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), NP_LIST (1 2),
#   DEVICES (cpu gpu: --device cpu and the emulator), RESUME (0), NAME (exact: the summary's name).
# Prints "ok ..."/"FAIL ..." and "NAME: N passed, M failed"; non-zero on failure.
set -uo pipefail
export LC_ALL=C
if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$1 data=$2
mpirun_cmd=${MPIRUN:-$(cd "$(dirname "$0")/../.." && pwd)/slurm/mpirun.sh}
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"
read -r -a np_list <<<"${NP_LIST:-1 2}"
read -r -a devices <<<"${DEVICES:-cpu gpu}"
resume=${RESUME:-0}
name=${NAME:-exact}
hidden=32
args=(--hidden $hidden --batch 70 --train-size 1000 --test-size 200 --lr 0.3)
export SIM_WORKERS=${SIM_WORKERS:-1}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-exact.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# The weights' bytes of a float checkpoint: after the 32-byte header, (785 H + 10 H + 10) values.
weights() { tail -c +33 "$1" | head -c $((4 * (785 * hidden + 10 * hidden + 10))); }
same_weights() { cmp -s <(weights "$1") <(weights "$2"); }
# run NP LOG ARGS...: one training; its log kept for a failure.
run() {
  local np=$1 log=$2
  shift 2
  "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" "${args[@]}" "$@" >"$log" 2>&1
}
# check WHAT FILE LOG RC: the run passed --verify and left FILE with the reference's weights.
check() {
  local what=$1 file=$2 log=$3 rc=$4
  if [ "$rc" != 0 ]; then fail "$what: exit $rc"; tail -3 "$log"; return; fi
  if ! grep -q '^verify: .* ok$' "$log"; then fail "$what: --verify did not pass"; grep '^verify' "$log"; return; fi
  if same_weights "$ref" "$file"; then ok "$what: the reference's weights, byte for byte; --verify ok"
  else fail "$what: the weights differ from the 1-rank run's"; fi
}

for dev in "${devices[@]}"; do
  ref=$work/$dev-ref
  t0=$SECONDS
  run 1 "$ref.log" --device "$dev" --epochs 2 --exact on --verify --save "$ref"
  rc=$?
  if [ "$rc" != 0 ]; then fail "$dev: the 1-rank reference run: exit $rc"; tail -3 "$ref.log"; continue; fi
  last=${np_list[${#np_list[@]}-1]}
  for np in "${np_list[@]}"; do
    [ "$np" = 1 ] && continue
    run "$np" "$work/$dev-$np.log" --device "$dev" --epochs 2 --exact on --verify --save "$work/$dev-$np"
    check "--device $dev, $np ranks" "$work/$dev-$np" "$work/$dev-$np.log" $?
    if [ "$np" = "$last" ]; then
      run "$np" "$work/$dev-$np-ps.log" --device "$dev" --epochs 2 --exact on --verify --strategy ps --save "$work/$dev-$np-ps"
      check "--device $dev, $np ranks, --strategy ps" "$work/$dev-$np-ps" "$work/$dev-$np-ps.log" $?
    fi
  done
  if [ "$dev" = cpu ] && [ "${np_list[0]}" = 1 ]; then  # one thread a rank against the host's cores
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 run 1 "$work/cpu-1t.log" --device cpu --epochs 2 --exact on --verify \
      --save "$work/cpu-1t"
    rc=$?
    threads=$(sed -n 's/^exact: .*, \([0-9]*\) at once on rank 0.s threads.*/\1/p' "$ref.log" | head -n 1)
    check "--device cpu, 1 rank, 1 thread (the reference: ${threads:-?})" "$work/cpu-1t" "$work/cpu-1t.log" $rc
  fi
  if [ "${np_list[0]}" = 1 ]; then  # without --exact, the bits follow the rank count
    run 1 "$work/$dev-off1.log" --device "$dev" --epochs 2 --save "$work/$dev-off1" &&
      run 2 "$work/$dev-off2.log" --device "$dev" --epochs 2 --save "$work/$dev-off2"
    rc=$?
    if [ "$rc" != 0 ]; then fail "--device $dev without --exact: exit $rc"
    elif same_weights "$work/$dev-off1" "$work/$dev-off2"; then fail "--device $dev without --exact: 1 and 2 ranks agree (the check cannot tell)"
    else ok "--device $dev without --exact: 1 and 2 ranks differ, as expected"; fi
  fi
  if [ "$resume" = 1 ]; then
    r=$work/$dev-resumed
    run 2 "$r.1.log" --device "$dev" --epochs 1 --exact on --save "$r" &&
      run 3 "$r.2.log" --device "$dev" --epochs 2 --exact on --verify --save "$r" --resume
    rc=$?
    grep -q '^resume: .*1 epochs and 0 of' "$r.2.log" || { [ "$rc" = 0 ] && rc="no resume line"; }
    check "--device $dev, saved at 2 ranks, resumed at 3" "$r" "$r.2.log" "$rc"
  fi
  echo "  ($dev: $((SECONDS - t0)) s)"
done
echo "$name: $passed passed, $failed failed"
[ "$failed" = 0 ]
