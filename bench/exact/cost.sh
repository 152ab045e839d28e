#!/usr/bin/env bash
# What --exact on costs: the step time (the median batch of --report) and the bytes the ranks sum
# a step (the all-reduced buffer: floats, or the fixed-point words), --exact on against off, side by side in one invocation (off then on at each point), at
# each rank count, shape and device.
#
#   bench/exact/cost.sh [OUT_DIR]     (default bench/results/exact)
#
# Environment: NN_TRAIN (build/cpu/bin/nn_train: --device cpu and the emulator; a CUDA build's
#   binary for a GPU), DEVICES (cpu gpu), NP_LIST (1 2 3 4), SHAPES (256:100 1024:1000),
#   DATA (data/current), MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe).
# Steps: --device cpu trains 2 epochs of 20 batches (the first epoch's batches count too: the
# median is over all of them); the emulator 1 epoch of 3 batches at 1024:1000 and of 10 at 256:100
# (no validation hold-out: every batch full).
# Writes OUT_DIR/cost.csv (one row a run) and prints the table of docs/performance.md
# ("Exact training"): on / off for each point.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/bench/results/exact}
train=${NN_TRAIN:-$root/build/cpu/bin/nn_train}
read -r -a devices <<<"${DEVICES:-cpu gpu}"
read -r -a np_list <<<"${NP_LIST:-1 2 3 4}"
read -r -a shapes <<<"${SHAPES:-256:100 1024:1000}"
data=${DATA:-$root/data/current}
mpirun_cmd=${MPIRUN:-$root/slurm/mpirun.sh}
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
csv=$out/cost.csv
echo "device,hidden,batch,ranks,exact,batch_median_ms,summed_bytes_per_step,steps" >"$csv"
for dev in "${devices[@]}"; do
  for shape in "${shapes[@]}"; do
    H=${shape%%:*} B=${shape##*:}
    if [ "$dev" = cpu ]; then batches=20 epochs=2
    elif [ "$B" -ge 1000 ]; then batches=3 epochs=1
    else batches=10 epochs=1; fi
    n=$((batches * B))  # with --val-fraction 0: that many full batches an epoch
    for np in "${np_list[@]}"; do
      for exact in off on; do
        rep=$work/r.json
        "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" --device "$dev" --hidden "$H" \
          --batch "$B" --train-size "$n" --val-fraction 0 --test-size 100 --epochs "$epochs" --exact "$exact" --report "$rep" \
          >"$work/log" 2>&1 || { tail -5 "$work/log"; exit 1; }
        python3 - "$rep" "$dev" "$H" "$B" "$np" "$exact" >>"$csv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
dev, H, B, np_, exact = sys.argv[2:]
ph = r["phases"]["batch"]
sent = r["per_batch"]["mpi_bytes"] / 2 if int(np_) > 1 else 0  # the summed buffer (--report counts there and back)
print(f"{dev},{H},{B},{np_},{exact},{ph['median_s'] * 1e3:.3f},{sent:.0f},{ph['count']}")
PY
        tail -n 1 "$csv"
      done
    done
  done
done
python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = lambda r: (r["device"], r["hidden"], r["batch"], r["ranks"])
by = {}
for r in rows: by.setdefault(key(r), {})[r["exact"]] = r
print("| device | shape | ranks | step off (ms) | step on (ms) | on / off | bytes summed a step, off | on |")
print("|---|---|---|---|---|---|---|---|")
for k, v in by.items():
    off, on = float(v["off"]["batch_median_ms"]), float(v["on"]["batch_median_ms"])
    print(f"| {'`--device cpu`' if k[0] == 'cpu' else k[0]} | {k[1]}:{k[2]} | {k[3]} | {off:.2f} | {on:.2f} | {on / off:.2f}x | "
          f"{int(float(v['off']['summed_bytes_per_step'])):,} | {int(float(v['on']['summed_bytes_per_step'])):,} |")
PY
