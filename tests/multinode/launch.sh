#!/usr/bin/env bash
# mpirun over the simulated nodes: `tests/multinode/launch.sh [mpirun options] PROGRAM [ARGS...]`
# takes what mpirun takes (so MPIRUN=tests/multinode/launch.sh points any of our test
# scripts at it) and runs slurm/mpirun.sh inside node-a's namespaces with
#   --hostfile  node-a slots=$NNSIM_SLOTS, node-b slots=$NNSIM_SLOTS (, node-c ...)
#   --mca plm_rsh_agent tests/multinode/agent.sh   (remote orteds via nsenter, no sshd)
#   --mca plm_rsh_no_tree_spawn 1
#   --mca oob_tcp_if_include / btl_tcp_if_include $NNSIM_NET.0/24  (the nodes' network only)
#   --mca mpi_yield_when_idle 1    (unless OMPI_MCA_mpi_yield_when_idle is set: the nodes
#                                   share this machine's cores)
# Ranks fill node-a's slots first (mpirun's default --map-by slot): -np 4 with 2 slots per
# node puts ranks 0,1 on node-a and 2,3 on node-b; pass --map-by node to alternate.
#
# When the nodes are already up (tests/multinode/nodes.sh up, or inside run.sh) it uses
# them and execs (its pid is mpirun.sh's: signals reach mpirun directly). Otherwise it
# brings NNSIM_NODES (2) nodes up, runs mpirun with signals passed on, and tears them down
# when mpirun ends (then no second launch.sh may run meanwhile).
#
# Environment: NNSIM_SLOTS (2), NNSIM_NODES (2 or 3, default 2), NNSIM_NET (10.213.77),
# NNSIM_RUN (/run/nnsim), NNSIM_HEAD (node-a: where mpirun runs; `root` = the root
# namespace, address $NNSIM_NET.1), NNSIM_BTL (unset: Open MPI's choice, i.e. vader within
# a node and tcp between nodes; e.g. "self,tcp" forces TCP everywhere), NN_MPIRUN (the real
# mpirun behind slurm/mpirun.sh). As root, OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1 are set.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/multinode/nodes.sh
. "$here/nodes.sh"
slots=${NNSIM_SLOTS:-2}
head=${NNSIM_HEAD:-node-a}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export NNSIM_RUN NNSIM_NET

owned=0
if [ ! -f "$NNSIM_RUN/node-a.pid" ]; then
  nnsim_up "${NNSIM_NODES:-2}" || exit 1
  owned=1
fi
hostfile=$(mktemp "${TMPDIR:-/tmp}/nnsim-hostfile.XXXXXX")
for node in $(nnsim_nodes); do echo "$node slots=$slots"; done >"$hostfile"
args=(--hostfile "$hostfile" --mca plm_rsh_agent "$here/agent.sh" --mca plm_rsh_no_tree_spawn 1
  --mca oob_tcp_if_include "$NNSIM_NET.0/24" --mca btl_tcp_if_include "$NNSIM_NET.0/24")
[ -n "${NNSIM_BTL:-}" ] && args+=(--mca btl "$NNSIM_BTL")
# The hostfile's slots tell Open MPI each node has 2 cores of its own, so it busy-polls; the
# nodes share this machine's cores, and a rank spinning in a collective starves the one it
# waits for (measured: 5x slower epochs on 2 cores). Yield, as Open MPI does by itself when
# it knows a node is oversubscribed.
[ -z "${OMPI_MCA_mpi_yield_when_idle:-}" ] && args+=(--mca mpi_yield_when_idle 1)
if [ "$head" = root ]; then
  cmd=("$root/slurm/mpirun.sh" "${args[@]}" "$@")
else
  pid=$(nnsim_pid_of "$head") || exit 1
  cmd=(nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- "$root/slurm/mpirun.sh" "${args[@]}" "$@")
fi
if [ "$owned" = 0 ]; then
  # The hostfile is read when mpirun starts; remove it a little later, from a child that
  # outlives the exec.
  (sleep 30; rm -f "$hostfile") </dev/null >/dev/null 2>&1 &
  exec "${cmd[@]}"
fi
"${cmd[@]}" &
child=$!
for sig in INT TERM HUP USR1 USR2; do
  # shellcheck disable=SC2064
  trap "interrupted=1; kill -s $sig $child 2>/dev/null" "$sig"
done
while :; do
  interrupted=0
  wait "$child"
  status=$?
  [ "$interrupted" = 1 ] || break
done
rm -f "$hostfile"
nnsim_down
exit "$status"
