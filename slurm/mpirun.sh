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

"$launcher" "$@" &
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
