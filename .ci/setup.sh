#!/usr/bin/env bash
# Checks every build dependency by what the build needs (a header, a library, a tool),
# not by package name, so it also works with cluster modules. On a Debian-family system
# as root it installs what is missing with apt-get; elsewhere it says exactly what is
# missing and how to get it, and fails. Run by `make setup` (all targets depend on it).
set -euo pipefail

CXX=${CXX:-g++}
MPICXX=${MPICXX:-mpicxx}
missing_pkgs=()    # Debian packages to install
missing_desc=()    # human-readable list for non-Debian systems

have_cmd() { command -v "$1" >/dev/null 2>&1; }

# Does `#include <$1>` compile and, if $2 is given, does linking with $2 work?
# shellcheck disable=SC2317  # called indirectly, through need()
have_lib() {
  local header=$1 tmp link=()
  read -r -a link <<<"${2:-}"
  tmp=$(mktemp -d)
  printf '#include <%s>\nint main() { return 0; }\n' "$header" >"$tmp/t.cpp"
  if "$CXX" -std=c++20 "$tmp/t.cpp" -o "$tmp/t" "${link[@]}" >/dev/null 2>&1; then
    rm -rf "$tmp"; return 0
  fi
  rm -rf "$tmp"; return 1
}

need() {  # need <debian-package> <description> <check command...>
  local pkg=$1 desc=$2; shift 2
  if ! "$@"; then missing_pkgs+=("$pkg"); missing_desc+=("$desc ($pkg)"); fi
}

check_all() {
  missing_pkgs=(); missing_desc=()
  need g++                   "a C++20 compiler"                 have_cmd "$CXX"
  need python3               "python3 (runs sim/simcc)" have_cmd python3
  need openmpi-bin           "mpirun"                           have_cmd mpirun
  need libopenmpi-dev        "MPI C++ wrapper $MPICXX"          have_cmd "$MPICXX"
  need libarmadillo-dev      "Armadillo"                        have_lib armadillo -larmadillo
  need libopenblas-dev       "OpenBLAS (Armadillo, sim cuBLAS)" have_lib cblas.h -lopenblas
  need libgtest-dev          "GoogleTest"                       have_lib gtest/gtest.h "-lgtest -pthread"
  need libboost-context-dev  "Boost.Context (emulator fibers)"  have_lib boost/context/detail/fcontext.hpp -lboost_context
  need zlib1g-dev            "zlib"                             have_lib zlib.h -lz
  need libcli11-dev          "CLI11"                            have_lib CLI/CLI.hpp
  need nlohmann-json3-dev    "nlohmann-json"                    have_lib nlohmann/json.hpp
  # Offline data: Debian ships Fashion-MNIST in IDX format (make data falls back to it).
  need dataset-fashion-mnist "Fashion-MNIST (offline data)"     test -d /usr/share/datasets/fashion-mnist
}

check_all
[ ${#missing_pkgs[@]} -eq 0 ] && exit 0

echo "setup: missing: ${missing_desc[*]}"
if have_cmd apt-get && [ "$(id -u)" -eq 0 ]; then
  echo "setup: installing with apt-get: ${missing_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # (debconf's "delaying package configuration, since apt-utils is not installed" is noise)
  apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}" >/dev/null \
    2> >(grep -v '^debconf: delaying package configuration' >&2)
  check_all
  if [ ${#missing_pkgs[@]} -eq 0 ]; then echo "setup: all dependencies present"; exit 0; fi
  echo "setup: still missing after apt-get: ${missing_desc[*]}" >&2
  exit 1
fi

{
  echo "setup: cannot install automatically (needs root and apt-get). Install:"
  echo "  Debian/Ubuntu:  sudo apt-get install ${missing_pkgs[*]}"
  echo "  On a cluster:   try 'module avail' then e.g. 'module load gcc openmpi armadillo boost cuda';"
  echo "                  point CXX/MPICXX/CUDA_HOME at the loaded toolchain and add include/lib"
  echo "                  paths through CPATH and LIBRARY_PATH (and LD_LIBRARY_PATH) before 'make'."
  echo "  The Fashion-MNIST fallback is optional when 'make data' can download MNIST."
} >&2
# Only the data package is optional for building; everything else stops the build.
if [ ${#missing_pkgs[@]} -eq 1 ] && [ "${missing_pkgs[0]}" = dataset-fashion-mnist ]; then exit 0; fi
exit 1
