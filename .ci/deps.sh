#!/usr/bin/env bash
# Finds each build dependency where a cluster or a distribution keeps it, prints one line per
# dependency (found where, or missing and needed by which targets) and writes the flags as a
# make fragment. Tested by tests/cluster/ (module prefixes, both module styles) and make test-build.
#
#   bash .ci/deps.sh probe OUT.mk      probe everything, write OUT.mk and OUT.mk's .txt, never fail
#   bash .ci/deps.sh need ROLE OUT.mk  exit 1 with one line per missing dependency of ROLE
#                                      (toolchain trainer emulator tests cuda onednn nccl)
#
# Where a dependency is looked for, first match wins: <NAME>_ROOT, <NAME>_DIR (a prefix, or a
# CMake config directory below one) and EasyBuild's EBROOT<NAME>; pkg-config; each prefix of
# CMAKE_PREFIX_PATH; then the compiler's own search (CPATH, LIBRARY_PATH, CPPFLAGS, LDFLAGS,
# system directories); NCCL (optional, the CUDA build's) last in the layout of pip's wheel
# nvidia-nccl-cu<N>, in the site-packages of VIRTUAL_ENV, of the python3 on PATH (the user's too)
# and OUT.mk's directory's pip/ (make setup's). Every probe compiles and links with exactly the
# flags the build uses (CPPFLAGS and LDFLAGS included; for NCCL, CUDA's headers and cudart).
# Every library directory outside the system's gets an rpath (DT_RPATH, so that the libraries'
# own dependencies are found too): a job needs no LD_LIBRARY_PATH.
set -uo pipefail
. "$(dirname "$0")/deps_lib.sh"

case ${1:-} in
  probe) [ $# = 2 ] || { echo "usage: deps.sh probe OUT.mk" >&2; exit 2; }; deps_probe "$2" ;;
  need) [ $# = 3 ] || { echo "usage: deps.sh need ROLE OUT.mk" >&2; exit 2; }; deps_need "$2" "$3" ;;
  *) echo "usage: deps.sh probe OUT.mk | need ROLE OUT.mk" >&2; exit 2 ;;
esac
