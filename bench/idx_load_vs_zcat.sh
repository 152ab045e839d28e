#!/usr/bin/env bash
# Compares nn::data IDX loading with `zcat FILE >/dev/null` on the same file: best of N runs each.
# Run: bench/idx_load_vs_zcat.sh [FILE] [N=5]; IDX_LOAD_BENCH=path skips building bench/idx_load_bench.cpp.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
file=${1:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
reps=${2:-5}
[[ -r $file ]] || { echo "cannot read $file" >&2; exit 1; }

bench=${IDX_LOAD_BENCH:-}
if [[ -z $bench ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bench=$tmp/idx_load_bench
  "${CXX:-g++}" -std=c++20 -O2 -I"$root/src" -I"$root/kernels" \
    "$root/src/io/idx.cpp" "$root/bench/idx_load_bench.cpp" -lz -o "$bench"
fi

zcat "$file" >/dev/null  # warm the page cache so neither side pays for the disk
zbest=
for ((i = 0; i < reps; i++)); do
  t0=$(date +%s%N)
  zcat "$file" >/dev/null
  t1=$(date +%s%N)
  d=$((t1 - t0))
  if [[ -z $zbest || $d -lt $zbest ]]; then zbest=$d; fi
done

out=$("$bench" "$file" "$reps")
lbest=$(sed -n 's/^best_s=//p' <<<"$out")

echo "file: $file"
awk -v l="$lbest" -v z="$zbest" 'BEGIN {
  z /= 1e9
  printf "zcat >/dev/null best of runs: %.4f s\nload (idx_load_bench) best:   %.4f s\nratio load/zcat:              %.2f\n", z, l, l / z
}'
