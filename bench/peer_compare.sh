#!/usr/bin/env bash
# Peer comparison: our trainer against the same network and SGD loop written in today's
# frameworks, same data, split, H, B, epochs, lr and reg, float32, measured side by side.
#   (a) GPU visible (nvidia-smi) and a CUDA build: nn_train (CUDA build, 1 MPI rank) against
#       bench/peer_torch.py on CUDA (needs a PyTorch with CUDA: set PYTHON to its interpreter);
#       H=$HIDDEN B=$BATCH.
#   (b) always (unless MODE=gpu): on the CPU, for each shape H:B in SHAPES and each run p:t in
#       RUNS (p processes of t threads each), `nn_train --device cpu` at p MPI ranks (launched
#       the documented way, slurm/mpirun.sh, which gives each rank t cores of its own; once per
#       GEMM library in CPU_GEMMS) against each peer in PEERS:
#         torch           Debian's python3-torch (bench/peer_torch.py), eager
#         torch2          PyTorch 2 from PyPI, eager           } p > 1: DistributedDataParallel
#         torch2-compile  the same with torch.compile (Inductor) }        over gloo
#         jax             JAX from PyPI, the epoch jit-compiled as one scan (bench/peer_jax.py;
#                         p > 1: jax.distributed, gloo collectives)
#         tf, tf-xla      TensorFlow-CPU from PyPI (bench/peer_tf.py; its default graph with
#                         oneDNN kernels, and with --xla; p = 1 only)
#       The PyPI peers live in virtual environments that bench/peer_venvs.sh creates under
#       build/ on first use (pinned versions there; about 7.6 GB with torch's CUDA libraries); a
#       peer that cannot be installed (offline) or run at some p is left out with its reason.
#       Each peer runs under `taskset -c` on the first p*t CPUs of this process's affinity
#       mask, with t threads (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and the
#       framework's own setting).
# Each run's time is the median seconds per epoch over epochs 2..E (epoch 1, the warm-up and
# compilation, is left out; with E = 1, epoch 1). Every system also reports its cores used
# (CPU time / wall time over the same epochs, rank 0's process), so a run whose threads shared
# a core shows it. nn_train measures its BLAS-bound epoch in the same run (the `blas bound:`
# line: the step's GEMMs alone). The machine's FMA peak (bench/cpu_gemm/fma_peak, at every
# p*t) gives each system's share of it: the epoch's GEMM FLOPs, 2 n (2 D H + 3 H C) for n
# training images, over its time.
# Printed: per row, ours' s/epoch and each other system's ratio = its time / ours (above 1:
# ours is faster); then cores used, FMA-peak shares and test precisions. All rows go to
# $OUT/peer_cpu.csv (bench/plots.py peer draws them).
#
# Usage: bench/peer_compare.sh            (make peer)
# Environment (defaults):
#   DATA=data/current SHAPES="256:100 512:800 1024:3000" CORES=(physical cores) RUNS="1:1 1:CORES CORES:1"
#   PEERS="torch torch2 torch2-compile jax tf tf-xla" CPU_GEMMS="auto openblas" (the first is the
#   reference of the ratios) EPOCHS=4 ROUNDS=2 LR=0.5 REG=1e-4 TRAIN_SIZE=0 (all)
#   HIDDEN=256 BATCH=100 (GPU part) MODE=auto|cpu|gpu PYTHON=/usr/bin/python3 (Debian's torch)
#   CPU_DIR=build/cpu CUDA_DIR=build/cuda MPIRUN=slurm/mpirun.sh OUT=build/peer
#   FMA_PEAK=build/cpu_gemm/bin/fma_peak VENVS=build (bench/peer_venvs.sh: PEER_TORCH, PEER_JAX,
#   PEER_TF pin the versions)  PROCS="1 2" (the older form: runs p:CORES/p)
# ROUNDS: every system runs ROUNDS times per row, the order reversed each round, and each keeps
# its fastest round, so a burst of load from another job hurts no side alone.
# OMP_WAIT_POLICY: left as the caller set it, except for Debian's torch, which gets PASSIVE
# (below); set it to apply one value to every side.
set -euo pipefail

cd "$(dirname "$0")/.."
DATA=${DATA:-data/current}
HIDDEN=${HIDDEN:-256}
BATCH=${BATCH:-100}
EPOCHS=${EPOCHS:-4}
SHAPES=${SHAPES:-256:100 512:800 1024:3000}
CORES=${CORES:-}  # default: the physical cores of this process's affinity mask (below)
RUNS=${RUNS:-}   # p:t pairs; empty: from PROCS when set, else "1:1 1:CORES CORES:1"
PEERS=${PEERS-torch torch2 torch2-compile jax tf tf-xla}
CPU_GEMMS=${CPU_GEMMS:-auto openblas}  # nn_train --cpu-gemm, one column each; the first ("ours") is the reference
ROUNDS=${ROUNDS:-2}
LR=${LR:-0.5}
REG=${REG:-1e-4}
TRAIN_SIZE=${TRAIN_SIZE:-0}
MODE=${MODE:-auto}
PYTHON=${PYTHON:-/usr/bin/python3}
CPU_DIR=${CPU_DIR:-build/cpu}
CUDA_DIR=${CUDA_DIR:-build/cuda}
MPIRUN=${MPIRUN:-$PWD/slurm/mpirun.sh}  # a private session directory per launch
OUT=${OUT:-build/peer}
FMA_PEAK=${FMA_PEAK:-build/cpu_gemm/bin/fma_peak}
VENVS=${VENVS:-build}
# Debian's PyTorch runs its elementwise work on OpenMP threads and its GEMMs on OpenBLAS's own
# pthreads: with the default (spinning) OpenMP wait policy its idle OpenMP threads keep the
# cores that OpenBLAS needs (measured on 2 cores, H=512 B=800, 2 threads: 1.7 s/epoch,
# against 0.61 s with PASSIVE and 0.98 s at 1 thread), so it runs with PASSIVE. The other
# sides keep their default: PyPI's torch does its GEMMs on the same OpenMP threads (MKL), and
# nn_train --cpu-gemm onednn's OpenMP pool loses at small shapes under PASSIVE (measured on
# the 2-core VM); OpenBLAS, XLA and TensorFlow run their own thread pools.

case $MODE in auto | cpu | gpu) ;; *) echo "error: MODE must be auto, cpu or gpu (got '$MODE')" >&2; exit 2 ;; esac
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# numpy and PyTorch for $PYTHON: the project's setup checks them (and, for the system python as
# root on Debian, installs python3-numpy python3-torch); for another python it names the module.
if [[ " $PEERS " == *" torch "* ]] && ! "$PYTHON" -c 'import numpy, torch' 2>/dev/null; then
  PLOTS_PYTHON=$PYTHON bash .ci/setup.sh peer ||
    { echo "error: $PYTHON cannot import torch (.ci/setup.sh peer above; or PYTHON=/path/to/python)" >&2; exit 1; }
fi
mkdir -p "$OUT"

COMMON=(--data "$DATA" --hidden "$HIDDEN" --batch "$BATCH" --epochs "$EPOCHS" --lr "$LR" --reg "$REG"
        --train-size "$TRAIN_SIZE")
# The same for shape H, B (the CPU part).
common_for() { echo --data "$DATA" --hidden "$1" --batch "$2" --epochs "$EPOCHS" --lr "$LR" --reg "$REG" --train-size "$TRAIN_SIZE"; }

# Median of the epoch times in a log's `epoch_seconds:` line, epoch 1 dropped when E > 1.
median_from_log() {
  awk '/^epoch_seconds:/ { n = 0; for (i = 2; i <= NF; ++i) v[++n] = $i }
       END { if (n == 0) exit 1
             first = n > 1 ? 2 : 1; m = 0
             for (i = first; i <= n; ++i) w[++m] = v[i]
             for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
             printf "%.4f\n", (m % 2) ? w[(m + 1) / 2] : (w[m / 2] + w[m / 2 + 1]) / 2 }' "$1"
}
# The same from nn_train's --metrics CSV (column 5 = seconds).
median_from_metrics() {
  awk -F, 'NR > 1 { s = s " " $5 } END { print "epoch_seconds:" s }' "$1" > "$1.secs"
  median_from_log "$1.secs"
}
precision_from_log() { awk '/^test precision:/ { print $3 }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "n/a" }'; }
# nn_train's BLAS-bound epoch (seconds) from its `blas bound: ... -> epoch >= X s; ...` line.
min_of() { printf '%s\n' "$@" | awk 'NF { if (m == "" || $1 < m) m = $1 } END { print m }'; }
bound_from_log() { awk '/^blas bound:/ { for (i = 1; i <= NF; ++i) if ($i == ">=") { print $(i + 1); exit } }' "$1"; }

dataset=$(readlink -f "$DATA" || echo "$DATA")
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "== peer comparison: epochs=$EPOCHS lr=$LR reg=$REG train-size=$TRAIN_SIZE (0 = all), float32"
echo "== data: $DATA -> $dataset"
echo "== time = median s/epoch over epochs 2..$EPOCHS (batches only); ratio = their time / ours (> 1: ours faster)"
# Another job on the machine skews every figure, multi-threaded ones most: measure the CPU
# time used by others over 2 s before starting.
ncpu=$(nproc 2>/dev/null || echo 1)
cpu_busy() {
  local a b
  a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  sleep 2
  b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); u = y[1] - x[1]; i = y[2] - x[2]
                                   printf "%d\n", (u + i > 0) ? 100 * u / (u + i) : 0 }'
}
busy_pct=$(cpu_busy 2>/dev/null || echo 0)
busy=no
if [ "$busy_pct" -gt 15 ]; then
  busy=yes
  echo "== WARNING: the CPUs were ${busy_pct}% busy before we started: other jobs are running;"
  echo "==          timings (above all with more than one thread) are not representative"
fi

summary=()
gpu_visible=no
if nvidia-smi -L >/dev/null 2>&1; then gpu_visible=yes; fi

if [ "$MODE" != cpu ]; then
  if [ "$gpu_visible" != yes ]; then
    echo "== (a) GPU: no GPU visible (nvidia-smi -L); skipped"
    if [ "$MODE" = gpu ]; then exit 1; fi
  elif [ ! -x "$CUDA_DIR/bin/nn_train" ]; then
    echo "== (a) GPU: $CUDA_DIR/bin/nn_train not built (make cuda); skipped"
    if [ "$MODE" = gpu ]; then exit 1; fi
  elif ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "== (a) GPU: $PYTHON's PyTorch has no CUDA (Debian's python3-torch is CPU-only); skipped"
    if [ "$MODE" = gpu ]; then exit 1; fi
  else
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
    echo "== (a) GPU: $gpu_name: nn_train (CUDA build, 1 rank) vs PyTorch CUDA"
    "$MPIRUN" --oversubscribe -np 1 "$CUDA_DIR/bin/nn_train" "${COMMON[@]}" \
      --metrics "$OUT/ours_gpu.csv" | tee "$OUT/ours_gpu.log"
    "$PYTHON" bench/peer_torch.py "${COMMON[@]}" --device cuda | tee "$OUT/torch_gpu.log"
    ours=$(median_from_metrics "$OUT/ours_gpu.csv")
    theirs=$(median_from_log "$OUT/torch_gpu.log")
    summary+=("$(printf 'GPU H=%s B=%s: ours %s s/epoch, PyTorch %s s/epoch: PyTorch / ours = %s; precision ours %s, PyTorch %s' \
      "$HIDDEN" "$BATCH" "$ours" "$theirs" "$(ratio "$theirs" "$ours")" \
      "$(precision_from_log "$OUT/ours_gpu.log")" "$(precision_from_log "$OUT/torch_gpu.log")")")
  fi
fi


# ---- (b) the CPU -------------------------------------------------------------------------
# One CPU of each of the first N physical cores in this process's affinity mask, as a
# taskset list ("0,1"): on hosts with several hardware threads per core the peers get cores,
# as slurm/mpirun.sh gives ours (without lscpu: the first N CPUs of the mask).
cpus_for() {
  local allowed
  allowed=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
  { lscpu -p=CPU,SOCKET,CORE 2>/dev/null || true; } | awk -F, -v n="$1" -v allowed="$allowed" '
    BEGIN { k = split(allowed, r, ",")
            for (i = 1; i <= k; i++) { m = split(r[i], ab, "-"); for (c = ab[1]; c <= (m > 1 ? ab[2] : ab[1]); c++) { ok[c] = 1; order[++nc] = c } } }
    /^#/ { next }
    ($1 in ok) && !(($2 "," $3) in core) { core[$2 "," $3] = 1; pick[++np] = $1 }
    END { if (np == 0) for (i = 1; i <= nc; i++) pick[++np] = order[i]
          out = ""; for (i = 1; i <= np && i <= n; i++) out = out (i > 1 ? "," : "") pick[i]
          print out }'
}
# Physical cores in this process's affinity mask (what CORES defaults to).
physical_cores() { cpus_for 100000 | awk -F, '{ print ($0 == "" ? 1 : NF) }'; }
# A log's `cpu/wall: X` (the peers) or nn_train's `cores: rank 0 kept X cores busy` line.
cores_from_log() {
  awk '/^cpu\/wall:/ { print $2; exit } /^cores: rank 0 kept/ { print $5; exit }' "$1"
}
# Training images per epoch from the `data: ... (train N, ...` line every system prints.
train_images_from_log() { sed -n 's/^data: .*(train \([0-9][0-9]*\),.*/\1/p' "$1" | head -n 1; }

if [ "$MODE" != gpu ]; then
  if [ ! -x "$CPU_DIR/bin/nn_train" ]; then
    echo "error: $CPU_DIR/bin/nn_train not built (make $CPU_DIR/bin/nn_train)" >&2
    exit 1
  fi
  [ -n "$CORES" ] || CORES=$(physical_cores)
  if [ -z "$RUNS" ]; then
    if [ -n "${PROCS:-}" ]; then
      for p in $PROCS; do t=$(( CORES / p )); [ "$t" -ge 1 ] || t=1; RUNS="$RUNS $p:$t"; done
    else
      RUNS="1:1 1:$CORES $CORES:1"
    fi
    RUNS=$(printf '%s\n' $RUNS | awk '!seen[$0]++' | tr '\n' ' ')
  fi
  for run in $RUNS; do
    case $run in [1-9]*:[1-9]*) ;; *) echo "error: RUNS entries are p:t (got '$run')" >&2; exit 2 ;; esac
  done

  # Every system: its name, how to run it, and what it reports as version and BLAS.
  systems=()
  declare -A cmd_of version_of blas_of why_of procs_ok
  for g in $CPU_GEMMS; do
    name=ours; [ "$g" = "${CPU_GEMMS%% *}" ] || name=ours-$g
    systems+=("$name")
    cmd_of[$name]=$g
    version_of[$name]="nn_train $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    procs_ok[$name]=any
  done
  ref=${systems[0]}
  venv_names=()
  for peer in $PEERS; do
    case $peer in
      torch2 | torch2-compile) venv_names+=(torch2) ;;
      jax | tf) venv_names+=("$peer") ;;
      tf-xla) venv_names+=(tf) ;;
      torch) ;;
      *) echo "error: PEERS: unknown peer '$peer' (torch torch2 torch2-compile jax tf tf-xla)" >&2; exit 2 ;;
    esac
  done
  declare -A venv_py venv_why
  if [ ${#venv_names[@]} -gt 0 ]; then
    while read -r n py rest; do
      if [ "$py" = - ]; then venv_why[$n]=$rest; else venv_py[$n]=$py; fi
    done < <(VENVS=$VENVS bash bench/peer_venvs.sh $(printf '%s\n' "${venv_names[@]}" | sort -u))
  fi
  for peer in $PEERS; do
    systems+=("$peer")
    case $peer in
      torch)
        if "$PYTHON" -c 'import numpy, torch' 2>/dev/null; then
          cmd_of[$peer]="$PYTHON bench/peer_torch.py"
        else why_of[$peer]="$PYTHON cannot import torch (.ci/setup.sh peer)"; fi
        procs_ok[$peer]=any ;;
      torch2 | torch2-compile)
        if [ -n "${venv_py[torch2]:-}" ]; then
          cmd_of[$peer]="${venv_py[torch2]} bench/peer_torch.py"
          [ "$peer" = torch2 ] || cmd_of[$peer]+=" --compile"
        else why_of[$peer]=${venv_why[torch2]:-not installed}; fi
        procs_ok[$peer]=any ;;
      jax)
        if [ -n "${venv_py[jax]:-}" ]; then cmd_of[$peer]="${venv_py[jax]} bench/peer_jax.py"
        else why_of[$peer]=${venv_why[jax]:-not installed}; fi
        procs_ok[$peer]=any ;;
      tf | tf-xla)
        if [ -n "${venv_py[tf]:-}" ]; then
          cmd_of[$peer]="${venv_py[tf]} bench/peer_tf.py"
          [ "$peer" = tf ] || cmd_of[$peer]+=" --xla"
        else why_of[$peer]=${venv_why[tf]:-not installed}; fi
        procs_ok[$peer]=1 ;;  # one process (peer_tf.py: no multi-worker strategy)
    esac
    if [ -n "${why_of[$peer]:-}" ]; then echo "== (b) $peer left out: ${why_of[$peer]}"; fi
  done

  # The FMA peak at every thread count the runs use (all processes together).
  peak_threads=$(for run in $RUNS; do echo $(( ${run%%:*} * ${run##*:} )); done | sort -nu | tr '\n' ',')
  declare -A peak_at
  if [ -x "$FMA_PEAK" ]; then
    echo "== FMA peak ($FMA_PEAK, threads ${peak_threads%,})"
    if ! "$FMA_PEAK" --threads "${peak_threads%,}" --csv "$OUT/fma_peak.csv" >"$OUT/fma_peak.log" 2>&1; then
      echo "== FMA peak: $FMA_PEAK failed ($(tail -n 1 "$OUT/fma_peak.log")); shares left out"
      : >"$OUT/fma_peak.csv"
    fi
    grep '^peak' "$OUT/fma_peak.log" || true
    while IFS=, read -r isa th gf rest; do
      [ "$isa" = isa ] && continue
      if [ -z "${peak_at[$th]:-}" ] || awk -v a="$gf" -v b="${peak_at[$th]}" 'BEGIN { exit !(a > b) }'; then
        peak_at[$th]=$gf
      fi
    done <"$OUT/fma_peak.csv"
  else
    echo "== FMA peak: $FMA_PEAK not built (make $FMA_PEAK); shares left out"
  fi

  echo "shape,procs,threads,system,version,blas,s_per_epoch,cores_busy,precision,gflops,peak_share,ratio" \
    >"$OUT/peer_cpu.csv"
  rows=()
  for shape in $SHAPES; do
    h=${shape%%:*} b=${shape##*:}
    read -r -a args <<<"$(common_for "$h" "$b")"
    for run in $RUNS; do
      p=${run%%:*} t=${run##*:}
      cpus=$(cpus_for $(( p * t )))
      tag="H${h}_B${b}_p${p}_t${t}"
      echo "== (b) CPU ${cpu_model:-?}, H=$h B=$b, p=$p process(es) x t=$t thread(s) (CPUs $cpus)"
      over=(); [ $(( p * t )) -le "$CORES" ] || over=(--oversubscribe)
      declare -A best=() cores=() prec=()
      bound=
      order=("${systems[@]}")
      for round in $(seq "$ROUNDS"); do
        echo "-- round $round of $ROUNDS: ${order[*]}"
        for sys in "${order[@]}"; do
          [ -n "${cmd_of[$sys]:-}" ] || continue
          if [ "${procs_ok[$sys]}" != any ] && [ "$p" -gt "${procs_ok[$sys]}" ]; then continue; fi
          log=$OUT/${sys}_cpu_$tag.log
          if [[ $sys == ours* ]]; then
            OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$MPIRUN" "${over[@]}" -np "$p" \
              -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS $([ -n "${OMP_WAIT_POLICY:-}" ] && echo -x OMP_WAIT_POLICY) \
              "$CPU_DIR/bin/nn_train" --device cpu --cpu-gemm "${cmd_of[$sys]}" "${args[@]}" \
              --metrics "$OUT/${sys}_cpu_$tag.csv" >"$log" 2>&1 || { echo "   $sys FAILED (log: $log)"; tail -n 3 "$log"; continue; }
            s=$(median_from_metrics "$OUT/${sys}_cpu_$tag.csv")
            bd=$(bound_from_log "$log")
            if [ "$sys" = "$ref" ] && [ -n "$bd" ]; then bound=$(min_of "$bd" $bound); fi
            [ -n "${blas_of[$sys]:-}" ] || blas_of[$sys]=$(sed -n 's/.*host GEMM \([^,]*\),.*/\1/p' "$log" | head -n 1)
          else
            wait_policy=${OMP_WAIT_POLICY:-}
            [ "$sys" != torch ] || wait_policy=${OMP_WAIT_POLICY:-PASSIVE}
            read -r -a cmd <<<"${cmd_of[$sys]}"
            env OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" MKL_NUM_THREADS="$t" \
              ${wait_policy:+OMP_WAIT_POLICY=$wait_policy} \
              taskset -c "$cpus" "${cmd[@]}" "${args[@]}" --device cpu --threads "$t" --procs "$p" \
              >"$log" 2>&1 || { echo "   $sys FAILED (log: $log)"; tail -n 3 "$log"; continue; }
            s=$(median_from_log "$log")
            if [ -z "${version_of[$sys]:-}" ]; then
              version_of[$sys]=$(head -n 1 "$log" | sed -n 's/^peer_[a-z0-9]*: \([A-Za-z]* [^ ,]*\).*/\1/p')
              case $sys in  # what each says of its GEMMs in its first line
                jax) blas_of[$sys]=$(head -n 1 "$log" | sed -n 's/.*\(XLA:CPU [^,]*\).*/\1/p') ;;
                tf) blas_of[$sys]=$(head -n 1 "$log" | sed -n 's/.*\(oneDNN [a-z]*\).*/\1/p') ;;
                tf-xla) blas_of[$sys]="XLA:CPU" ;;
                *) blas_of[$sys]=$(head -n 1 "$log" | sed -n 's/.*BLAS \([^,]*\).*/\1/p') ;;
              esac
            fi
          fi
          cw=$(cores_from_log "$log")
          printf '   %-16s %8s s/epoch  cores busy %-5s  precision %s\n' "$sys" "$s" "${cw:-?}" "$(precision_from_log "$log")"
          if [ -z "${best[$sys]:-}" ] || awk -v a="$s" -v b="${best[$sys]}" 'BEGIN { exit !(a < b) }'; then
            best[$sys]=$s cores[$sys]=${cw:-} prec[$sys]=$(precision_from_log "$log")
          fi
          [ -n "${n_train:-}" ] || n_train=$(train_images_from_log "$log")
        done
        reversed=(); for ((i = ${#order[@]} - 1; i >= 0; --i)); do reversed+=("${order[i]}"); done
        order=("${reversed[@]}")
      done
      flops=$(awk -v n="${n_train:-0}" -v h="$h" 'BEGIN { printf "%.0f\n", 2 * n * (2 * 784 * h + 3 * h * 10) }')
      peak=${peak_at[$(( p * t ))]:-}
      line=$(printf '%-24s' "H=$h B=$b p=$p t=$t")
      for sys in "${systems[@]}" blas-bound; do
        if [ "$sys" = blas-bound ]; then s=$bound; else s=${best[$sys]:-}; fi
        if [ -z "$s" ]; then line+=$(printf ' %12s' -); continue; fi
        gf=$(awk -v f="$flops" -v s="$s" 'BEGIN { if (s > 0) printf "%.1f", f / s / 1e9 }')
        share=
        if [ -n "$peak" ] && [ -n "$gf" ]; then share=$(awk -v g="$gf" -v pk="$peak" 'BEGIN { printf "%.2f", g / pk }'); fi
        r=$(ratio "$s" "${best[$ref]:-0}")
        if [ "$sys" = "$ref" ]; then line+=$(printf ' %12s' "${s}s"); else line+=$(printf ' %12s' "${r}x"); fi
        v=${version_of[$sys]:-} bl=${blas_of[$sys]:-}  # no commas inside the CSV's fields
        echo "H=$h B=$b,$p,$t,$sys,${v//,/;},${bl//,/;},$s,${cores[$sys]:-},${prec[$sys]:-},$gf,$share,$r" >>"$OUT/peer_cpu.csv"
      done
      rows+=("$line")
      unset best cores prec
    done
  done
fi

echo
echo "== summary: epochs=$EPOCHS, data $dataset, ${CORES} core(s) (logs in $OUT/, table in $OUT/peer_cpu.csv)"
echo "== CPU use by others before the run: ${busy_pct}% of $ncpu core(s)$([ "$busy" = yes ] && echo ' (BUSY: not representative)')"
echo "== OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset} (Debian's torch: ${OMP_WAIT_POLICY:-PASSIVE})"
for line in "${summary[@]}"; do echo "$line"; done
if [ "$MODE" != gpu ]; then
  echo "== CPU: p = processes (MPI ranks / DDP processes), t = threads each; $ref column: its s/epoch;"
  echo "==      the others: their time / $ref's (above 1: $ref is faster); blas-bound: $ref's library GEMMs alone" | sed "s/ours's/ours'/g"
  header=$(printf '%-24s' "where"); for sys in "${systems[@]}" blas-bound; do header+=$(printf ' %12s' "$sys"); done
  echo "$header"
  for line in "${rows[@]}"; do echo "$line"; done
  echo "== versions and BLAS:"
  for sys in "${systems[@]}"; do
    printf '   %-16s %s%s\n' "$sys" "${version_of[$sys]:-${why_of[$sys]:-not run}}" "${blas_of[$sys]:+, BLAS ${blas_of[$sys]}}"
  done
  echo "== cores busy (CPU time / wall time, rank 0), FMA-peak share and test precision per system:"
  awk -F, 'NR > 1 { key = $1 " p=" $2 " t=" $3
                    if (key != last) { printf "%s%-24s", (last == "" ? "" : "\n"), key; last = key }
                    if ($4 == "blas-bound") next
                    printf "  %s %s/%s/%s", $4, ($8 == "" ? "?" : $8), ($11 == "" ? "?" : $11), ($9 == "" ? "?" : $9) }
            END { print "" }' "$OUT/peer_cpu.csv"
  echo "==      (system cores-busy/peak-share/precision; peak shares: the epoch's GEMM FLOPs / time / FMA peak at p*t threads)"
fi
