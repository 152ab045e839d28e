#!/usr/bin/env bash
# Where nvcc exists, the CUDA trainer must link NCCL (--comm nccl): libnccl in its NEEDED entries,
# at least one nccl* function taken from it, and the loader finding it without LD_LIBRARY_PATH
# (the rpath .ci/deps.sh gives it): src/comm/nccl.cpp calls NCCL where the build defines
# NN_HAVE_NCCL. Without nvcc there is no CUDA build: nothing to check. Prints one line, `check_nccl_link: PASS ...`, `... FAIL ...` (exit 1) or `... skipped ...`.
# NN_NCCL_LINK=optional: a build without NCCL (.ci/deps.sh found none: offline setup, say) is
# skipped instead of failing.
#
#   bash tests/build/check_nccl_link.sh [BINARY]     BUILD=build (its deps.mk and cuda/bin/nn_train)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
bin=${1:-$BUILD/cuda/bin/nn_train}
txt=$BUILD/deps.mk.txt
say() { echo "check_nccl_link: $*"; }

[ -f "$txt" ] || { say "FAIL: no $txt (run make first)"; exit 1; }
cuda=$(grep -m1 '^cuda|' "$txt" | cut -d'|' -f2)
nccl=$(grep -m1 '^nccl|' "$txt" | cut -d'|' -f3- | tr -s ' ')
[ "$cuda" = found ] || { say "skipped: no nvcc, so no CUDA build to link NCCL"; exit 0; }
if ! grep -q '^nccl|found|' "$txt"; then
  [ "${NN_NCCL_LINK:-}" != optional ] || { say "skipped: built without NCCL (NN_NCCL_LINK=optional): ${nccl:-no nccl line}"; exit 0; }
  say "FAIL: nvcc exists but .ci/deps.sh found no NCCL: ${nccl:-no nccl line in $txt}"; exit 1
fi
[ -x "$bin" ] || { say "FAIL: $bin is not built (make $bin)"; exit 1; }
needed=$(readelf -d "$bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(libnccl[^]]*\)\].*/\1/p' | head -1)
[ -n "$needed" ] || { say "FAIL: $bin has no NEEDED libnccl: no object calls NCCL (NN_HAVE_NCCL not defined where it is used?) or it was linked before NCCL was found (make again); $nccl"; exit 1; }
nsyms=$(nm -D --undefined-only "$bin" 2>/dev/null | grep -c ' U nccl')
[ "$nsyms" -gt 0 ] || { say "FAIL: $bin lists $needed but calls no nccl* function (no object built with -DNN_HAVE_NCCL uses NCCL)"; exit 1; }
path=$(env -u LD_LIBRARY_PATH ldd "$bin" 2>/dev/null | sed -n "s/^[[:space:]]*$needed => \([^ ]*\).*/\1/p")
case $path in
  /*) say "PASS: $bin links $needed => $path without LD_LIBRARY_PATH, $nsyms nccl* functions; $nccl" ;;
  *) say "FAIL: $bin links $needed, but the loader does not find it without LD_LIBRARY_PATH (${path:-not found})"; exit 1 ;;
esac
