#!/usr/bin/env bash
# A rank killed mid-training: starts a data-parallel training under mpirun in the
# background, waits until it is training (the first --print-every line), SIGKILLs one
# rank's process, and checks that the job does not hang with its other ranks waiting
# in a collective for the dead one:
#
#   - mpirun exits within KILL_EXIT_S (10) x F seconds of the kill, with a non-zero status,
#     where F >= 1 is the host's slowdown measured right after the kill (tests/cli/slowdown.sh:
#     a busy host widens the window; a job that hangs still fails);
#   - none of the job's nn_train processes is left once mpirun has exited (2 x F s grace).
#
# Cases (NP:RANK, the rank killed): 2:1 3:2 2:0 3:0 (KILL_CASES overrides).
# Prints what mpirun printed after the kill, so that its message can be read.
#
#   tests/cli/kill_rank.sh NN_TRAIN [DATA_DIR]
#
# NN_TRAIN  the trainer, e.g. build/cpu/bin/nn_train (emulator build: no GPU needed)
# DATA_DIR  IDX directory (e.g. data/current); without it, 6000 + 1000 random images
#           are generated into a temporary directory (python3)
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), KILL_CASES, KILL_EXIT_S
#   (10), KILL_START_S (120: how long training may take to start; both times the measured
#   slowdown), SLOWDOWN (a fixed factor instead), SIM_WORKERS (1), CLI_KEEP=1 keeps the logs.
# Prints "ok ..."/"FAIL ..." per case, then "kill_rank: N passed, M failed"; exits
# non-zero on any failure. Every process it starts is ended before it exits.
set -uo pipefail
export LC_ALL=C

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 NN_TRAIN [DATA_DIR]" >&2
  exit 2
fi
train=$1 data=${2:-}
if [ ! -x "$train" ]; then
  echo "FAIL trainer $train not found or not executable"
  echo "kill_rank: 0 passed, 1 failed"
  exit 1
fi
case $train in /*) ;; *) train=$PWD/$train ;; esac
train_real=$(readlink -f "$train")
if [ -n "$data" ] && [ ! -d "$data" ]; then
  echo "FAIL data directory $data not found"
  echo "kill_rank: 0 passed, 1 failed"
  exit 1
fi

mpirun_cmd=${MPIRUN:-$(cd "$(dirname "$0")/../.." && pwd)/slurm/mpirun.sh}  # a private session directory per launch
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"
read -r -a cases <<<"${KILL_CASES:-2:1 3:2 2:0 3:0}"
exit_s=${KILL_EXIT_S:-10}
. "$(cd "$(dirname "$0")" && pwd)/slowdown.sh"
start_factor=$(slowdown)
start_limit=$(scaled "${KILL_START_S:-120}" "$start_factor")
export SIM_WORKERS=${SIM_WORKERS:-1}
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-kill-rank.XXXXXX")
keep=${CLI_KEEP:-0}
mpid=""
rank_pids=()
# Ends whatever this script started and is still running (by pid, never by name).
stop_ours() {
  local p
  if [ -n "$mpid" ] && kill -0 "$mpid" 2>/dev/null; then
    kill -TERM "$mpid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$mpid" 2>/dev/null || break; sleep 0.3; done
    kill -KILL "$mpid" 2>/dev/null
  fi
  for p in "${rank_pids[@]}"; do  # only if the pid is still one of our trainers
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$train_real" ] && kill -KILL "$p" 2>/dev/null
  done
  if [ -n "$mpid" ]; then wait "$mpid" 2>/dev/null; fi
  return 0
}
cleanup() {
  stop_ours
  if [ "$keep" = 1 ]; then echo "kill_rank: logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

usec() { local t=${1/./}; echo $((10#$t)); }  # EPOCHREALTIME -> microseconds
since() { awk -v d=$(($(usec "$EPOCHREALTIME") - $(usec "$1"))) 'BEGIN { printf "%.1f", d / 1e6 }'; }

# children PID: the pids whose parent is PID (from /proc; no procps needed).
children() {
  local f line ppid pid
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null || continue
    line=${line##*) }  # after the command name, which may hold spaces
    read -r _ ppid _ <<<"$line"
    if [ "$ppid" = "$1" ]; then pid=${f#/proc/}; echo "${pid%/stat}"; fi
  done
}

# alive PID: the process exists and is not a zombie.
alive() {
  local st
  st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

if [ -z "$data" ]; then
  data=$work/data
  python3 - "$data" <<'PY' || { echo "FAIL cannot generate the IDX files (python3)"; echo "kill_rank: 0 passed, 1 failed"; exit 1; }
import os, random, struct, sys
out = sys.argv[1]
os.makedirs(out)
rng = random.Random(8)
for split, n in (("train", 6000), ("t10k", 1000)):
    with open(os.path.join(out, f"{split}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + rng.randbytes(n * 784))
    with open(os.path.join(out, f"{split}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(rng.randrange(10) for _ in range(n)))
PY
fi

passed=0 failed=0
failed_names=()
echo "== kill_rank: $train, data $data, cases (ranks:killed rank) ${cases[*]}, SIM_WORKERS=$SIM_WORKERS; slowdown now $start_factor =="

for c in "${cases[@]}"; do
  np=${c%%:*} victim=${c##*:}
  name="np=$np, SIGKILL rank $victim"
  log=$work/np$np.rank$victim.log
  problems=()
  rank_pids=()
  : >"$log"
  # Long enough to still be training a minute later; printing early.
  "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" --hidden 64 --batch 100 \
    --epochs 1000 --print-every 5 >"$log" 2>&1 </dev/null &
  mpid=$!
  t_start=$EPOCHREALTIME
  started=no
  while kill -0 "$mpid" 2>/dev/null; do
    if grep -Eq '^[[:space:]]*epoch[[:space:]]+[0-9]+[[:space:]]+batch' "$log"; then started=yes; break; fi
    if awk -v s="$(since "$t_start")" -v l="$start_limit" 'BEGIN { exit !(s > l) }'; then break; fi
    sleep 0.2
  done
  if [ "$started" != yes ]; then
    problems+=("training did not start within ${start_limit}s (or mpirun ended first)")
  else
    sleep 1  # well inside the batch loop: the other ranks are in (or near) MPI_Allreduce
    # The ranks are mpirun's children (Open MPI 4: no orted on the local node); each
    # knows its rank from OMPI_COMM_WORLD_RANK. Look one level deeper too, in case a
    # launcher daemon sits in between.
    victim_pid=""
    for p in $(children "$mpid"; for q in $(children "$mpid"); do children "$q"; done); do
      r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
      [ -n "$r" ] || continue
      rank_pids+=("$p")
      [ "$r" = "$victim" ] && victim_pid=$p
    done
    if [ "${#rank_pids[@]}" != "$np" ] || [ -z "$victim_pid" ]; then
      problems+=("found ${#rank_pids[@]} rank processes (pids ${rank_pids[*]}), expected $np including rank $victim")
    else
      t_kill=$EPOCHREALTIME
      kill -KILL "$victim_pid"
      at=$(grep -E '^[[:space:]]*epoch[[:space:]]' "$log" | tail -n 1 | sed 's/^ *//')
      # The calibration while the job ends (inside the window).
      factor=$(slowdown)
      exit_limit=$(scaled "$exit_s" "$factor")
      while kill -0 "$mpid" 2>/dev/null; do
        if awk -v s="$(since "$t_kill")" -v l="$exit_limit" 'BEGIN { exit !(s > l) }'; then break; fi
        sleep 0.1
      done
      if kill -0 "$mpid" 2>/dev/null; then
        problems+=("mpirun still running ${exit_limit}s after the kill (the job hangs)")
        stop_ours
        rc="(none: stopped by this script)"
        exit_secs="> $exit_limit"
      else
        exit_secs=$(since "$t_kill")
        wait "$mpid"
        rc=$?
        [ "$rc" != 0 ] || problems+=("mpirun exited with status 0 after a rank was killed")
      fi
      # No rank may outlive mpirun (2 s x the slowdown of grace for the reaping).
      left=()
      for _ in $(seq "$(scaled 20 "$factor")"); do
        left=()
        for p in "${rank_pids[@]}"; do alive "$p" && left+=("$p"); done
        [ "${#left[@]}" = 0 ] && break
        sleep 0.1
      done
      if [ "${#left[@]}" != 0 ]; then
        problems+=("nn_train processes left after mpirun exited: ${left[*]}")
      fi
    fi
  fi
  stop_ours
  mpid=""
  if [ "${#problems[@]}" = 0 ]; then
    passed=$((passed + 1))
    echo "ok   $name: mpirun exited with status $rc ${exit_secs} s after the kill (limit $exit_limit s: $exit_s x slowdown $factor); no rank left"
    echo "       killed after: $at"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    echo "FAIL $name${exit_secs:+ (mpirun exit status ${rc:-?}, ${exit_secs} s after the kill, limit ${exit_limit:-?} s)}"
    for p in "${problems[@]}"; do echo "       - $p"; done
  fi
  echo "       mpirun's output after the training lines:"
  grep -Ev '^[[:space:]]*epoch[[:space:]]|^(nn_train|data|config|MPI ranks):|^  rank [0-9]+ on |^ranks on ' "$log" |
    sed -n '1,30s/^/       | /p'
  unset exit_secs rc at factor exit_limit
done

echo "kill_rank: $passed passed, $failed failed ($((SECONDS)) s)"
if [ "$failed" -ne 0 ]; then
  printf '  failed: %s\n' "${failed_names[@]}"
  exit 1
fi
