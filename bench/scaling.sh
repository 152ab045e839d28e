#!/usr/bin/env bash
# Scaling study: nn_train at each rank count p in NP with each gradient-exchange strategy in
# STRATEGIES, in strong scaling (fixed global batch B) and weak scaling (B = B0 * p), plus
# side-by-side variants at one p (allreduce with and without overlap, ps, model, CUDA Graphs).
# One nn_train --report JSON and log per run; CSV rows appended to OUT/scaling.csv and
# OUT/variants_runs.csv, medians in OUT/variants.csv; speedups and ratios printed at the end.
# Plots: bench/scaling_plot.py OUT. Run from anywhere; paths are relative to the repository.
#
#   bench/scaling.sh                                  # local: NP "1 2 4", quick sizes on the emulator
#   NP="1 2" STRATEGIES=allreduce bench/scaling.sh    # fewer runs
#   QUICK=0 HIDDEN=512 EPOCHS=3 bench/scaling.sh      # full training set
#   bench/scaling.sh --gemm 3                         # arguments go to every nn_train run
#   sbatch slurm/scaling.sbatch                       # in an allocation (srun, one GPU per rank)
#   bench/scaling.sh --device cpu                     # the host backend (BLAS; OUT build/scaling-cpu)
#   sbatch --gpus-per-task=0 --cpus-per-task=4 slurm/scaling.sbatch --device cpu   # CPU nodes
#
# Environment (defaults):
#   NN_BIN            trainer: build/cuda/bin/nn_train when a GPU is visible and it exists, else
#                     build/cpu/bin/nn_train (the emulator build)
#   NN_DATA           IDX directory (data/current; DATA is accepted too)
#   NP="1 2 4"        rank counts; inside Slurm, counts above $SLURM_NTASKS are skipped
#   STRATEGIES="allreduce ps model"
#   MODES="strong weak"
#   B=800             strong scaling: global batch, the same at every p
#   B0=200            weak scaling: batch per rank, global batch B0 * p
#   QUICK             1 for the emulator build, 0 for the CUDA build (decided by a 1-rank probe
#                     run's report): 1 = HIDDEN 128, EPOCHS 3, TRAIN_SIZE 10000, TEST_SIZE 1000;
#                     0 = HIDDEN 512, EPOCHS 5, every image. HIDDEN, EPOCHS, TRAIN_SIZE,
#                     TEST_SIZE override either
#   VARIANTS="allreduce allreduce_no_overlap ps model allreduce_graph"   ("" skips them)
#   VARIANT_P         p of the variants: the largest p in NP (outside Slurm: the largest that
#                     does not oversubscribe this machine)
#   VARIANT_REPEATS=3 runs per variant (interleaved; the CSV keeps the median)
#   SIM_WORKERS       emulator threads per rank; unset or 0 means 1 here: one core per emulated
#                     device, so p ranks use p cores and the speedup means something
#   OUT=build/scaling output directory (its CSV files are replaced); build/scaling-cpu with
#                     --device cpu, whose runs take the full training set (QUICK=0) for 3 epochs,
#                     have no CUDA Graphs variant, and count as oversubscribed above one rank
#                     per core (one BLAS thread per rank outside Slurm; OPENBLAS_NUM_THREADS)
#   LAUNCHER=srun|mpirun (srun inside a Slurm job), SRUN_MPI (srun --mpi=..., e.g. pmix),
#   SRUN_FLAGS, MPIRUN=mpirun, MPIRUN_FLAGS: as in slurm/common.sh (mpirun gets
#                     --oversubscribe outside Slurm when p exceeds the cores)
#   PYTHON=python3    reads the JSON reports (standard library only)
# Time per epoch = median of the report's epoch_seconds without the first epoch (the only
# one when EPOCHS=1); step_ms = the median batch time of the report. Rows whose p needs more
# cores (emulator) or GPUs than this machine has are marked oversubscribed=1.
# Exit status 1 if any run failed; the others still run.
set -euo pipefail

cd "$(dirname "$0")/.."
NN_SCRIPT=scaling.sh
NN_ROOT=$(pwd)
# shellcheck source=slurm/common.sh
. slurm/common.sh

NP=${NP:-1 2 4}
STRATEGIES=${STRATEGIES:-allreduce ps model}
MODES=${MODES:-strong weak}
B=${B:-800}
B0=${B0:-200}
VARIANTS=${VARIANTS-allreduce allreduce_no_overlap ps model allreduce_graph}
VARIANT_REPEATS=${VARIANT_REPEATS:-3}
NN_DATA=${NN_DATA:-${DATA:-data/current}}
OUT=${OUT:-build/scaling}
PYTHON=${PYTHON:-python3}
workers=${SIM_WORKERS:-0}
[ "$workers" -gt 0 ] 2>/dev/null || workers=1
export SIM_WORKERS=$workers

if [ -z "${NN_BIN:-}" ]; then
  if nn_gpu_visible && [ -x build/cuda/bin/nn_train ]; then
    NN_BIN=build/cuda/bin/nn_train
  else
    NN_BIN=build/cpu/bin/nn_train
  fi
fi
[ -x "$NN_BIN" ] || nn_die "$NN_BIN not found (make cpu / make cuda, or set NN_BIN)"
grep -q -- '--strategy' <<<"$("$NN_BIN" --help 2>/dev/null)" ||
  nn_die "$NN_BIN has no --strategy option (rebuild: make cpu / make cuda)"
[ -e "$NN_DATA" ] || nn_die "$NN_DATA not found (make data, or set NN_DATA)"
command -v "$PYTHON" >/dev/null 2>&1 || nn_die "$PYTHON not found (set PYTHON)"
for v in B B0 VARIANT_REPEATS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || nn_die "$v must be a positive integer (got '${!v}')"
done
for a in "$@"; do
  case $a in
    --batch* | --strategy* | --report* | --no-overlap | --graph | --hidden* | --epochs* | --train-size* | --test-size*)
      nn_die "$a: set by this script (use B, B0, STRATEGIES, VARIANTS, HIDDEN, EPOCHS, TRAIN_SIZE, TEST_SIZE)" ;;
  esac
done
for s in $STRATEGIES; do
  case $s in allreduce | ps | model) ;; *) nn_die "STRATEGIES: unknown strategy '$s' (allreduce ps model)" ;; esac
done
for m in $MODES; do
  case $m in strong | weak) ;; *) nn_die "MODES: unknown mode '$m' (strong weak)" ;; esac
done

variant_args() { # variant name -> nn_train options
  case $1 in
    allreduce) echo "--strategy allreduce" ;;
    allreduce_no_overlap) echo "--strategy allreduce --no-overlap" ;;
    ps) echo "--strategy ps" ;;
    ps_no_overlap) echo "--strategy ps --no-overlap" ;;
    model) echo "--strategy model" ;;
    allreduce_graph) echo "--strategy allreduce --graph" ;;
    ps_graph) echo "--strategy ps --graph" ;;
    model_graph) echo "--strategy model --graph" ;;
    *) return 1 ;;
  esac
}
for v in $VARIANTS; do
  variant_args "$v" >/dev/null || nn_die "VARIANTS: unknown variant '$v' (allreduce allreduce_no_overlap ps ps_no_overlap model allreduce_graph ps_graph model_graph)"
done

nn_pick_launcher
in_slurm=${SLURM_JOB_ID:+1}
cores=$(nproc 2>/dev/null || echo 1)

# ---- the JSON report -> one CSV row (standard library only) -------------------------------
read -r -d '' ROW_PY <<'EOF' || true
import csv, json, re, statistics, sys
COLS = ["mode", "strategy", "variant", "p", "batch", "hidden", "epochs", "train_images",
        "seconds_per_epoch", "epoch_stat", "step_ms", "images_per_s", "test_precision",
        "host_queue_us_per_step", "phase_forward_ms", "phase_backward_ms",
        "phase_forward_backward_ms", "phase_d2h_ms", "phase_allreduce_ms", "phase_h2d_ms",
        "phase_step_ms", "overlap", "graph", "graph_replays", "mpi_memory", "build", "device",
        "sim_workers", "oversubscribed", "launcher", "wall_s", "report"]
w = csv.writer(sys.stdout, lineterminator="\n")
if sys.argv[1] == "header":
    w.writerow(COLS)
    sys.exit(0)
if sys.argv[1] == "label":  # build<TAB>device of a report
    r = json.load(open(sys.argv[2]))
    print("%s\t%s" % (r.get("build", "unknown"), r.get("device", "unknown")))
    sys.exit(0)
rep, log = sys.argv[2], sys.argv[3]
row = dict(a.split("=", 1) for a in sys.argv[4:])
r = json.load(open(rep))
cfg = r.get("config", {})
ep = [float(x) for x in r.get("epoch_seconds") or []]
tail = ep[1:] if len(ep) > 1 else ep
spe = statistics.median(tail) if tail else None
ph = r.get("phases", {})
def ms(name):
    v = (ph.get(name) or {}).get("median_s")
    return "" if v is None else "%.6g" % (v * 1e3)
n = cfg.get("n_train")
prec = ""
for line in open(log, errors="replace"):
    m = re.match(r"\s*test precision:\s*([0-9.eE+-]+)", line)
    if m:
        prec = m.group(1)
g = r.get("graph") or {}
hq = r.get("host_queue_us_per_step")
def b(x):
    return "" if x is None else int(bool(x))
row.update({
    "strategy": r.get("strategy", row.get("strategy", "")),
    "p": r.get("ranks", row.get("p", "")), "batch": cfg.get("batch", ""),
    "hidden": cfg.get("hidden", ""), "epochs": cfg.get("epochs", ""), "train_images": n or "",
    "seconds_per_epoch": "" if spe is None else "%.6g" % spe,
    "epoch_stat": "median_excl_first" if len(ep) > 1 else "single",
    "step_ms": ms("batch"),
    "images_per_s": "%.6g" % (n / spe) if n and spe else "",
    "test_precision": prec, "host_queue_us_per_step": "" if hq is None else "%.6g" % hq,
    "overlap": b(r.get("overlap")), "graph": b(g.get("enabled")),
    "graph_replays": g.get("replays", ""), "mpi_memory": r.get("mpi_memory", ""),
    "build": r.get("build", ""), "device": r.get("device", ""), "report": rep,
})
for name in ("forward", "backward", "forward_backward", "d2h", "allreduce", "h2d", "step"):
    row["phase_%s_ms" % name] = ms(name)
w.writerow([row.get(c, "") for c in COLS])
EOF

# ---- run one nn_train -----------------------------------------------------------------------
failed=0 ran=0
# run_one TAG P CSV FIELDS ARGS...: FIELDS = space-separated key=value for the row (mode, variant)
run_one() {
  local tag=$1 p=$2 csvfile=$3 fields=$4
  shift 4
  local json=$OUT/$tag.json log=$OUT/$tag.log t0=$SECONDS over=0 need have
  local -a kv
  read -r -a kv <<<"$fields"
  if [ -n "$in_slurm" ]; then
    over=
  else
    if [ "$build" = emulator ]; then need=$((p * workers)) have=$cores
    elif [ "$build" = cpu ]; then need=$p have=$cores
    else need=$p have=$gpus; fi
    [ "$need" -gt "$have" ] && over=1
  fi
  rm -f "$json"
  if nn_launch "$p" "$NN_BIN" --data "$NN_DATA" --hidden "$HIDDEN" --epochs "$EPOCHS" \
    --train-size "$TRAIN_SIZE" --test-size "$TEST_SIZE" --report "$json" "$@" "${extra[@]}" >"$log" 2>&1 &&
    [ -s "$json" ]; then
    "$PYTHON" -c "$ROW_PY" row "$json" "$log" "${kv[@]}" "sim_workers=$workers" \
      "oversubscribed=$over" "launcher=$LAUNCHER" "wall_s=$((SECONDS - t0))" >>"$csvfile"
    echo "  $tag: ok ($((SECONDS - t0)) s) $(tail -n 1 "$csvfile" | cut -d, -f9,11,13 |
      awk -F, '{ printf "%s s/epoch, %s ms/step, precision %s", $1, $2, $3 }')$([ "$over" = 1 ] && echo ' [oversubscribed]')"
    ran=$((ran + 1))
  else
    echo "  $tag: FAILED, see $log:" >&2
    { grep -m 1 -E '^(error|internal error)' "$log" || tail -n 3 "$log"; } | sed 's/^/    /' >&2
    failed=$((failed + 1))
  fi
}

extra=("$@")
on_cpu=
for ((i = 0; i < ${#extra[@]}; ++i)); do
  case ${extra[i]} in
    --device=cpu) on_cpu=1 ;;
    --device) [ "${extra[i + 1]:-}" = cpu ] && on_cpu=1 ;;
  esac
done
if [ -n "$on_cpu" ]; then
  [ "$OUT" = build/scaling ] && OUT=build/scaling-cpu
  VARIANTS=$(printf '%s\n' $VARIANTS | grep -v graph | tr '\n' ' ' || true)
  EPOCHS=${EPOCHS:-3}
  # One BLAS thread per rank outside Slurm, so p ranks use p cores as p devices would (inside
  # a job, --cpus-per-task decides); OPENBLAS_NUM_THREADS overrides.
  [ -n "$in_slurm" ] || export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
fi
mkdir -p "$OUT"
start=$SECONDS

# ---- probe: which build, which device ---------------------------------------------------------
echo "== $NN_SCRIPT: probe run (1 rank) to label the results"
probe=$OUT/probe.json
rm -f "$probe"
if ! nn_launch 1 "$NN_BIN" --data "$NN_DATA" --hidden 8 --batch 100 --epochs 1 --train-size 500 \
  --test-size 100 --report "$probe" "${extra[@]}" >"$OUT/probe.log" 2>&1 || [ ! -s "$probe" ]; then
  { grep -m 1 -E '^(error|internal error)' "$OUT/probe.log" || tail -n 5 "$OUT/probe.log"; } >&2
  nn_die "the probe run failed (log: $OUT/probe.log)"
fi
IFS=$'\t' read -r build device < <("$PYTHON" -c "$ROW_PY" label "$probe")
gpus=0
if [ "$build" != emulator ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

if [ -z "${QUICK:-}" ]; then
  if [ "$build" = emulator ]; then QUICK=1; else QUICK=0; fi  # cpu: the real thing, full size
fi
if [ "$QUICK" = 1 ]; then
  HIDDEN=${HIDDEN:-128} EPOCHS=${EPOCHS:-3} TRAIN_SIZE=${TRAIN_SIZE:-10000} TEST_SIZE=${TEST_SIZE:-1000}
else
  HIDDEN=${HIDDEN:-512} EPOCHS=${EPOCHS:-5} TRAIN_SIZE=${TRAIN_SIZE:-0} TEST_SIZE=${TEST_SIZE:-0}
fi

# Rank counts: numeric, unique, sorted; inside Slurm at most $SLURM_NTASKS.
plist=()
for p in $NP; do
  [[ $p =~ ^[1-9][0-9]*$ ]] || nn_die "NP: '$p' is not a positive integer"
  if [ -n "${SLURM_NTASKS:-}" ] && [ "$p" -gt "$SLURM_NTASKS" ]; then
    echo "  p=$p skipped: the job has $SLURM_NTASKS tasks (sbatch --ntasks=$p)"
    continue
  fi
  plist+=("$p")
done
mapfile -t plist < <(printf '%s\n' "${plist[@]}" | sort -n -u)
[ "${#plist[@]}" -gt 0 ] || nn_die "no rank count left in NP=\"$NP\""

if [ -z "${VARIANT_P:-}" ]; then
  VARIANT_P=${plist[0]}
  for p in "${plist[@]}"; do
    if [ -n "$in_slurm" ]; then
      VARIANT_P=$p
    elif [ "$build" = emulator ] && [ $((p * workers)) -le "$cores" ]; then
      VARIANT_P=$p
    elif [ "$build" = cpu ] && [ "$p" -le "$cores" ]; then
      VARIANT_P=$p
    elif [ "$build" != emulator ] && [ "$build" != cpu ] && [ "$p" -le "$((gpus > 0 ? gpus : 1))" ]; then
      VARIANT_P=$p
    fi
  done
fi

label="$build build, $device"
[ "$build" = cpu ] && label="--device cpu (host BLAS, no emulator), $device"
[ "$build" = emulator ] && label+=" [emulator (CPU), not GPU performance]"
echo "== $NN_SCRIPT: $label; $LAUNCHER${SRUN_MPI:+ --mpi=$SRUN_MPI}; $NN_BIN -> $OUT/"
echo "   p=(${plist[*]}) strategies=($STRATEGIES) modes=($MODES) strong B=$B, weak B=$B0*p;" \
  "H=$HIDDEN epochs=$EPOCHS train-size=$TRAIN_SIZE test-size=$TEST_SIZE QUICK=$QUICK" \
  "SIM_WORKERS=$workers${extra[*]:+; nn_train args: ${extra[*]}}"
if [ -z "$in_slurm" ] && [ "$build" = emulator ]; then
  read -r load _ </proc/loadavg || load=0
  if awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > c / 2) }'; then
    echo "   warning: load average $load on $cores cores before starting: the timings will be noisy" >&2
  fi
fi

"$PYTHON" -c "$ROW_PY" header >"$OUT/scaling.csv"
"$PYTHON" -c "$ROW_PY" header >"$OUT/variants_runs.csv"
rm -f "$OUT/variants.csv"

# ---- strong and weak scaling: strategies interleaved at each p (load drifts hit all alike) ----
for mode in $MODES; do
  echo "== $mode scaling"
  for p in "${plist[@]}"; do
    if [ "$mode" = strong ]; then batch=$B; else batch=$((B0 * p)); fi
    for s in $STRATEGIES; do
      run_one "${mode}_${s}_p${p}" "$p" "$OUT/scaling.csv" "mode=$mode variant=$s" \
        --batch "$batch" --strategy "$s"
    done
  done
done

# ---- variants at one p, VARIANT_REPEATS rounds of all variants -------------------------------
if [ -n "${VARIANTS// /}" ]; then
  echo "== variants at p=$VARIANT_P, B=$B, $VARIANT_REPEATS round(s)"
  for ((rep = 1; rep <= VARIANT_REPEATS; rep++)); do
    for v in $VARIANTS; do
      read -r -a vargs <<<"$(variant_args "$v")"
      run_one "variant_${v}_p${VARIANT_P}_r${rep}" "$VARIANT_P" "$OUT/variants_runs.csv" \
        "mode=variant variant=$v" --batch "$B" "${vargs[@]}"
    done
  done
fi

# ---- summary: speedups, variants.csv (medians), ratios -----------------------------------------
echo "== summary ($label)"
"$PYTHON" - "$OUT" <<'EOF' || failed=$((failed + 1))
import csv, os, statistics, sys
out = sys.argv[1]
def rows(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))
def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None
def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
def fmt(v, f="%.4g"):
    return "-" if v is None else f % v

sc = rows("scaling.csv")
for mode, key, what in (("strong", "seconds_per_epoch", "s/epoch"), ("weak", "step_ms", "ms/step")):
    sel = [r for r in sc if r["mode"] == mode]
    if not sel:
        continue
    if mode == "strong":
        print("strong scaling (global batch %s): time per epoch, S(p) = t(1)/t(p), E(p) = S(p)/p"
              % sel[0]["batch"])
    else:
        print("weak scaling (batch = B0 * p): time per step, E(p) = t(1)/t(p), scaled speedup S(p) = p E(p)")
    print("  %-10s %4s %6s %10s %8s %8s %s" % ("strategy", "p", "batch", what, "S(p)", "E(p)", "test prec"))
    for s in dict.fromkeys(r["strategy"] for r in sel):
        by_p = {}
        for r in sel:
            if r["strategy"] == s:
                by_p.setdefault(int(r["p"]), []).append(r)
        ps = sorted(by_p)
        t = {p: med(num(r[key]) for r in by_p[p]) for p in ps}
        p0 = ps[0]
        for p in ps:
            S = E = None
            if t[p0] and t[p]:
                E = t[p0] / t[p] * (1 if mode == "weak" else p0 / p)
                S = E * p
            over = " oversubscribed" if any(r["oversubscribed"] == "1" for r in by_p[p]) else ""
            print("  %-10s %4d %6s %10s %8s %8s %s%s" % (s, p, by_p[p][0]["batch"], fmt(t[p]),
                  fmt(S, "%.3f"), fmt(E, "%.3f"), by_p[p][0]["test_precision"] or "-", over))

vr = rows("variants_runs.csv")
if vr:
    cols = ["variant", "strategy", "overlap", "graph", "p", "batch", "hidden", "epochs",
            "train_images", "repeats",
            "step_ms", "step_ms_min", "step_ms_max", "host_queue_us_per_step", "host_queue_us_min",
            "host_queue_us_max", "seconds_per_epoch", "images_per_s", "test_precision",
            "oversubscribed", "build", "device"]
    agg = {}
    for r in vr:
        agg.setdefault(r["variant"], []).append(r)
    out_rows = []
    for v, rs in agg.items():
        st = [num(r["step_ms"]) for r in rs if num(r["step_ms"]) is not None]
        hq = [num(r["host_queue_us_per_step"]) for r in rs if num(r["host_queue_us_per_step"]) is not None]
        a = {c: rs[0].get(c, "") for c in cols}
        a.update({"repeats": len(rs), "step_ms": fmt(med(st), "%.6g"),
                  "step_ms_min": fmt(min(st) if st else None, "%.6g"),
                  "step_ms_max": fmt(max(st) if st else None, "%.6g"),
                  "host_queue_us_per_step": fmt(med(hq), "%.6g"),
                  "host_queue_us_min": fmt(min(hq) if hq else None, "%.6g"),
                  "host_queue_us_max": fmt(max(hq) if hq else None, "%.6g"),
                  "seconds_per_epoch": fmt(med(num(r["seconds_per_epoch"]) for r in rs), "%.6g"),
                  "images_per_s": fmt(med(num(r["images_per_s"]) for r in rs), "%.6g")})
        out_rows.append(a)
    with open(os.path.join(out, "variants.csv"), "w") as f:
        w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for a in out_rows:
            w.writerow({c: ("" if a[c] == "-" else a[c]) for c in cols})
    r0 = out_rows[0]
    print("variants at p=%s, B=%s, H=%s (median of %s runs each): step time, host queue time per step"
          % (r0["p"], r0["batch"], r0["hidden"], r0["repeats"]))
    print("  %-22s %10s %10s %10s %16s" % ("variant", "step ms", "min", "max", "host queue us"))
    for a in out_rows:
        print("  %-22s %10s %10s %10s %16s" % (a["variant"], a["step_ms"], a["step_ms_min"],
              a["step_ms_max"], a["host_queue_us_per_step"]))
    by = {a["variant"]: a for a in out_rows}
    print("ratios (< 1: the first is faster)      step time   host queue")
    for name, x, y in (("overlap / no-overlap", "allreduce", "allreduce_no_overlap"),
                       ("ps / allreduce", "ps", "allreduce"),
                       ("model / allreduce", "model", "allreduce"),
                       ("graph / no-graph", "allreduce_graph", "allreduce"),
                       ("ps graph / ps", "ps_graph", "ps"),
                       ("model graph / model", "model_graph", "model")):
        if x in by and y in by:
            r = []
            for k in ("step_ms", "host_queue_us_per_step"):
                a, b = num(by[x][k]), num(by[y][k])
                r.append(fmt(a / b, "%.3f") if a is not None and b else "-")
            print("  %-36s %10s %12s" % (name, r[0], r[1]))
EOF

echo "== $NN_SCRIPT done in $((SECONDS - start)) s: $ran runs ok, $failed failed; CSV in $OUT/" \
  "(scaling.csv, variants.csv, variants_runs.csv); plots: bench/scaling_plot.py $OUT"
[ "$failed" -eq 0 ]
