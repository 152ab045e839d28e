#!/usr/bin/env bash
# Proves that a change (a refactor of the source layout, say) changed no behaviour of the
# trainer: builds the emulator (CPU) build's nn_train, float and double, of an OLD commit and
# of a NEW commit or working tree, runs the same matrix of small trainings with both, and
# compares the checkpoints that --save wrote, byte for byte (cmp), and the exit statuses.
# The matrix: every strategy x device x precision x 1..3 ranks, the GEMM variants rotated
# over the gpu runs, --no-overlap, --graph, --mpi device, other options, rejected options
# (same exit status and message), 4 ranks, the host-staged exchange in pieces
# (--exchange-chunk), --profile, and resumed runs of every strategy on both devices:
# --epochs 1 --load G --save F, then --epochs 2 --save F --resume (G: weights of another
# seed, so a --resume that silently started afresh would end in other bits).
#
#   bash tests/build/same_saves.sh [OLD_COMMIT [NEW_COMMIT_OR_TREE]]
#
# OLD defaults to the last commit before the src/ kernels/ sim/ refactor (old_spec below); NEW to the
# working tree of the repository holding this script (a directory: that checkout's working
# tree; anything else: a commit). Commits are exported with `git archive`, working trees
# copied (tracked + untracked-not-ignored files), all under the scratch directory, so nothing
# in the repository is touched; builds there are reused (make is incremental).
# Not part of `make test`: it builds two trees (several minutes each from scratch on 2 cores).
#
# Environment: SAME_SAVES_DIR (scratch, default /tmp/nn-same-saves), DATA (MNIST IDX
# directory, default <repo>/data/current), RUN_TIMEOUT (seconds per launch, default 300),
# ONLY (a bash regex: run only the matrix entries it matches, e.g. ONLY='model.*cpu'),
# NN_MPIRUN (the real mpirun, passed on to slurm/mpirun.sh).
# Prints one line per run: same (with the first 16 hex digits of both checkpoints' SHA-256) |
# same-error | DIFF | FAIL, then a summary; exits 0 only if
# every run is same or same-error, 1 otherwise, 2 on bad usage or a failed build.
set -euo pipefail
export LC_ALL=C

usage() { echo "usage: bash tests/build/same_saves.sh [OLD_COMMIT [NEW_COMMIT_OR_TREE]]  (--help: see the top of the script)"; }
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) usage >&2; exit 2 ;;
esac
[ $# -le 2 ] || { usage >&2; exit 2; }

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
scratch=${SAME_SAVES_DIR:-/tmp/nn-same-saves}
data=${DATA:-$repo/data/current}
[ -d "$data" ] || { echo "same_saves: no data directory $data (run make data, or set DATA)" >&2; exit 2; }
data=$(cd "$data" && pwd -P)
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd -P)
exec 9>"$scratch/.lock"
flock -n 9 || { echo "same_saves: another run holds $scratch/.lock" >&2; exit 2; }

# prepare SPEC: a directory holding the sources of SPEC (commit or working tree); prints it.
prepare() {
  local spec=$1 dir hash src
  if [ -d "$spec" ]; then
    src=$(git -C "$spec" rev-parse --show-toplevel)
    dir=$scratch/tree-$(printf %s "$src" | cksum | cut -d' ' -f1)
    echo "== $src: working tree at $(git -C "$src" rev-parse --short HEAD) + $(git -C "$src" status --porcelain | wc -l) uncommitted change(s)" >&2
    mkdir -p "$dir"
    # Mirror the tree exactly (files moved away must vanish) but keep build/: tar keeps the
    # mtimes, so make rebuilds only what changed.
    find "$dir" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
    git -C "$src" ls-files -co --exclude-standard -z |
      while IFS= read -r -d '' f; do if [ -e "$src/$f" ] || [ -L "$src/$f" ]; then printf '%s\0' "$f"; fi; done |
      tar -C "$src" --null -T - -c | tar -x -C "$dir"
  else
    hash=$(git -C "$repo" rev-parse --verify --quiet "$spec^{commit}") ||
      { echo "same_saves: $spec is neither a directory nor a commit" >&2; exit 2; }
    dir=$scratch/commit-$hash
    if [ ! -d "$dir" ]; then
      rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
      git -C "$repo" archive "$hash" | tar -x -C "$dir.tmp"
      mv "$dir.tmp" "$dir"
    fi
  fi
  echo "$dir"
}

# build NAME DIR: both nn_train of DIR; a failure shows the log's tail and ends the script.
build() {
  local name=$1 dir=$2 log=$scratch/build-$1.log
  echo "== build $name: $dir (log: $log)"
  if ! { make -C "$dir" build/cpu/bin/nn_train && make -C "$dir" USE_DOUBLE=1 build/cpu-double/bin/nn_train; } >"$log" 2>&1; then
    echo "FAIL  build of $name ($dir); the log's tail:"; tail -25 "$log" | sed 's/^/    /'
    exit 2
  fi
}

old_spec=${1:-4770cf4}
new_spec=${2:-$repo}
old_dir=$(prepare "$old_spec")
new_dir=$(prepare "$new_spec")
start=$SECONDS
build old "$old_dir"
build new "$new_dir"
echo "== builds: $((SECONDS - start)) s"

# ---- the matrix: "PRECISION NP ARGS..."; ARGS holds @resume for a resumed run ----
matrix=()
add() { matrix+=("$*"); }
gemms=("" "--gemm 0" "--gemm 1" "--gemm 2" "--gemm 3" "--gemm 4")  # "": the default (4)
k=0
for prec in float double; do
  for s in allreduce ps model; do
    for np in 1 2 3; do
      # shellcheck disable=SC2086  # "--gemm V" is two words; "" none
      add $prec $np --strategy $s --device gpu ${gemms[k++ % 6]}
      add "$prec $np --strategy $s --device cpu"
    done
  done
done
add float 2 --strategy allreduce --device gpu --no-overlap
add float 3 --strategy allreduce --device cpu --no-overlap
add double 2 --strategy allreduce --device gpu --gemm 1 --no-overlap
add double 3 --strategy allreduce --device gpu --gemm 0 --no-overlap
add float 2 --strategy model --device gpu --no-overlap
add float 2 --strategy allreduce --device gpu --graph
add double 3 --strategy model --device gpu --graph --gemm 2
add float 2 --strategy allreduce --device gpu --mpi device
add double 3 --strategy model --device gpu --mpi device --gemm 3
add float 3 --strategy ps --device gpu --no-shuffle --lr 0.1 --reg 0.001 --val-fraction 0.1
add double 2 --strategy allreduce --device cpu --no-shuffle --lr 0.1 --reg 0.001 --val-fraction 0.1
add float 2 --strategy ps --device gpu --mpi device  # rejected: the same exit status and message
add double 2 --strategy allreduce --device cpu --graph
add float 1 --gemm 7
add float 2 --strategy allreduce --device gpu @resume
add double 3 --strategy allreduce --device cpu @resume
add double 3 --strategy ps --device gpu --gemm 2 @resume
add float 2 --strategy ps --device cpu @resume
add float 3 --strategy model --device gpu --gemm 0 @resume
add double 2 --strategy model --device cpu @resume
add double 1 --strategy allreduce --device gpu --gemm 3 @resume
add float 4 --strategy allreduce --device gpu
add double 4 --strategy allreduce --device cpu
add float 4 --strategy ps --device gpu --no-overlap
add float 3 --strategy allreduce --device cpu --node-shared off
add double 2 --strategy allreduce --device cpu --node-shared off --no-overlap
add float 2 --strategy allreduce --device gpu --mpi device --no-overlap
add float 1 --device gpu --persistent on
add double 1 --device gpu --persistent on --print-every 5
add float 1 --device gpu --persistent on @resume
add float 1 --device gpu --gemm 5 --fused on
add float 1 --device gpu --no-graph --print-every 4
add float 2 --strategy allreduce --device gpu --exchange-chunk 1024
add double 3 --strategy allreduce --device gpu --exchange-chunk 1024 --gemm 1
add float 4 --strategy allreduce --device gpu --exchange-chunk 1024 --no-overlap
add float 3 --strategy ps --device gpu --exchange-chunk 1024
add float 3 --strategy allreduce --device gpu --mpi device --exchange-chunk 1024
add float 4 --strategy allreduce --device gpu --mpi device
add float 4 --strategy ps --device cpu --node-shared off
add float 4 --strategy allreduce --device cpu
add double 4 --strategy allreduce --device cpu --node-shared off
add float 4 --strategy model --device gpu
add double 4 --strategy model --device cpu
add float 2 --strategy allreduce --device gpu --profile
add float 3 --strategy allreduce --device cpu --node-shared off --profile
add float 2 --strategy model --device gpu --profile
add float 3 --strategy allreduce --device gpu --exchange-chunk 1024 @resume
if [ -n "${ONLY:-}" ]; then  # a subset, to look into one difference
  kept=()
  for entry in "${matrix[@]}"; do if [[ $entry =~ $ONLY ]]; then kept+=("$entry"); fi; done
  matrix=("${kept[@]}")
  [ ${#matrix[@]} -gt 0 ] || { echo "same_saves: ONLY=$ONLY matches no run" >&2; exit 2; }
fi
common=(--hidden 16 --batch 50 --train-size 600 --test-size 100 --seed 7)
echo "== ${#matrix[@]} runs, each with both builds, each with ${common[*]} and --epochs 2 --save ckpt (@resume: see run())"

export SIM_WORKERS=1
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
runs=$scratch/runs
rm -rf "$runs"

# launch TREE RUNDIR PRECISION NP ARGS...: one launch in RUNDIR; its exit status in RUNDIR/rc.
launch() {
  local tree=$1 rundir=$2 prec=$3 np=$4 bin mpirun rc=0; shift 4
  bin=$tree/build/cpu/bin/nn_train
  if [ "$prec" = double ]; then bin=$tree/build/cpu-double/bin/nn_train; fi
  mpirun=$tree/slurm/mpirun.sh
  [ -x "$mpirun" ] || mpirun=$repo/slurm/mpirun.sh
  (cd "$rundir" && timeout -k 10 "${RUN_TIMEOUT:-300}" "$mpirun" --oversubscribe -np "$np" \
     "$bin" --data "$data" "${common[@]}" "$@" >>stdout 2>>stderr) || rc=$?
  echo "$rc" >"$rundir/rc"
}

# run SIDE TREE INDEX PRECISION NP ARGS...: a plain run, or a resumed one (@resume).
run() {
  local side=$1 tree=$2 i=$3 prec=$4 np=$5 rundir; shift 5
  rundir=$runs/$i/$side
  mkdir -p "$rundir"
  local args=() resume=0 a
  for a in "$@"; do if [ "$a" = @resume ]; then resume=1; else args+=("$a"); fi; done
  if [ "$resume" = 0 ]; then
    launch "$tree" "$rundir" "$prec" "$np" "${args[@]}" --epochs 2 --save ckpt
    return 0
  fi
  local phase
  for phase in "--epochs 1 --seed 8 --save start" "--epochs 1 --load start --save ckpt" \
               "--epochs 2 --save ckpt --resume --save-every 3"; do
    # shellcheck disable=SC2086  # $phase: several words
    launch "$tree" "$rundir" "$prec" "$np" "${args[@]}" $phase
    [ "$(cat "$rundir/rc")" = 0 ] || return 0
  done
}

# stderr for comparison: mpirun's boxed notices (job ids, which rank failed first) left out,
# the tree's path and process ids replaced, the lines sorted (ranks write concurrently).
own_stderr() { sed '/^-\{40,\}$/,/^-\{40,\}$/d' "$1"; }
normalized() { own_stderr "$1" | sed -e "s|$2|TREE|g" -e 's/\(PID\|pid\) [0-9]*/\1 N/g' | sort; }
tail_of() {  # the program's own last lines, else mpirun's
  { if [ -n "$(own_stderr "$1")" ]; then own_stderr "$1"; else cat "$1"; fi; } | tail -5 | sed 's/^/      /'
}

same=0 bad=0 i=0
for entry in "${matrix[@]}"; do
  i=$((i + 1))
  read -r -a e <<<"$entry"
  label="${e[*]}"
  run old "$old_dir" "$i" "${e[@]}"
  run new "$new_dir" "$i" "${e[@]}"
  o=$runs/$i/old n=$runs/$i/new
  orc=$(cat "$o/rc") nrc=$(cat "$n/rc")
  if [ "$orc" = 0 ] && [ "$nrc" = 0 ]; then
    if [ ! -f "$o/ckpt" ] || [ ! -f "$n/ckpt" ]; then
      echo "FAIL  $label: exit 0 but no checkpoint (old: $(ls "$o"), new: $(ls "$n"))"; bad=$((bad + 1))
    elif where=$(cd "$runs/$i" && cmp old/ckpt new/ckpt 2>&1); then
      echo "same  $(sha256sum "$n/ckpt" | cut -c1-16)  $label"; same=$((same + 1))
    else
      echo "DIFF  $label: $where"; bad=$((bad + 1))
    fi
  elif [ "$orc" = "$nrc" ] && cmp -s <(normalized "$o/stderr" "$old_dir") <(normalized "$n/stderr" "$new_dir"); then
    echo "same-error  $label: both exit $orc: $(grep -m1 . "$o/stderr" || true)"; same=$((same + 1))
  else
    echo "FAIL  $label: exit old $orc, new $nrc"; bad=$((bad + 1))
    [ "$orc" = 0 ] || { echo "    old stderr:"; tail_of "$o/stderr"; }
    [ "$nrc" = 0 ] || { echo "    new stderr:"; tail_of "$n/stderr"; }
    [ "$orc" != "$nrc" ] || echo "    (the same exit status, but different stderr)"
  fi
done
echo "== same_saves: ${#matrix[@]} runs: $same same, $bad not; old $old_spec ($old_dir), new $new_spec ($new_dir); $((SECONDS - start)) s in all; outputs in $runs"
[ "$bad" = 0 ]
