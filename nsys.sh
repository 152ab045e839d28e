#!/usr/bin/env bash
# Profiles the trainer with Nsight Systems (2022.x up to today's), one report per MPI rank, and
# exports its summaries as CSV. Submit with sbatch or run directly:
#   sbatch nsys.sh [trainer arguments...]
#   NP=2 NN_BIN=build/cpu/bin/nn_train bash nsys.sh --epochs 1 --device cpu
# Environment (defaults):
#   NP            ranks (SLURM_NTASKS, else 2)
#   NN_BIN        the trainer (build/cuda/bin/nn_train)      NN_DATA  IDX directory (data/current)
#   OUT           report directory (profiles)
#   MPIRUN        the launcher (slurm/mpirun.sh, else mpirun); MPIRUN_FLAGS: its extra options
#   NSYS          the nsys command (nsys on PATH)
#   NSYS_TRACE    what to trace (cuda,nvtx,mpi,osrt)
#   NSYS_SAMPLE   off | on | auto: CPU IP sampling and context-switch tracing (nsys's own defaults
#                 turn them on). off (the default): --sample=none --cpuctxsw=none, because they
#                 can hang a profile for good ("Generating ...qdstrm" never ends) on machines
#                 whose perf events are not fully usable (VMs, containers), even where
#                 `nsys status -e` says OK. on: nsys's defaults (a CPU hotspot view; set
#                 NSYS_TIMEOUT too). auto: on if two `sleep 1` profiled side by side finish within
#                 NSYS_PROBE_S=20 s, else off; a hint only (seen to pass where the real run hung).
#   NSYS_TIMEOUT  seconds the profiled run may take (0: no limit)
#   NSYS_ARGS     more `nsys profile` options (split on spaces)
#   NSYS_RANK_VAR the variable that holds a rank's number (OMPI_COMM_WORLD_RANK; PMI_RANK under
#                 MPICH, SLURM_PROCID under srun)
# Output in OUT: nn_rank<r>.nsys-rep per rank (open it in the nsys-ui GUI), its SQLite export,
# and nn_rank<r>_<report>.csv per summary: NVTX ranges, CUDA kernels, GPU memory operations,
# CUDA API calls, OS runtime calls, under the report names this nsys offers (nvtx_sum or, before
# 2023, nvtxsum, ...). A summary without data (no kernels under the emulator) has no CSV.
# docs/profiling.md says more. Any failure: one `nsys.sh: error: ...` line, exit 1.
#SBATCH --job-name=nn-nsys
#SBATCH --ntasks=2
#SBATCH --gpus-per-task=1
#SBATCH --time=00:20:00
#SBATCH --output=nn-nsys-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
die() { echo "nsys.sh: error: $*" >&2; exit 1; }
note() { echo "nsys.sh: $*"; }

NSYS=${NSYS:-nsys}
command -v "$NSYS" >/dev/null 2>&1 ||
  die "$NSYS (Nsight Systems) not found on PATH; load it (e.g. 'module load cuda' or 'module load nsight-systems'), or set NSYS"
NP=${NP:-${SLURM_NTASKS:-2}}
NN_BIN=${NN_BIN:-build/cuda/bin/nn_train}
NN_DATA=${NN_DATA:-data/current}
OUT=${OUT:-profiles}
NSYS_TRACE=${NSYS_TRACE:-cuda,nvtx,mpi,osrt}
NSYS_SAMPLE=${NSYS_SAMPLE:-off}
NSYS_TIMEOUT=${NSYS_TIMEOUT:-0}
NSYS_PROBE_S=${NSYS_PROBE_S:-20}
RANK_VAR=${NSYS_RANK_VAR:-OMPI_COMM_WORLD_RANK}
read -r -a nsys_args <<<"${NSYS_ARGS:-}"
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS:-}"
case $NP in '' | *[!0-9]* | 0) die "NP must be a positive integer, not '$NP'" ;; esac
case $NSYS_SAMPLE in auto | on | off) ;; *) die "NSYS_SAMPLE must be auto, on or off, not '$NSYS_SAMPLE'" ;; esac
case $NSYS_TIMEOUT in '' | *[!0-9]*) die "NSYS_TIMEOUT must be a number of seconds, not '$NSYS_TIMEOUT'" ;; esac
[ -x "$NN_BIN" ] || die "$NN_BIN not found or not executable: build it (make cuda / make cpu) or set NN_BIN"
mkdir -p "$OUT" || die "cannot create $OUT"
# slurm/mpirun.sh: mpirun with a session directory of its own (concurrent jobs never collide).
MPIRUN=${MPIRUN:-slurm/mpirun.sh}
[ -x "$MPIRUN" ] || command -v "$MPIRUN" >/dev/null 2>&1 || MPIRUN=mpirun

version=$("$NSYS" --version 2>/dev/null | grep -oE '[0-9]{4}\.[0-9][0-9.]*' | head -n 1 || true)
note "Nsight Systems ${version:-(version unknown)}: $(command -v "$NSYS")"

# ---- which summaries: by the names this nsys offers (renamed in 2023: nvtxsum -> nvtx_sum) ----
offered=$("$NSYS" stats --help-reports 2>/dev/null || true)
pick() {  # pick NEW OLD: the name this nsys offers; by the version when it lists none
  local n
  for n in "$@"; do
    grep -qE "^[[:space:]]*$n(\[|:|[[:space:]]|\$)" <<<"$offered" && { echo "$n"; return 0; }
  done
  if ! grep -qE '^[[:space:]]*[a-z]' <<<"$offered"; then
    if [ -n "$version" ] && [ "${version%%.*}" -lt 2023 ]; then echo "$2"; else echo "$1"; fi
  fi
}
reports=()
for pair in "nvtx_sum nvtxsum" "cuda_gpu_kern_sum gpukernsum" "cuda_gpu_mem_time_sum gpumemtimesum" \
  "cuda_api_sum cudaapisum" "osrt_sum osrtsum"; do
  # shellcheck disable=SC2086  # two words
  r=$(pick $pair)
  [ -n "$r" ] && reports+=("$r")
done
[[ " ${reports[*]} " == *" nvtx"* ]] ||
  die "this nsys offers no NVTX summary (neither nvtx_sum nor nvtxsum in 'nsys stats --help-reports')"

# ---- CPU sampling and context switches: only where a profile with them finishes ----
# nsys's agents (daemons, one per `nsys profile`) can outlive their nsys: after a rank fails and
# the launcher kills the ranks, or a hang. agents: "AGENT_PID NSYS_PID" per agent running now.
agents() {
  local p cmd s
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $cmd == *--start-agent*--session-name=profile-* ]] || continue
    s=${cmd#*--session-name=profile-}; s=${s%% *}
    echo "${p#/proc/} ${s##*-}"
  done
}
agents_before=" $(agents | cut -d' ' -f1 | tr '\n' ' ') "
since=$(mktemp "${TMPDIR:-/tmp}/nsys-sh-start.XXXXXX")  # for the temporary .qdstrm of a stopped run
trap 'rm -f "$since"' EXIT
# reap_agents: the agents started since this script began whose nsys is gone, and their shared memory.
reap_agents() {
  local a n victims=()
  while read -r a n; do
    [[ $agents_before == *" $a "* ]] || [ -d "/proc/$n" ] || victims+=("$a")
  done < <(agents)
  [ ${#victims[@]} -gt 0 ] || return 0
  # `|| true`: kill fails once the processes are gone (most end at the TERM), and under set -e
  # that would end this script, with status 1 and no error line.
  kill "${victims[@]}" 2>/dev/null || true
  sleep 2
  kill -9 "${victims[@]}" 2>/dev/null || true  # those that ignored the TERM
  for a in "${victims[@]}"; do rm -f "/dev/shm/quadd-agent-instance-$a"; done
  return 0
}
# kill_nsys PID...: these processes and everything they started (the launcher, the ranks' nsys,
# the trainer), then the agents left behind.
kill_nsys() {
  local p stat ppid tree=" $* "
  for _ in 1 2 3 4 5; do  # descendants, level by level
    for p in /proc/[0-9]*; do
      read -r stat 2>/dev/null <"$p/stat" || continue
      stat=${stat##*) }; ppid=${stat#* }; ppid=${ppid%% *}
      [[ $tree == *" $ppid "* && $tree != *" ${p#/proc/} "* ]] && tree+="${p#/proc/} "
    done
  done
  read -r -a victims <<<"$tree"
  kill "${victims[@]}" 2>/dev/null || true
  sleep 2
  kill -9 "${victims[@]}" 2>/dev/null || true
  for p in "${victims[@]}"; do rm -f "/dev/shm/sem.nsys_sem_$p"; done  # nsys's semaphore per profiled process
  reap_agents
  local f  # the stopped profiles' temporary files (60 MB each), where no process holds them
  while IFS= read -r f; do
    [ -n "$(find /proc/[0-9]*/fd -lname "$f" 2>/dev/null | head -n 1)" ] || rm -f "$f"
  done < <(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'nsys-report-*.qdstrm' -newer "$since" 2>/dev/null)
}
probe_sampling() {  # exit 0 when min(NP, 2) profiles with the default sampling finish
  local dir i n=$((NP < 2 ? NP : 2)) pids=() alive ok=0
  dir=$(mktemp -d "${TMPDIR:-/tmp}/nsys-probe.XXXXXX")
  for ((i = 0; i < n; i++)); do
    "$NSYS" profile --trace=osrt --force-overwrite=true --output="$dir/probe$i" sleep 1 >"$dir/probe$i.log" 2>&1 &
    pids+=($!)
  done
  local end=$((SECONDS + NSYS_PROBE_S))
  while :; do
    alive=()
    for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && alive+=("$i"); done
    if [ ${#alive[@]} = 0 ] || [ $SECONDS -ge $end ]; then break; fi
    sleep 1
  done
  if [ ${#alive[@]} -gt 0 ]; then
    kill_nsys "${alive[@]}"
    ok=1
  fi
  wait "${pids[@]}" 2>/dev/null || true
  for ((i = 0; i < n; i++)); do
    [ -e "$dir/probe$i.nsys-rep" ] || [ -e "$dir/probe$i.qdstrm" ] || ok=1
  done
  rm -rf "$dir"
  return "$ok"
}
sample_opts=()
case $NSYS_SAMPLE in
  off) sample_opts=(--sample=none --cpuctxsw=none)
    note "CPU sampling and context-switch tracing off: they can hang nsys where perf events are not fully usable (NSYS_SAMPLE=on or auto to try them)" ;;
  on) note "CPU sampling and context-switch tracing as nsys defaults them (NSYS_SAMPLE=on; NSYS_TIMEOUT=${NSYS_TIMEOUT})" ;;
  auto)
    if probe_sampling; then
      note "CPU sampling and context-switch tracing: on (NSYS_SAMPLE=auto: a probe profile with them finished)"
    else
      sample_opts=(--sample=none --cpuctxsw=none)
      note "note: a probe profile with CPU sampling and context-switch tracing did not finish within ${NSYS_PROBE_S} s here: profiling with --sample=none --cpuctxsw=none"
    fi ;;
esac

# ---- the profiled run: one report per rank (%q{VAR}: the rank's number) ----
rm -f "$OUT"/nn_rank*.nsys-rep "$OUT"/nn_rank*.qdstrm "$OUT"/nn_rank*.sqlite "$OUT"/nn_rank*_*.csv "$OUT"/nn_rank*.stats.log
cmd=("$MPIRUN" "${mpirun_flags[@]}" -np "$NP" "$NSYS" profile --trace="$NSYS_TRACE" "${sample_opts[@]}"
  --force-overwrite=true --output="$OUT/nn_rank%q{$RANK_VAR}" "${nsys_args[@]}" "$NN_BIN" --data "$NN_DATA" "$@")
set +e
if [ "$NSYS_TIMEOUT" = 0 ]; then
  "${cmd[@]}"
  rc=$?
else
  # A watchdog of our own: at the deadline the launcher, the ranks' nsys and the agents these
  # leave behind are found from the launcher's process tree (timeout(1) would orphan them).
  "${cmd[@]}" &
  run=$!
  trap 'kill_nsys "$run"; exit 130' INT TERM
  end=$((SECONDS + NSYS_TIMEOUT))
  while kill -0 "$run" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 1; done
  if kill -0 "$run" 2>/dev/null; then
    kill_nsys "$run"
    wait "$run" 2>/dev/null
    die "the profiled run took more than NSYS_TIMEOUT=$NSYS_TIMEOUT s and was stopped (with its nsys processes)"
  fi
  wait "$run"
  rc=$?
  trap - INT TERM
fi
set -e
reap_agents
[ "$rc" = 0 ] || die "the profiled run failed (exit $rc): $MPIRUN -np $NP $NSYS profile ... $NN_BIN"

# ---- a .qdstrm that nsys could not import itself (Debian's package: no importer next to it) ----
# QdstrmImporter sits in host-linux-x64 beside nsys's bin/ (or target-linux-x64/): look along
# the chain of links from the nsys on PATH (Debian: /usr/bin/nsys -> /usr/lib/nsight-systems/bin/nsys).
importer=${NSYS_IMPORTER:-}
if [ -z "$importer" ]; then
  p=$(command -v "$NSYS")
  for _ in 1 2 3 4 5 6 7 8; do
    if [ -x "$(dirname "$p")/../host-linux-x64/QdstrmImporter" ]; then importer=$(dirname "$p")/../host-linux-x64/QdstrmImporter; break; fi
    [ -L "$p" ] || break
    t=$(readlink "$p")
    case $t in /*) p=$t ;; *) p=$(dirname "$p")/$t ;; esac
  done
  [ -n "$importer" ] || importer=$(command -v QdstrmImporter 2>/dev/null || true)
fi
for ((r = 0; r < NP; r++)); do
  base=$OUT/nn_rank$r
  if [ ! -e "$base.nsys-rep" ] && [ -e "$base.qdstrm" ]; then
    [ -n "$importer" ] || die "rank $r left $base.qdstrm and no QdstrmImporter was found (set NSYS_IMPORTER to its path)"
    "$importer" --input-file "$base.qdstrm" >"$base.import.log" 2>&1 ||
      die "QdstrmImporter failed on $base.qdstrm (see $base.import.log)"
    [ -e "$base.nsys-rep" ] || die "QdstrmImporter made no $base.nsys-rep (see $base.import.log)"
    rm -f "$base.qdstrm" "$base.import.log"
  fi
  [ -e "$base.nsys-rep" ] || die "no report from rank $r ($base.nsys-rep missing; is $RANK_VAR the launcher's rank variable? NSYS_RANK_VAR)"
done

# ---- the summaries as CSV ----
csvs=()
for ((r = 0; r < NP; r++)); do
  base=$OUT/nn_rank$r
  (IFS=,; "$NSYS" stats --report "${reports[*]}" --format csv --force-export=true --output "$base" "$base.nsys-rep") \
    >"$base.stats.log" 2>&1 || die "nsys stats failed on $base.nsys-rep (see $base.stats.log)"
  for f in "$base"_*.csv; do
    [ -e "$f" ] || continue
    if [ -s "$f" ]; then csvs+=("$(basename "$f")"); else rm -f "$f"; fi  # empty: no data of that kind
  done
  rm -f "$base.stats.log"
  ls "$base"_nvtx*.csv >/dev/null 2>&1 ||
    die "no NVTX summary from rank $r (no NVTX ranges recorded: a build without NVTX headers, or NSYS_TRACE without nvtx?)"
done
kinds=()
for f in "${csvs[@]}"; do
  k=${f#nn_rank*_}; k=${k%.csv}
  [[ " ${kinds[*]} " == *" $k "* ]] || kinds+=("$k")
done
ranks=$([ "$NP" = 1 ] && echo 0 || echo "{0..$((NP - 1))}")
note "reports and CSV summaries in $OUT/: nn_rank$ranks.nsys-rep, nn_rank${ranks}_{$(IFS=,; echo "${kinds[*]}")}.csv"
