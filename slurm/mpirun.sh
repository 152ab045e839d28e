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
# puts both BLAS threads on one core. Here each rank is mapped to t CPUs of its own
# (--map-by slot:PE=t, which binds it to them), where t is
#   - inside a Slurm job: SLURM_CPUS_PER_TASK, the CPUs the job has per task (Slurm's CPUs
#     are hardware threads on a node with several per core: then --use-hwthread-cpus too);
#   - on this host, without -H/--hostfile: OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or
#     SLURM_CPUS_PER_TASK (the threads the trainer will run, src/model/cpu_threads.h), else
#     this host's physical cores / ranks; only when ranks x t fit in the physical cores this
#     process may use.
# Otherwise nothing is added (Open MPI's own binding stays, and nn_train runs no more threads
# than its cores, with one warning line): for t = 1, with hosts named (their cores are not
# known here: give --map-by slot:PE=t yourself), for a launcher that is not Open MPI's, or
# when the caller chose the placement (--map-by, --bind-to, --cpus-per-proc, --rankfile,
# --npernode, --ppr, --use-hwthread-cpus, the old -by* / -bind-to-* forms, or the
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

# Hardware threads per core on this host (1 when unknown).
threads_per_core() {
  lscpu -p=CPU,SOCKET,CORE 2>/dev/null | awk -F, '/^#/ { next } { n++; seen[$2 "," $3] = 1 }
    END { k = 0; for (s in seen) k++; print (k > 0 && n >= k ? int(n / k) : 1) }'
}

# placement ARGS...: the options above for an Open MPI launch with these options, or nothing.
placement() {
  [ -z "${OMPI_MCA_rmaps_base_mapping_policy:-}${OMPI_MCA_hwloc_base_binding_policy:-}" ] || return 0
  local np=0 hosts=0 t cores
  while [ $# -gt 0 ]; do
    case $1 in
      -np | -n | --np | --n | -c) np=$(count "${2:-}"); shift 2; continue ;;
      --np=* | -np=* | -n=* | --n=*) np=$(count "${1#*=}") ;;
      --map-by | -map-by | --map-by=* | --bind-to | -bind-to | --bind-to=* | --cpus-per-proc | -cpus-per-proc | \
        --cpus-per-rank | -cpus-per-rank | --rankfile | -rankfile | -rf | --cpu-set | -cpu-set | --cpu-list | \
        -cpu-list | --npernode | -npernode | -N | --npersocket | -npersocket | --pernode | -pernode | --ppr | -ppr | \
        --use-hwthread-cpus | -use-hwthread-cpus | -bynode | -byslot | -bycore | -bysocket | -bind-to-core | \
        -bind-to-socket | -bind-to-none | --app | -app) return 0 ;;
      -H | -host | --host | -hostfile | --hostfile | -machinefile | --machinefile | --default-hostfile | \
        -default-hostfile) hosts=1; shift 2; continue ;;
      --host=* | --hostfile=* | --machinefile=*) hosts=1 ;;
      # Options that take a value (two for the MCA ones): skipped with it.
      -x | --mca | -mca | --gmca | -gmca | -wdir | --wdir | -wd | --wd | -prefix | --prefix | --output-filename | \
        -output-filename | --timeout | -timeout | -path | --path | --preload-files | -am | --am | --tune | -tune | \
        --personality | --rank-by | -rank-by | --stdin | -stdin | --report-uri | -report-uri | --report-pid | \
        -report-pid | -launch-agent | --launch-agent | -ompi-server | --ompi-server | -xterm | --xterm | -cf | \
        --cartofile | -hnp | --hnp)
        case $1 in --mca | -mca | --gmca | -gmca) shift ;; esac
        shift 2; continue ;;
      -*) ;;
      *) break ;; # the program
    esac
    shift
  done
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    t=$(count "${SLURM_CPUS_PER_TASK:-}")
    [ "$t" -gt 1 ] || return 0
    if [ "$(threads_per_core)" -gt 1 ]; then echo "--map-by slot:PE=$t --use-hwthread-cpus"; else echo "--map-by slot:PE=$t"; fi
    return 0
  fi
  [ "$hosts" = 0 ] && [ "$np" -gt 0 ] || return 0
  cores=$(usable_cores)
  t=$(count "${OPENBLAS_NUM_THREADS:-}"); [ "$t" -gt 0 ] || t=$(count "${OMP_NUM_THREADS:-}")
  [ "$t" -gt 0 ] || t=$(count "${SLURM_CPUS_PER_TASK:-}")
  [ "$t" -gt 0 ] || t=$((cores / np))
  if [ "$t" -gt 1 ] && [ $((np * t)) -le "$cores" ]; then echo "--map-by slot:PE=$t"; fi
  return 0
}

place=()
if "$launcher" --version 2>&1 | grep -q 'Open MPI'; then
  read -r -a place <<<"$(placement "$@")"
fi

# ${place[@]+...}: an empty array is "unbound" to bash < 4.4 under set -u.
"$launcher" ${place[@]+"${place[@]}"} "$@" &
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
