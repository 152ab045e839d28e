#!/usr/bin/env bash
# The CPU GEMM lab: which CPU GEMM is fastest at the trainer's --device cpu
# shapes. OpenBLAS (what nn_train calls), BLIS, oneDNN (Debian's packages, installed by
# `.ci/setup.sh gemmlab`) and Intel MKL (PyPI's `mkl` wheel, installed here into a virtual
# environment of its own, $VENV), each in its own process of cpu_gemm_lab (lab.cpp says what it
# times and checks), at every thread count of THREADS, ROUNDS times, the libraries alternating
# within each round; then the machine's FMA peak (fma_peak.cpp) and a summary:
#   $OUT/lab.csv      every timing (lib, version, threads, H, B, p, b, gemm, M, N, K, s, GFLOP/s)
#   $OUT/fma.csv      the FMA peak at each thread count
#   $OUT/summary.txt  per shape and thread count: each library's step time (fastest round),
#                     its ratio to OpenBLAS's, its share of the FMA peak, and the fastest
#                     library per GEMM
#
#   bench/cpu_gemm/lab.sh LAB_BIN FMA_BIN       (make cpu-gemm-lab)
#
# Environment (defaults): SHAPES=256:100,512:800,1024:3000 PROCS=1,2 THREADS="1 2" ROUNDS=2
#   SECONDS_PER_SHAPE=0.5 OUT=build/cpu_gemm VENV=build/venv-mkl LIBS="openblas blis dnnl mkl"
#   MKL=1 (0: leave MKL out, nothing is downloaded)
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 LAB_BIN FMA_BIN" >&2
  exit 2
fi
lab=$1 fma=$2
SHAPES=${SHAPES:-256:100,512:800,1024:3000}
PROCS=${PROCS:-1,2}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-2}
SECONDS_PER_SHAPE=${SECONDS_PER_SHAPE:-0.5}
OUT=${OUT:-build/cpu_gemm}
VENV=${VENV:-build/venv-mkl}
LIBS=${LIBS:-openblas blis dnnl mkl}
MKL=${MKL:-1}
say() { echo "cpu-gemm-lab: $*"; }

# Where each library is (Debian's multiarch directory; MKL: the venv).
libdir=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
declare -A path_of=(
  [openblas]=$libdir/libopenblas.so.0
  [blis]=$libdir/blis-pthread/libblis.so.4
  [dnnl]=$libdir/libdnnl.so.2
)
if [[ " $LIBS " == *" mkl "* ]] && [ "$MKL" = 1 ]; then
  if [ ! -x "$VENV/bin/python" ] || ! compgen -G "$VENV/lib/libmkl_rt.so.*" >/dev/null; then
    say "installing Intel MKL from PyPI into $VENV (pip install mkl, about 250 MB)"
    python3 -m venv "$VENV" && "$VENV/bin/pip" install -q mkl ||
      { echo "cpu-gemm-lab: error: pip install mkl into $VENV failed (offline? MKL=0 leaves it out)" >&2; exit 1; }
  fi
  path_of[mkl]=$(compgen -G "$VENV/lib/libmkl_rt.so.*" | sort | tail -n 1)
  mkl_version=$("$VENV/bin/pip" show mkl 2>/dev/null | awk '/^Version:/ {print $2}')
else
  LIBS=$(tr ' ' '\n' <<<"$LIBS" | grep -vx mkl | tr '\n' ' ')
fi
for l in $LIBS; do
  [ -n "${path_of[$l]:-}" ] || { echo "cpu-gemm-lab: error: unknown library '$l'" >&2; exit 2; }
  [ -e "${path_of[$l]}" ] ||
    { echo "cpu-gemm-lab: error: ${path_of[$l]} not found (make setup-gemmlab installs it)" >&2; exit 1; }
done

mkdir -p "$OUT"
rm -f "$OUT/lab.csv" "$OUT/fma.csv"
load=$(awk '{print $1}' /proc/loadavg)
say "$(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load average $load before the run"
"$fma" --threads "$(tr ' ' ',' <<<"$THREADS" | sed 's/,$//')" --csv "$OUT/fma.csv"
for round in $(seq "$ROUNDS"); do
  for t in $THREADS; do
    for l in $LIBS; do
      say "round $round of $ROUNDS, $t thread(s): $l"
      # MKL's libraries (its threading layer, Intel OpenMP) are beside libmkl_rt in the venv.
      LD_LIBRARY_PATH=$(dirname "${path_of[$l]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        "$lab" --lib "$l=${path_of[$l]}" --threads "$t" --shapes "$SHAPES" --procs "$PROCS" \
        --seconds "$SECONDS_PER_SHAPE" --csv "$OUT/lab.csv"
    done
  done
done
python3 "$(dirname "$0")/summary.py" "$OUT/lab.csv" "$OUT/fma.csv" ${mkl_version:+--mkl-version "$mkl_version"} |
  tee "$OUT/summary.txt"
say "load average $(awk '{print $1}' /proc/loadavg) after the run (was $load); files in $OUT/"
