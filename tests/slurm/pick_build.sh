#!/usr/bin/env bash
# slurm/common.sh's nn_pick_build, the build and device a job script trains with, in every case
# that matters to a user: a visible GPU (a stand-in nvidia-smi) with and without the CUDA build,
# a job that asked for GPUs, an explicit --device or NN_BUILD, and each caller's role (train,
# run: profile and scaling, tests). Never the emulator by surprise: a visible GPU without the
# CUDA build trains with --device cpu (train) or stops with one line. No Slurm needed: run by
# make test (test-build). Ends with `pick_build: N passed, M failed`.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pick-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/gpu" "$tmp/nogpu" "$tmp/with-cuda/build/cuda/bin" "$tmp/without-cuda"
printf '#!/bin/sh\necho "GPU 0: stand-in"\n' >"$tmp/gpu/nvidia-smi"
printf '#!/bin/sh\nexit 9\n' >"$tmp/nogpu/nvidia-smi"
printf '#!/bin/sh\n' >"$tmp/with-cuda/build/cuda/bin/nn_train"
chmod +x "$tmp/gpu/nvidia-smi" "$tmp/nogpu/nvidia-smi" "$tmp/with-cuda/build/cuda/bin/nn_train"
passed=0 failed=0

# pick GPU(gpu|nogpu) TREE(with-cuda|without-cuda) ENV ROLE ARGS...: prints "STATUS|NN_BUILD|DEVICE ARGS|LINES".
pick() {
  local gpu=$1 tree=$2 env=$3 role=$4
  shift 4
  (
    cd "$tmp/$tree" || exit 2
    for v in $(compgen -v SLURM_); do unset "$v"; done
    unset NN_BUILD
    export PATH="$tmp/$gpu:$PATH"
    [ "$env" = - ] || export "${env?}"
    # shellcheck source=slurm/common.sh
    . "$root/slurm/common.sh"
    out=$(nn_pick_build "$role" "$@" 2>&1; echo "|$NN_BUILD|${NN_DEVICE_ARGS[*]}")
    echo "0|${out##*$'\n'}|$(printf '%s\n' "$out" | sed '$d' | grep -c .)|$(printf '%s\n' "$out" | sed '$d' | tr '\n' ' ')"
  ) 2>&1 | tail -n 1
}
# expect NAME WANT GOT: WANT is a regex over GOT.
expect() {
  if [[ $3 =~ $2 ]]; then echo "ok   pick_build: $1"; passed=$((passed + 1));
  else echo "FAIL pick_build: $1: got '$3', wanted /$2/"; failed=$((failed + 1)); fi
}
# Where nn_pick_build stops (nn_die), its one line is all the output holds.
expect "GPU, no CUDA build, train: the host's cores, said in one line" \
  '^0\|\|cpu\|--device cpu\|1\|.*note: .*--device cpu' "$(pick gpu without-cuda - train --epochs 1)"
expect "GPU, no CUDA build, train --device gpu: stops in one line" \
  'error: a GPU is visible but build/cuda/bin/nn_train is missing' "$(pick gpu without-cuda - train --device gpu)"
expect "GPU, no CUDA build, profile or scaling: stops in one line" \
  'error: a GPU is visible but build/cuda/bin/nn_train is missing' "$(pick gpu without-cuda - run --epochs 1)"
expect "GPU, no CUDA build, the test suite: the emulator's, with a note" \
  '^0\|\|cpu\|\|1\|.*note: .*emulator build' "$(pick gpu without-cuda - tests)"
expect "GPU, no CUDA build, --device cpu: the host's cores, nothing to say" \
  '^0\|\|cpu\|\|0\|' "$(pick gpu without-cuda - train --device=cpu)"
expect "GPU, no CUDA build, NN_BUILD=cpu: the emulator, as asked" \
  '^0\|\|cpu\|\|0\|' "$(pick gpu without-cuda NN_BUILD=cpu train)"
expect "GPU and the CUDA build: the CUDA build" \
  '^0\|\|cuda\|\|0\|' "$(pick gpu with-cuda - train)"
expect "no GPU: the emulator build, nothing to say" \
  '^0\|\|cpu\|\|0\|' "$(pick nogpu without-cuda - train)"
expect "GPUs asked, no CUDA build: stops in one line" \
  'error: the job asked for GPUs but build/cuda/bin/nn_train is missing' "$(pick gpu without-cuda SLURM_GPUS_PER_TASK=1 train)"
expect "GPUs asked, no usable GPU: stops in one line" \
  'error: the job asked for GPUs but none is usable' "$(pick nogpu with-cuda SLURM_GPUS_PER_TASK=1 train)"
echo "pick_build: $passed passed, $failed failed"
[ "$failed" = 0 ]
