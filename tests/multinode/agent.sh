#!/usr/bin/env bash
# Open MPI's remote-shell agent for the simulated nodes (--mca plm_rsh_agent): called as
# ssh would be, `agent.sh [ssh-style options] HOST COMMAND...`, it runs COMMAND (one shell
# command line, as ssh does) with /bin/sh inside HOST's namespaces (tests/multinode/nodes.sh).
# No sshd: mpirun starts each remote orted through this script.
set -u
while [ $# -gt 0 ]; do
  case $1 in
    -o | -p | -l | -i) shift 2 ;; # ssh options with a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "agent.sh: usage: agent.sh HOST COMMAND..." >&2; exit 255; }
host=$1
shift
run=${NNSIM_RUN:-/run/nnsim}
pid=$(cat "$run/$host.pid" 2>/dev/null) || { echo "agent.sh: no simulated node '$host' ($run/$host.pid missing)" >&2; exit 255; }
exec nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- /bin/sh -c "$*"
