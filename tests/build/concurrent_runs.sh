#!/usr/bin/env bash
# Concurrent launches never collide: ROUNDS times, JOBS runs of nn_train start at the same
# instant (all released by one file appearing), the way our Makefile, tests and scripts start
# them: through slurm/mpirun.sh at 1 and 2 ranks, and as a singleton (SINGLETON in the
# Makefile). Each must succeed (exit 0 and its `test precision:` line; every third one is a
# bad-input run that must fail with exit 1 and its one `error:` line, as in the issue that
# found the collision), each launch must have had a session directory of its own, and none
# may be left behind.
#   tests/build/concurrent_runs.sh NN_TRAIN DATA_DIR
# Environment: ROUNDS (8), JOBS (6). Ends with `concurrency: N passed, M failed`.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$(realpath "$1")
data=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
wrapper=$root/slurm/mpirun.sh
rounds=${ROUNDS:-8}
jobs=${JOBS:-6}
[ -x "$train" ] || { echo "concurrent_runs.sh: error: $train is not an executable" >&2; exit 2; }
[ -d "$data" ] || { echo "concurrent_runs.sh: error: $data is not a directory" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The launches make their private directories here, so that leftovers are ours to count.
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export SIM_WORKERS=1
args=(--data "$data" --epochs 1 --train-size 600 --test-size 200 --hidden 8 --batch 50)

passed=0 failed=0
fail() {
  echo "FAIL $*"
  failed=$((failed + 1))
}

for round in $(seq 1 "$rounds"); do
  go=$work/go.$round
  pids=()
  for j in $(seq 1 "$jobs"); do
    log=$work/r$round.j$j.log
    case $((j % 3)) in
      0) kind=bad ;;
      1) kind=np2 ;;
      2) kind=singleton ;;
    esac
    echo "$kind" >"$log.kind"
    (
      while [ ! -e "$go" ]; do sleep 0.01; done
      # The launched program records the session base it was given, then becomes nn_train.
      show='echo "session base: ${OMPI_MCA_orte_tmpdir_base:-none}"; exec "$0" "$@"'
      case $kind in
        np2) exec "$wrapper" --oversubscribe -np 2 sh -c "$show" "$train" "${args[@]}" ;;
        singleton) NN_MPIRUN=env exec "$wrapper" sh -c "$show" "$train" "${args[@]}" ;;
        bad) exec "$wrapper" --oversubscribe -np 2 sh -c "$show" "$train" --data "$work/no-such-dir" --epochs 1 ;;
      esac
    ) >"$log" 2>&1 &
    pids+=($!)
  done
  sleep 0.3
  touch "$go"  # every run starts now
  for j in $(seq 1 "$jobs"); do
    wait "${pids[$((j - 1))]}"
    status=$?
    log=$work/r$round.j$j.log
    kind=$(cat "$log.kind")
    what="round $round run $j ($kind)"
    if [ "$kind" = bad ]; then
      if [ $status -eq 1 ] && [ "$(grep -c '^error:' "$log")" -ge 1 ]; then passed=$((passed + 1)); else
        fail "$what: exit $status, expected 1 with an error: line"; sed 's/^/    /' "$log" | tail -n 15
      fi
    elif [ $status -eq 0 ] && grep -q '^test precision:' "$log"; then
      passed=$((passed + 1))
    else
      fail "$what: exit $status"; sed 's/^/    /' "$log" | tail -n 15
    fi
  done
done

# One session base per launch (a 2-rank launch prints it twice), never shared, all removed.
launches=$((rounds * jobs))
bases=$(cat "$work"/r*.log | sed -n 's/^session base: //p' | sort -u)
distinct=$(printf '%s\n' "$bases" | grep -c "^$TMPDIR/nn-ompi\.")
if [ "$distinct" -eq "$launches" ]; then passed=$((passed + 1)); else
  fail "$launches launches reported $distinct distinct private session directories under $TMPDIR"
fi
left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 | wc -l)
if [ "$left" -eq 0 ]; then passed=$((passed + 1)); else
  fail "$left entries left behind in $TMPDIR: $(ls "$TMPDIR" | head -n 3 | tr '\n' ' ')"
fi
echo "concurrency: $passed passed, $failed failed ($rounds rounds of $jobs simultaneous launches)"
[ "$failed" -eq 0 ]
