#!/usr/bin/env bash
# --comm nccl end to end on the emulator build (the emulator's NCCL, sim/docs/nccl.md), each rank
# on an emulated device of its own (SIM_DEVICES=NP):
#   - at each count of NP_LIST: --verify passes, the header names NCCL and its version, the
#     --report says "comm": "nccl";
#   - at 1 and 2 ranks the --save file's weights equal --comm host's, byte for byte (at 2 ranks
#     every value is one addition whichever library adds); at 3 and more only --verify counts;
#   - two ranks on one device (SIM_DEVICES=1) are refused with one line and exit 1 before NCCL
#     starts.
#
#   tests/cli/nccl.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), NP_LIST (1 2),
#   NAME (nccl: the summary's name).
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
name=${NAME:-nccl}
hidden=32
args=(--hidden $hidden --batch 70 --epochs 2 --train-size 1000 --test-size 200 --lr 0.3)
export SIM_WORKERS=${SIM_WORKERS:-1}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-nccl.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# The weights' bytes of a float checkpoint: after the 32-byte header, (785 H + 10 H + 10) values.
weights() { tail -c +33 "$1" | head -c $((4 * (785 * hidden + 10 * hidden + 10))); }
# run NP DEVICES LOG ARGS...: one training on NP ranks with DEVICES emulated devices each.
run() {
  local np=$1 devices=$2 log=$3
  shift 3
  SIM_DEVICES=$devices "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" "${args[@]}" "$@" >"$log" 2>&1
}

for np in "${np_list[@]}"; do
  t0=$SECONDS
  run "$np" "$np" "$work/nccl$np.log" --comm nccl --verify --save "$work/nccl$np.bin" --report "$work/nccl$np.json"
  rc=$?
  log=$work/nccl$np.log
  if [ "$rc" != 0 ]; then
    fail "$np rank(s): --comm nccl exited $rc"; tail -5 "$log"; continue
  fi
  if grep -q '^verify: .* ok$' "$log"; then ok "$np rank(s): --comm nccl --verify ok"
  else fail "$np rank(s): --verify did not pass"; grep '^verify' "$log"; fi
  if grep -Eq '^communication: .*NCCL [0-9]+\.[0-9]+\.[0-9]+ (on device memory|ready)' "$log"; then
    ok "$np rank(s): the header names NCCL and its version"
  else fail "$np rank(s): no NCCL version in the header"; grep '^communication' "$log"; fi
  if grep -q '"comm": "nccl"' "$work/nccl$np.json"; then ok "$np rank(s): the report says \"comm\": \"nccl\""
  else fail "$np rank(s): the report has no \"comm\": \"nccl\""; fi
  if [ "$np" -le 2 ]; then
    run "$np" "$np" "$work/host$np.log" --comm host --save "$work/host$np.bin"
    if cmp -s <(weights "$work/nccl$np.bin") <(weights "$work/host$np.bin"); then
      ok "$np rank(s): --comm nccl's weights are --comm host's, byte for byte"
    else fail "$np rank(s): --comm nccl's weights differ from --comm host's"; fi
  fi
  echo "   ($np rank(s): $((SECONDS - t0)) s)"
done

run 2 1 "$work/shared.log" --comm nccl
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c 'share the GPU' "$work/shared.log")" = 1 ]; then
  ok "two ranks on one device: exit 1, one line ($(grep -m1 'share the GPU' "$work/shared.log" | cut -c1-80)...)"
else
  fail "two ranks on one device: exit $rc (expected 1 and one line naming the shared GPU)"; tail -5 "$work/shared.log"
fi

echo "$name: $passed passed, $failed failed"
[ "$failed" = 0 ]
