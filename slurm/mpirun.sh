#!/usr/bin/env bash
# mpirun with a session directory of its own: every launch that our Makefile, tests, benches
# and slurm scripts make goes through this script (their MPIRUN default).
#
# Why: Open MPI 4.x keeps each launch's session files under one directory per user and host,
# /tmp/ompi.<host>.<uid>, created by whichever launch needs it first and removed by the last
# one to leave. Launches that start or end at the same moment race on that shared directory
# ("A call to mkdir was unable to create the desired directory ... File exists", then
# "orte_init failed"), so two users' jobs, or two of our test scripts, can fail for a reason
# that has nothing to do with them (open-mpi/ompi#8510). The documented way out is the MCA
# parameter orte_tmpdir_base: here a fresh directory per launch, removed when it ends.
#
#   slurm/mpirun.sh [mpirun options] PROGRAM [ARGS...]
#
# Environment: NN_MPIRUN, the real launcher (default: mpirun on PATH); TMPDIR, where the
# private directory is made (default /tmp; keep it short: Open MPI puts Unix sockets in it).
# A base the caller already chose (OMPI_MCA_orte_tmpdir_base set) is respected as it is.
# SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are passed on to mpirun, which forwards them to
# the ranks; the exit status is mpirun's.
#
# Cores for each rank's threads. By default Open MPI binds each rank to one core (2 ranks or
# fewer) or to a socket, whatever threads the rank runs: `OPENBLAS_NUM_THREADS=2 mpirun -np 1`
# puts both BLAS threads on one core. Here each rank is mapped to t cores of its own
# (--map-by slot:PE=t, which binds it to them), where t is
#   - inside a Slurm job: SLURM_CPUS_PER_TASK, the cores the job has per task;
#   - with hosts named (-H, --hostfile): OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or
#     SLURM_CPUS_PER_TASK, the threads the trainer will run (src/model/cpu_threads.h);
#   - on this host: those threads too, else this host's cores / ranks; only when ranks x t fit
#     in the cores this process may use (otherwise Open MPI's own binding stays, and nn_train
#     runs no more threads than its cores, with one warning line).
# Nothing is added for t = 1, for a launcher that is not Open MPI's, or when the caller chose
# the placement (--map-by, --bind-to, --cpus-per-proc, --rankfile, --npernode, --ppr, or their
# OMPI_MCA_rmaps_base_mapping_policy / OMPI_MCA_hwloc_base_binding_policy variables).
set -u
launcher=${NN_MPIRUN:-mpirun}
if ! command -v "$launcher" >/dev/null 2>&1; then
  echo "mpirun.sh: error: $launcher not found on PATH (install openmpi-bin, or module load openmpi)" >&2
  exit 127
fi

private=
if [ -z "${OMPI_MCA_orte_tmpdir_base:-}" ]; then
  private=$(mktemp -d "${TMPDIR:-/tmp}/nn-ompi.XXXXXX") || {
    echo "mpirun.sh: error: cannot create a session directory under ${TMPDIR:-/tmp}" >&2
    exit 1
  }
  export OMPI_MCA_orte_tmpdir_base=$private
fi

# Physical cores among the CPUs this process may run on (hyperthreads count once, as Open MPI's
# PE counts cores).
usable_cores() {
  local allowed n
  allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status 2>/dev/null)
  n=$(lscpu -p=CPU,SOCKET,CORE 2>/dev/null | awk -F, -v allowed="${allowed:-}" '
    BEGIN { k = split(allowed, r, ","); for (i = 1; i <= k; i++) { m = split(r[i], ab, "-"); lo = ab[1]; hi = (m > 1 ? ab[2] : ab[1]); for (c = lo; c <= hi; c++) ok[c] = 1 } }
    /^#/ { next }
    (allowed == "" || ($1 in ok)) { seen[$2 "," $3] = 1 }
    END { n = 0; for (s in seen) n++; print n }')
  [ "${n:-0}" -gt 0 ] 2>/dev/null && echo "$n" || nproc 2>/dev/null || echo 1
}
count() { case ${1:-} in '' | *[!0-9]* | 0*) echo 0 ;; *) echo "$1" ;; esac; }

# cores_per_rank ARGS...: the t above for an Open MPI launch with these options, or 0.
cores_per_rank() {
  [ -z "${OMPI_MCA_rmaps_base_mapping_policy:-}${OMPI_MCA_hwloc_base_binding_policy:-}" ] || { echo 0; return; }
  local np=0 hosts=0 t
  while [ $# -gt 0 ]; do
    case $1 in
      -np | -n | --np | -c) np=$(count "${2:-}"); shift 2; continue ;;
      --np=* | -np=* | -n=*) np=$(count "${1#*=}") ;;
      --map-by | -map-by | --map-by=* | --bind-to | -bind-to | --bind-to=* | --cpus-per-proc | -cpus-per-proc | \
        --cpus-per-rank | -cpus-per-rank | --rankfile | -rankfile | -rf | --cpu-set | -cpu-set | --cpu-list | \
        -cpu-list | --npernode | -npernode | -N | --npersocket | -npersocket | --pernode | -pernode | --ppr | -ppr | \
        --app | -app) echo 0; return ;;
      -H | -host | --host | -hostfile | --hostfile | -machinefile | --machinefile | --default-hostfile | \
        -default-hostfile) hosts=1; shift 2; continue ;;
      --host=* | --hostfile=* | --machinefile=*) hosts=1 ;;
      -x | --mca | -mca | --gmca | -gmca | -wdir | --wdir | -prefix | --prefix | --output-filename | \
        -output-filename | --timeout | -timeout | -path | --path | --preload-files | -s | --preload-binary | \
        -am | --am | --tune | -tune | --personality)
        case $1 in --mca | -mca | --gmca | -gmca) shift ;; esac
        shift 2; continue ;;
      -*) ;;
      *) break ;; # the program
    esac
    shift
  done
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    t=$(count "${SLURM_CPUS_PER_TASK:-}")
  elif [ "$hosts" = 1 ]; then
    t=$(count "${OPENBLAS_NUM_THREADS:-}"); [ "$t" -gt 0 ] || t=$(count "${OMP_NUM_THREADS:-}")
    [ "$t" -gt 0 ] || t=$(count "${SLURM_CPUS_PER_TASK:-}")
  else
    [ "$np" -gt 0 ] || { echo 0; return; }
    local cores
    cores=$(usable_cores)
    t=$(count "${OPENBLAS_NUM_THREADS:-}"); [ "$t" -gt 0 ] || t=$(count "${OMP_NUM_THREADS:-}")
    [ "$t" -gt 0 ] || t=$(count "${SLURM_CPUS_PER_TASK:-}")
    [ "$t" -gt 0 ] || t=$((cores / np))
    [ $((np * t)) -le "$cores" ] || t=0
  fi
  [ "$t" -gt 1 ] && echo "$t" || echo 0
}

place=()
if "$launcher" --version 2>&1 | grep -q 'Open MPI'; then
  per_rank=$(cores_per_rank "$@")
  [ "$per_rank" = 0 ] || place=(--map-by "slot:PE=$per_rank")
fi

"$launcher" "${place[@]}" "$@" &
child=$!
interrupted=0
for sig in INT TERM HUP USR1 USR2; do
  # shellcheck disable=SC2064  # the signal name is meant to be expanded now
  trap "interrupted=1; kill -s $sig $child 2>/dev/null" "$sig"
done
# A trapped signal makes wait return early (status > 128): wait again for mpirun's own status.
while :; do
  interrupted=0
  wait "$child"
  status=$?
  [ "$interrupted" = 1 ] || break
done
[ -n "$private" ] && rm -rf "$private"
exit "$status"
