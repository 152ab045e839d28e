# Sourced by bugs/run.sh and standard/run.sh: their programs are independent, so they are built
# and run side by side.
# each_file FUNC DIR FILE...: runs `FUNC FILE` for every FILE, SIM_EXAMPLES_JOBS of them at a time
# (default: the number of cores), keeps each one's output in DIR/NAME.result, prints the outputs
# in FILE order when all have ended and sets `passed` and `failed` from their lines starting with
# "ok " and "FAIL". A FUNC that printed neither counts as a failure.
each_file() {
  local func=$1 dir=$2 f name result running=0 jobs
  shift 2
  jobs=${SIM_EXAMPLES_JOBS:-$(nproc 2>/dev/null || echo 1)}
  for f in "$@"; do
    name=$(basename "$f" .cu)
    "$func" "$f" >"$dir/$name.result" 2>&1 &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  done
  wait
  passed=0 failed=0
  for f in "$@"; do
    result=$dir/$(basename "$f" .cu).result
    cat "$result"
    passed=$((passed + $(grep -c '^ok ' "$result")))
    failed=$((failed + $(grep -c '^FAIL' "$result")))
    grep -q -e '^ok ' -e '^FAIL' "$result" || { echo "FAIL $f: no verdict"; failed=$((failed + 1)); }
  done
}
