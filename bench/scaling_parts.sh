#!/usr/bin/env bash
# The scaling model's parts and its checks, measured on this machine's CPU cores
# (bench/scaling_model.py reads the output; docs/scaling.md explains both):
#   parts   the host all-reduce (bench/exchange_parts.cu through nn::comm) at each rank count of
#           NP_PARTS and each Open MPI algorithm of ALGOS, at the byte counts of SIZES, ranks
#           bound to cores (slurm/mpirun.sh); the host's reduction rate (y += x, one core)
#   lone    nn_train --device cpu, one rank, at each per-rank batch b = ceil(B/p) of every shape
#           and p in NP_RUNS: the per-rank compute the model adds to the exchange
#   lone_mp the same at hidden ceil(H/p) and the whole batch: a model-parallel rank's compute
#   corun   p such one-rank runs at b, started together: a rank's compute while p ranks share
#           the host's cores, caches and memory (CPU ranks slow each other; GPU ranks do not)
#   runs    nn_train --device cpu at each p > 1 of NP_RUNS for each entry of RUNS (strategy:node-shared;
#           allreduce:auto is the default, allreduce:off all-reduces the whole gradient): the
#           runs the model is checked against
# ROUNDS rounds, interleaved (load drifts hit every configuration alike); one BLAS thread a rank.
# Each run's --report JSON and log go to OUT/, one manifest row each (with the load average
# before it) to OUT/runs.csv; the parts to OUT/exchange_parts.csv.
#
#   bench/scaling_parts.sh                          # build/cpu or build/cuda binaries, OUT build/scaling-parts
#   BIN=/path/to/bin ROUNDS=1 SHAPES="256:100" bench/scaling_parts.sh
# Environment (defaults): BIN (build/cuda/bin if it has both programs, else build/cpu/bin; the
#   emulator build's exchange_parts does not vectorise the reduction y += x: 9x slower than the
#   trainer's own update on the AMD EPYC VM: its scaling-parts README in bench/results),
#   OUT=build/scaling-parts, NN_DATA=data/current, SHAPES="256:100 512:800 1024:1000 1024:3000",
#   NP_RUNS="1 2", NP_PARTS="2", RUNS="allreduce:auto allreduce:off ps:off model:off",
#   ALGOS="0 3 4 6", ROUNDS=3, EPOCHS=2, REPEATS=100, SIZES=8,4096,65536,262144,814120,1628240,3256360,
#   MIN_STEPS=150 (the training subset is the smallest that gives each epoch this many steps),
#   MPIRUN=slurm/mpirun.sh, STAGES="parts lone corun runs".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if [ -z "${BIN:-}" ]; then
  BIN=build/cpu/bin
  [ -x build/cuda/bin/nn_train ] && [ -x build/cuda/bin/exchange_parts ] && BIN=build/cuda/bin
fi
OUT=${OUT:-build/scaling-parts}
NN_DATA=${NN_DATA:-data/current}
SHAPES=${SHAPES:-256:100 512:800 1024:1000 1024:3000}
NP_RUNS=${NP_RUNS:-1 2}
NP_PARTS=${NP_PARTS:-2}
ALGOS=${ALGOS:-0 3 4 6}
ROUNDS=${ROUNDS:-3}
EPOCHS=${EPOCHS:-2}
REPEATS=${REPEATS:-100}
SIZES=${SIZES:-8,4096,65536,262144,814120,1628240,3256360}
MIN_STEPS=${MIN_STEPS:-150}
MPIRUN=${MPIRUN:-slurm/mpirun.sh}
STAGES=${STAGES:-parts lone corun runs}
RUNS=${RUNS:-allreduce:auto allreduce:off ps:off model:off}
for p in nn_train exchange_parts; do
  [ -x "$BIN/$p" ] || { echo "scaling_parts.sh: $BIN/$p not found (make, or set BIN)" >&2; exit 2; }
done
[ -e "$NN_DATA" ] || { echo "scaling_parts.sh: $NN_DATA not found (make data, or set NN_DATA)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
cores=$(getconf _NPROCESSORS_ONLN)   # not nproc: it answers OMP_NUM_THREADS
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "date: $(date -u +%FT%TZ)"; echo "commit: $commit"; echo "bin: $BIN"; echo "cores: $cores"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "mpi: $(mpirun --version 2>/dev/null | head -1)"; echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
load1() { cut -d' ' -f1 /proc/loadavg; }
launch() {  # launch P CMD...: one rank without a launcher, more through mpirun (oversubscribing past the cores)
  local p=$1; shift
  if [ "$p" -eq 1 ]; then OMPI_MCA_ess_singleton_isolated=1 "$@"
  else
    local over=(); [ "$p" -gt "$cores" ] && over=(--oversubscribe)
    "$MPIRUN" "${over[@]}" -np "$p" "$@"
  fi
}
have() { [[ " $STAGES " == *" $1 "* ]]; }
echo "tag,kind,hidden,batch,ranks,per_rank_batch,strategy,node_shared,round,load1,rc,report" >"$OUT/runs.csv"
# train TAG KIND H B P STRATEGY NODE_SHARED ROUND: one nn_train run with its manifest row.
train() {
  local tag=$1 kind=$2 h=$3 b=$4 p=$5 strategy=$6 ns=$7 round=$8
  local br=$(((b + p - 1) / p)) images
  images=$(((MIN_STEPS * b * 10 + 8) / 9))   # 10% are held out for validation
  [ "$images" -gt 54000 ] && images=0
  local l; l=$(load1)
  if [ "$kind" = corun ]; then  # p independent one-rank runs at once, one manifest row each
    local i pids=()
    for ((i = 1; i <= p; i++)); do
      launch 1 "$BIN/nn_train" --data "$NN_DATA" --device cpu --hidden "$h" --batch "$b" --epochs "$EPOCHS" \
        --train-size "$images" --test-size 1000 --report "$OUT/${tag}_i$i.json" >"$OUT/${tag}_i$i.log" 2>&1 &
      pids+=($!)
    done
    for ((i = 1; i <= p; i++)); do
      wait "${pids[i - 1]}"
      echo "${tag}_i$i,$kind,$h,$b,$p,$b,$strategy,$ns,$round,$l,$?,${tag}_i$i.json" >>"$OUT/runs.csv"
    done
    printf '  %-40s load %s\n' "$tag" "$l"
    return
  fi
  launch "$p" "$BIN/nn_train" --data "$NN_DATA" --device cpu --hidden "$h" --batch "$b" --epochs "$EPOCHS" \
    --train-size "$images" --test-size 1000 --strategy "$strategy" --node-shared "$ns" --report "$OUT/$tag.json" \
    >"$OUT/$tag.log" 2>&1
  local rc=$?
  echo "$tag,$kind,$h,$b,$p,$br,$strategy,$ns,$round,$l,$rc,$tag.json" >>"$OUT/runs.csv"
  printf '  %-40s rc=%s load %s\n' "$tag" "$rc" "$l"
}
t0=$SECONDS
for ((round = 1; round <= ROUNDS; round++)); do
  echo "== round $round of $ROUNDS ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
  if have parts; then
    launch 1 "$BIN/exchange_parts" --parts reduce --bytes "$SIZES" --repeats "$REPEATS" --csv "$OUT/exchange_parts.csv" \
      >>"$OUT/exchange_parts.log" 2>&1 || echo "  reduce: failed (see $OUT/exchange_parts.log)"
    for np in $NP_PARTS; do
      for algo in $ALGOS; do
        env OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm="$algo" \
          "$MPIRUN" $([ "$np" -gt "$cores" ] && echo --oversubscribe) -np "$np" "$BIN/exchange_parts" --parts allreduce \
          --bytes "$SIZES" --repeats "$REPEATS" --csv "$OUT/exchange_parts.csv" >>"$OUT/exchange_parts.log" 2>&1 ||
          echo "  allreduce np=$np algorithm $algo: failed (see $OUT/exchange_parts.log)"
      done
    done
    echo "  parts: allreduce at np $NP_PARTS, algorithms $ALGOS; reduce ($((SECONDS - t0)) s so far)"
  fi
  for hb in $SHAPES; do
    h=${hb%:*} b=${hb#*:}
    for p in $NP_RUNS; do
      have lone && train "lone_${h}_${b}_p${p}_r$round" lone "$h" $(((b + p - 1) / p)) 1 allreduce auto "$round"
      [ "$p" -gt 1 ] && have lone &&
        train "lonemp_${h}_${b}_p${p}_r$round" lone_mp $(((h + p - 1) / p)) "$b" 1 allreduce auto "$round"
      [ "$p" -gt 1 ] && have corun &&
        train "corun_${h}_${b}_p${p}_r$round" corun "$h" $(((b + p - 1) / p)) "$p" allreduce auto "$round"
      if have runs && [ "$p" -gt 1 ]; then
        for sn in $RUNS; do
          train "run_${h}_${b}_p${p}_${sn/:/_}_r$round" run "$h" "$b" "$p" "${sn%:*}" "${sn#*:}" "$round"
        done
      fi
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
echo "== scaling_parts.sh: done in $((SECONDS - t0)) s; $OUT/{runs.csv,exchange_parts.csv,machine.txt}"
echo "   into the model: bench/scaling_fit.py summarize $OUT bench/results/<run>/runs_summary.csv," \
  "then bench/scaling_fit.py fit and bench/scaling_fit.py check (docs/scaling.md)"
