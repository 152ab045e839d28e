#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (tests/fuzz/targets/fuzz_*.cpp) with ASan + UBSan: `make fuzz`
# (tests/fuzz/fuzz.mk), or directly: bash tests/fuzz/run.sh OUT_DIR [TARGET...]. Exits non-zero if
# any target crashes, leaks, hits UB, over-allocates or fails on a saved regression input.
# Env: FUZZ_SECONDS (60 per target), CLANGXX (clang++), FUZZ_ARGS (extra libFuzzer flags).
# `run.sh --setup` only checks/installs clang and libFuzzer (apt-get, as root on Debian/Ubuntu).
set -euo pipefail

cd "$(dirname "$0")/../.."  # repository root: sources and corpora are named from here
CLANGXX=${CLANGXX:-clang++}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
ALL_TARGETS=(idx checkpoint)

# Each target is its source plus the one parser it fuzzes (no MPI, no CUDA, no emulator:
# both parsers include only the CUDA-free common/errors.h).
sources_of() {
  case $1 in
    idx) echo "tests/fuzz/targets/fuzz_idx.cpp src/io/idx.cpp" ;;
    checkpoint) echo "tests/fuzz/targets/fuzz_checkpoint.cpp src/io/checkpoint.cpp src/io/checkpoint_read.cpp" ;;
    *) echo "run.sh: unknown target '$1' (known: ${ALL_TARGETS[*]})" >&2; return 1 ;;
  esac
}
# -fno-sanitize-recover: UBSan otherwise prints and carries on, and libFuzzer would not stop.
# shellcheck disable=SC2054  # the commas belong to -fsanitize=, they do not separate elements
CXXFLAGS=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
          -fno-omit-frame-pointer -Wall -Wextra -Isrc -Ikernels)

# Can $CLANGXX link a libFuzzer + sanitizer program using zlib? (clang alone is not enough:
# on Debian 12 the libFuzzer runtime is in libclang-rt-14-dev, reached via libclang-rt-dev.)
toolchain_ok() {
  local tmp rc=0
  tmp=$(mktemp -d)
  printf '%s\n' '#include <zlib.h>' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {' \
    '  return static_cast<int>(crc32(0, d, static_cast<unsigned>(n)) & 0); }' >"$tmp/probe.cpp"
  "$CLANGXX" -fsanitize=fuzzer,address,undefined "$tmp/probe.cpp" -lz -o "$tmp/probe" >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"
  return $rc
}

setup() {
  toolchain_ok && return 0
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq  # first: a fresh container has no package lists to ask below
    local pkgs=(clang zlib1g-dev)
    # Debian 12 splits compiler-rt (libFuzzer, sanitizers) out of clang; Ubuntu 22.04 does not.
    if apt-cache show libclang-rt-dev >/dev/null 2>&1; then pkgs+=(libclang-rt-dev); fi
    echo "fuzz: $CLANGXX cannot build libFuzzer targets; installing with apt-get: ${pkgs[*]}"
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    toolchain_ok && return 0
  fi
  {
    echo "fuzz: error: '$CLANGXX' cannot build a program with -fsanitize=fuzzer,address,undefined -lz."
    echo "  Debian 12:      apt-get install clang libclang-rt-dev zlib1g-dev"
    echo "  Ubuntu:         apt-get install clang zlib1g-dev (compiler-rt comes with clang)"
    echo "  Elsewhere:      any clang with compiler-rt's libFuzzer; point CLANGXX at its clang++."
  } >&2
  return 1
}

if [ "${1:-}" = --setup ]; then setup; exit; fi
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [${ALL_TARGETS[*]}] | $0 --setup" >&2; exit 2; }
OUT=$1; shift
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL_TARGETS[@]}")
setup

# build_and_replay T: builds target T, then runs its saved crashers (each must now run clean: the
# same files make test replays). Its output goes to $OUT/build-T.log.
build_and_replay() {
  local t=$1 srcs bin regs
  srcs=$(sources_of "$t")
  bin=$OUT/fuzz_$t
  mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t"
  # shellcheck disable=SC2086  # word splitting of the source list is intended
  "$CLANGXX" "${CXXFLAGS[@]}" $srcs -lz -o "$bin" || { echo "fuzz: $t: the build failed"; return 1; }
  regs=(tests/fuzz/regressions/"$t"/*)
  [ -e "${regs[0]}" ] || return 0
  echo "fuzz: $t: replaying ${#regs[@]} regression input(s)"
  if ! "$bin" -rss_limit_mb=2048 -malloc_limit_mb=64 "${regs[@]}" >"$OUT/regressions-$t.log" 2>&1; then
    tail -n 40 "$OUT/regressions-$t.log"
    echo "fuzz: $t: a regression input fails again (log: $OUT/regressions-$t.log)"
    return 1
  fi
}

# New inputs go to $OUT/corpus/T (kept between runs); the committed seeds are only read.
# 64 MiB is far above anything a <= 4 KiB input may legitimately allocate (gzip: at most
# 1032x its size + 1 MiB), so a header that makes the parser over-allocate is a finding.
fuzz_target() {
  # shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
  "$OUT/fuzz_$1" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -malloc_limit_mb=64 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$1/" ${FUZZ_ARGS:-} \
    "$OUT/corpus/$1" "tests/fuzz/corpus/$1" >"$OUT/fuzz-$1.log" 2>&1
}

# The targets are independent: built, then fuzzed, side by side (each fuzzer is one process, so
# FUZZ_SECONDS of each take FUZZ_SECONDS of wall time when there are as many cores as targets).
mkdir -p "$OUT"
declare -A pid_of=()
echo "== fuzz: building ${TARGETS[*]} in $OUT =="
for t in "${TARGETS[@]}"; do build_and_replay "$t" >"$OUT/build-$t.log" 2>&1 & pid_of[$t]=$!; done
failed=0
fuzzed=()
for t in "${TARGETS[@]}"; do
  if wait "${pid_of[$t]}"; then fuzzed+=("$t"); else failed=1; fi
  cat "$OUT/build-$t.log"
done
[ ${#fuzzed[@]} -gt 0 ] || { echo "fuzz: nothing built" >&2; exit 1; }

echo "== fuzz: ${fuzzed[*]} for ${FUZZ_SECONDS}s each, side by side =="
for t in "${fuzzed[@]}"; do fuzz_target "$t" & pid_of[$t]=$!; done
summary=()
for t in "${fuzzed[@]}"; do
  rc=0
  wait "${pid_of[$t]}" || rc=$?
  log=$OUT/fuzz-$t.log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log"
    echo "fuzz: $t FAILED (exit $rc); crashing input(s) in $OUT/artifacts/$t/, log $log" >&2
    echo "  fix the parser, then keep the input: cp $OUT/artifacts/$t/<file> tests/fuzz/regressions/$t/" >&2
    failed=1
    summary+=("$t: FAILED after ${runs:-?} runs")
  else
    files=$(find "$OUT/corpus/$t" -type f | wc -l)
    summary+=("$t: ${runs:-?} runs in ${FUZZ_SECONDS}s, ${rate:-?} exec/s, ${cov:-cov ?}, corpus $files file(s)")
  fi
done

echo "== fuzz summary =="
printf '  %s\n' "${summary[@]}"
exit $failed
