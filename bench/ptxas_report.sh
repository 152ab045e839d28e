#!/usr/bin/env bash
# Compiles every kernels/*/*.cu with `nvcc -Xptxas -v` for each architecture and prints one
# line per kernel: registers, shared memory, stack, spill stores/loads. Exits non-zero if
# any kernel spills. Run: bench/ptxas_report.sh [arch...]   (default: 80 90; needs nvcc)
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
archs=("$@"); [ ${#archs[@]} -gt 0 ] || archs=(80 90)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
spills=0
for arch in "${archs[@]}"; do
  for f in kernels/*/*.cu; do
    "$NVCC" -std=c++20 -O3 -arch="sm_$arch" -Xptxas -v -Isrc -Ikernels -c "$f" -o "$tmp/k.o" 2>"$tmp/log"
    # ptxas prints "Compiling entry function 'NAME'" then "Used N registers, ... smem ..."
    # and "N bytes stack frame, N bytes spill stores, N bytes spill loads".
    awk -v arch="$arch" -v file="$(basename "$f")" '
      /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
      /bytes stack frame/ { stack = $1; sst = $5; sld = $9 }
      /Used [0-9]+ registers/ {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        smem = "0"; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11)
        printf "sm_%s %-22s regs %4s  smem %6s  stack %4s  spill st %4s ld %4s  %s\n", arch, file, regs, smem, stack, sst, sld, name
      }' "$tmp/log" | c++filt
    if grep -Eq '[1-9][0-9]* bytes spill (stores|loads)' "$tmp/log"; then spills=1; fi
  done
done
if [ "$spills" -ne 0 ]; then echo "ptxas: some kernels spill registers" >&2; exit 1; fi
echo "ptxas: no kernel spills (${archs[*]/#/sm_})"
