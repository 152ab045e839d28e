#!/usr/bin/env bash
# Simulated cluster nodes on one Linux machine (root): each node is a network namespace with
# its own address on a private bridge, a UTS namespace with its own hostname and a mount
# namespace whose /etc/hosts names every node. Nothing else is separate: one kernel, one
# filesystem, one PID namespace (the nodes' processes are visible, and signalable, from the
# root namespace).
#
#   tests/multinode/nodes.sh up [N]        create N nodes (2 or 3; default 2)
#   tests/multinode/nodes.sh down          remove everything `up` created
#   tests/multinode/nodes.sh exec NODE CMD [ARGS...]   run CMD on NODE (node-a, node-b, ...)
#   tests/multinode/nodes.sh status        list the nodes, their addresses and holder pids
#
# or sourced (`. tests/multinode/nodes.sh`) for the functions nnsim_up, nnsim_down,
# nnsim_exec, nnsim_pid_of, nnsim_node_pids, nnsim_veth_bytes.
#
# What `up` creates (all names prefixed nnsim):
#   bridge nnsim-br0 in the root namespace, address $NNSIM_NET.1/24 (the "head node": mpirun,
#     slurmctld may run there);
#   per node X in a b c: network namespace nnsim-X (`ip netns add`), veth pair nnsim-vX (root
#     side, in the bridge) / eth0 (inside), address $NNSIM_NET.(2,3,4)/24, loopback up;
#     a holder process (`sleep infinity` under `unshare --uts --mount`) whose UTS namespace
#     has hostname node-X and whose mount namespace has $NNSIM_RUN/hosts bind-mounted on
#     /etc/hosts (node-a .. node-c and nnsim-head, the bridge address); its pid in
#     $NNSIM_RUN/node-X.pid.
#   $NNSIM_RUN (default /run/nnsim): the pid files, the hosts file, the agent's state.
# Processes enter a node with `nsenter -t HOLDER --net --uts --mount` (nnsim_exec).
#
# Environment: NNSIM_NET (10.213.77: the /24 prefix; `up` fails if any address or route on
# this machine is inside it), NNSIM_RUN (/run/nnsim).
NNSIM_NET=${NNSIM_NET:-10.213.77}
NNSIM_RUN=${NNSIM_RUN:-/run/nnsim}
NNSIM_BR=nnsim-br0
NNSIM_LETTERS=(a b c)

nnsim_err() { echo "nodes.sh: error: $*" >&2; }

# nnsim_pid_of NODE: the holder pid of node NODE (node-a ...), or fails.
nnsim_pid_of() {
  local pid
  pid=$(cat "$NNSIM_RUN/$1.pid" 2>/dev/null) || { nnsim_err "no node $1 (is \`nodes.sh up\` done? $NNSIM_RUN/$1.pid missing)"; return 1; }
  kill -0 "$pid" 2>/dev/null || { nnsim_err "node $1's holder (pid $pid) is gone"; return 1; }
  echo "$pid"
}

# nnsim_nodes: the node names that are up, one a line.
nnsim_nodes() {
  local f
  for f in "$NNSIM_RUN"/node-*.pid; do
    [ -f "$f" ] || continue
    f=${f##*/}
    echo "${f%.pid}"
  done
}

# nnsim_exec NODE CMD [ARGS...]: runs CMD in NODE's network, UTS and mount namespaces
# (same PID namespace, same user, same environment, same working directory).
nnsim_exec() {
  local node=$1 pid
  shift
  pid=$(nnsim_pid_of "$node") || return 1
  exec_dir=$PWD
  nsenter -t "$pid" --net --uts --mount --wd="$exec_dir" -- "$@"
}

# nnsim_node_pids NODE [EXE]: pids of processes (other than the holder) in NODE's network
# namespace, optionally only those whose executable is EXE (a path, compared resolved).
nnsim_node_pids() {
  local node=$1 exe=${2:-} hpid ns p f
  hpid=$(nnsim_pid_of "$node") || return 1
  ns=$(readlink "/proc/$hpid/ns/net")
  [ -n "$exe" ] && exe=$(readlink -f "$exe")
  for f in /proc/[0-9]*; do
    p=${f#/proc/}
    [ "$p" = "$hpid" ] && continue
    [ "$(readlink "$f/ns/net" 2>/dev/null)" = "$ns" ] || continue
    if [ -n "$exe" ] && [ "$(readlink "$f/exe" 2>/dev/null)" != "$exe" ]; then continue; fi
    echo "$p"
  done
}

# nnsim_veth_bytes: "NODE RX TX" per node: the byte counters of the node's veth, root side
# (RX there = what the node sent, TX = what it received).
nnsim_veth_bytes() {
  local node x
  for node in $(nnsim_nodes); do
    x=${node#node-}
    echo "$node $(cat "/sys/class/net/nnsim-v$x/statistics/rx_bytes") $(cat "/sys/class/net/nnsim-v$x/statistics/tx_bytes")"
  done
}

nnsim_down() {
  local f pid x
  for f in "$NNSIM_RUN"/node-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null)
    # Only the holder we started: a sleep whose UTS hostname is the node's.
    if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$(command -v sleep)")" ]; then
      kill "$pid" 2>/dev/null
    fi
    rm -f "$f"
  done
  for x in "${NNSIM_LETTERS[@]}"; do
    [ -e "/run/netns/nnsim-$x" ] && ip netns del "nnsim-$x" 2>/dev/null
    ip link show "nnsim-v$x" >/dev/null 2>&1 && ip link del "nnsim-v$x" 2>/dev/null
  done
  ip link show "$NNSIM_BR" >/dev/null 2>&1 && ip link del "$NNSIM_BR" 2>/dev/null
  rm -f "$NNSIM_RUN/hosts"
  rm -rf "$NNSIM_RUN"/slurm.* # tests/multinode/slurm.sh's runtime, if it could not remove it
  rmdir "$NNSIM_RUN"/sys-* "$NNSIM_RUN" 2>/dev/null
  return 0
}

nnsim_up() {
  local n=${1:-2} i x addr pid used
  case $n in 2 | 3) ;; *) nnsim_err "up: 2 or 3 nodes, not '$n'"; return 1 ;; esac
  [ "$(id -u)" = 0 ] || { nnsim_err "must run as root (network namespaces, veth, bridge)"; return 1; }
  for c in ip nsenter unshare; do
    command -v "$c" >/dev/null 2>&1 || { nnsim_err "$c not found (apt-get install iproute2 util-linux)"; return 1; }
  done
  case $NNSIM_NET in *[!0-9.]*) nnsim_err "NNSIM_NET must be like 10.213.77, not '$NNSIM_NET'"; return 1 ;; esac
  if ip link show "$NNSIM_BR" >/dev/null 2>&1 || [ -e "$NNSIM_RUN" ]; then
    nnsim_err "simulated nodes already up ($NNSIM_BR or $NNSIM_RUN exists: another run, or a crashed one: tests/multinode/nodes.sh down)"
    return 1
  fi
  # The subnet must be unused on this machine: no address or route inside $NNSIM_NET.0/24.
  used=$( { ip -4 -o addr show; ip -4 route show table all; } 2>/dev/null | grep -E "(^|[^0-9])${NNSIM_NET//./\\.}\.[0-9]+" || true)
  if [ -n "$used" ]; then
    nnsim_err "subnet $NNSIM_NET.0/24 is already in use on this machine (set NNSIM_NET=10.x.y to another /24): $(head -n 2 <<<"$used" | tr -s ' \n' ' ')"
    return 1
  fi
  mkdir -p "$NNSIM_RUN" && chmod 755 "$NNSIM_RUN"
  {
    echo "127.0.0.1 localhost"
    echo "$NNSIM_NET.1 nnsim-head"
    for ((i = 0; i < n; i++)); do echo "$NNSIM_NET.$((i + 2)) node-${NNSIM_LETTERS[i]}"; done
  } >"$NNSIM_RUN/hosts"
  ip link add "$NNSIM_BR" type bridge || { nnsim_err "cannot create bridge $NNSIM_BR"; nnsim_down; return 1; }
  if ! { ip addr add "$NNSIM_NET.1/24" dev "$NNSIM_BR" && ip link set "$NNSIM_BR" up; }; then
    nnsim_err "cannot configure bridge $NNSIM_BR"
    nnsim_down
    return 1
  fi
  for ((i = 0; i < n; i++)); do
    x=${NNSIM_LETTERS[i]}
    addr=$NNSIM_NET.$((i + 2))
    if ! {
      ip netns add "nnsim-$x" &&
        ip link add "nnsim-v$x" type veth peer name "nnsim-p$x" &&
        ip link set "nnsim-v$x" master "$NNSIM_BR" && ip link set "nnsim-v$x" up &&
        ip link set "nnsim-p$x" netns "nnsim-$x" &&
        ip -n "nnsim-$x" link set "nnsim-p$x" name eth0 &&
        ip -n "nnsim-$x" addr add "$addr/24" dev eth0 &&
        ip -n "nnsim-$x" link set eth0 up &&
        ip -n "nnsim-$x" link set lo up
    }; then
      nnsim_err "cannot set up the network of node-$x"
      nnsim_down
      return 1
    fi
    # The holder: hostname and /etc/hosts live as long as it does. setsid: no terminal
    # signals from the caller's session.
    # Not `ip netns exec`: it remounts all of /sys, and with it goes /sys/fs/cgroup, which
    # slurmd needs. The root's /sys stays; only its class/net shows the node's interfaces
    # (a sysfs mounted from inside the network namespace, visible in this mount namespace
    # only: propagation slave).
    mkdir -p "$NNSIM_RUN/sys-$x"
    # shellcheck disable=SC2016  # expanded by that sh
    setsid nsenter --net="/run/netns/nnsim-$x" unshare --uts --mount --propagation slave \
      sh -c 'mount --bind "$1" /etc/hosts && mount -t sysfs nnsim-sysfs "$3" &&
        mount --bind "$3/class/net" /sys/class/net && hostname "$2" && exec sleep infinity' sh \
      "$NNSIM_RUN/hosts" "node-$x" "$NNSIM_RUN/sys-$x" </dev/null >/dev/null 2>&1 &
    pid=$!
    # $! is setsid's pid, which execs nsenter, which execs unshare, which execs sh -> sleep:
    # the same pid throughout. Wait until it is the sleep with the right hostname.
    local ok=
    for _ in $(seq 50); do
      if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$(command -v sleep)")" ] &&
        [ "$(nsenter -t "$pid" --uts hostname 2>/dev/null)" = "node-$x" ]; then
        ok=1
        break
      fi
      sleep 0.1
    done
    echo "$pid" >"$NNSIM_RUN/node-$x.pid"
    if [ -z "$ok" ]; then
      nnsim_err "node-$x's holder did not come up (unshare --uts --mount; hostname)"
      nnsim_down
      return 1
    fi
  done
  return 0
}

nnsim_status() {
  local node pid
  for node in $(nnsim_nodes); do
    pid=$(cat "$NNSIM_RUN/$node.pid")
    echo "$node pid $pid hostname $(nsenter -t "$pid" --uts hostname 2>/dev/null) addr $(nsenter -t "$pid" --net ip -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')"
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cmd=${1:-}
  shift || true
  case $cmd in
    up) nnsim_up "$@" ;;
    down) nnsim_down ;;
    exec) nnsim_exec "$@" ;;
    status) nnsim_status ;;
    *) echo "usage: $0 up [2|3] | down | exec NODE CMD [ARGS...] | status" >&2; exit 2 ;;
  esac
fi
