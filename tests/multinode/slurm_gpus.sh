# shellcheck shell=bash disable=SC2154  # job_of, OUT: slurm.sh's
# The simulated nodes' GPUs for tests/multinode/slurm.sh (sourced by it): two per node, declared
# in gres.conf with AutoDetect=off, each a character device file made here (Slurm 22.05 rejects a
# plain file: "... is not a valid character or block device, fix your gres.conf", and then binds
# no GPU to any step). The numbers are the NVIDIA driver's (major 195); nothing opens them. Slurm
# sets CUDA_VISIBLE_DEVICES for each step (no cgroup device constraint: TaskPlugin=task/none),
# and the emulator build presents one device per index listed there, on its own PCI bus, so
# each rank's header line shows which GPU it was given.
#
#   gpus_conf DIR NODES...        gres.conf and the device files in DIR; prints slurm.conf lines
#   gpus_node_gres                the NodeName lines' Gres= field
#   gpus_check_placement NAME own|shared   the job's "ranks on node-X:" lines: own = two bus ids
#                                 on each node and no shared-GPU warning; shared = the warning
#   gpus_check_requests           sbatch's answers: 3 ranks with --gpus-per-task=1 on one
#                                 2-GPU node refused, on two nodes placed 2 + 1
#   gpus_record_steps             (each poll) every running step's TRES, into $OUT/logs/steps.log
#   gpus_check_step_unbound NAME GPUJOB   NAME's step bound no GPU where GPUJOB's step had one
# Uses pass, fail, out_of, job_of from slurm.sh.

GPUS_PER_NODE=2

gpus_conf() {
  local dir=$1 n i files
  shift
  mkdir -p "$dir"
  {
    echo "AutoDetect=off"
    for n in "$@"; do
      mkdir -p "$dir/dev-$n"
      for ((i = 0; i < GPUS_PER_NODE; i++)); do
        [ -c "$dir/dev-$n/nvidia$i" ] || mknod "$dir/dev-$n/nvidia$i" c 195 "$i" || return 1
      done
      files="$dir/dev-$n/nvidia[0-$((GPUS_PER_NODE - 1))]"
      echo "NodeName=$n Name=gpu File=$files"
    done
  } >"$dir/gres.conf"
  echo "GresTypes=gpu"
}
gpus_node_gres() { echo "Gres=gpu:$GPUS_PER_NODE"; }

# The ranks-on lines of a job's header: "ranks on node-a: 0->gpu0[0000:01:00.0] 1->gpu1[...] (...)".
gpus_check_placement() {
  local name=$1 want=$2 f node ids n_ids problems=() lines
  f=$(out_of "$name")
  lines=$(grep -E '^ *ranks on node-' "$f" 2>/dev/null | cut -d'(' -f1 | paste -sd'|' | sed 's/|/ | /g')
  for node in node-a node-b; do
    ids=$(grep -E "^ *ranks on $node: " "$f" 2>/dev/null | grep -oE '\[[0-9a-f:.]+' | sort -u)
    n_ids=$(grep -c . <<<"$ids")
    case $want in
      own) [ "$n_ids" = 2 ] || problems+=("$node: $n_ids distinct bus ids, expected 2") ;;
      shared) [ "$n_ids" = 1 ] || problems+=("$node: $n_ids distinct bus ids, expected 1") ;;
    esac
  done
  local warnings
  warnings=$(grep -c 'share one GPU' "$f" 2>/dev/null)
  case $want in
    own) [ "${warnings:-0}" = 0 ] || problems+=("$warnings shared-GPU warning(s)") ;;
    shared) [ "${warnings:-0}" = 2 ] || problems+=("${warnings:-0} shared-GPU warnings, expected one per node") ;;
  esac
  if [ ${#problems[@]} = 0 ] && [ "$want" = own ]; then
    pass "$name: each rank on its own GPU: $lines"
  elif [ ${#problems[@]} = 0 ]; then
    pass "$name: the ranks of a node on one GPU are warned about: $(grep -m1 'share one GPU' "$f" | cut -c1-90)..."
  else
    fail "$name: GPU placement ($want): $(IFS=';'; echo "${problems[*]}"): $lines"
  fi
}

# 3 ranks, one GPU each: one node cannot hold them (2 GPUs; --overcommit, so the node's 2
# CPUs are not what stops it, and the same job without GPUs is accepted); two nodes can.
gpus_check_requests() {
  local msg ctl placed
  msg=$(sbatch -N 1 --ntasks=3 --overcommit --gpus-per-task=1 --time=1 --output=/dev/null --wrap true 2>&1)
  ctl=$(sbatch --test-only -N 1 --ntasks=3 --overcommit --gpus-per-task=0 --time=1 --wrap true 2>&1)
  if [[ $msg == *"Requested node configuration is not available"* ]] && [[ $ctl == *"to start at"* ]]; then
    pass "gpu-requests: 3 ranks x --gpus-per-task=1 on one 2-GPU node refused at submission ($(tr '\n' ' ' <<<"$msg" | sed 's/ *$//')); without GPUs the same job is accepted"
  else
    fail "gpu-requests: 3 ranks x --gpus-per-task=1 on one node: '$msg' (expected a refusal); without GPUs: '$ctl'"
  fi
  placed=$(sbatch --test-only --ntasks=3 --gpus-per-task=1 --time=1 --wrap true 2>&1)
  if [[ $placed == *"3 processors on nodes node-a,node-b"* ]]; then
    pass "gpu-requests: 3 ranks x --gpus-per-task=1 without -N: placed on both nodes (${placed#*using })"
  else
    fail "gpu-requests: 3 ranks x --gpus-per-task=1 without -N: '$placed', expected 3 processors on node-a,node-b"
  fi
}

gpus_record_steps() {
  scontrol -o show step 2>/dev/null | grep -o 'StepId=[0-9]*\.[0-9]* .*' >>"$OUT/logs/steps.log"
}

# A step that srun bound to GPUs shows TresPerTask=gres:gpu:N (N > 0) in scontrol.
gpus_check_step_unbound() {
  local name=$1 ref=$2 mine theirs
  mine=$(grep -E "^StepId=${job_of[$name]}\.0 " "$OUT/logs/steps.log" 2>/dev/null | tail -n 1)
  theirs=$(grep -E "^StepId=${job_of[$ref]}\.0 " "$OUT/logs/steps.log" 2>/dev/null | tail -n 1)
  if [ -z "$mine" ] || [ -z "$theirs" ]; then
    fail "$name: the steps of jobs ${job_of[$name]} and ${job_of[$ref]} were not seen while they ran ($OUT/logs/steps.log)"
  elif grep -qE 'gres:gpu:[1-9]' <<<"$mine" || ! grep -qE 'gres:gpu:[1-9]' <<<"$theirs"; then
    fail "$name: step ${job_of[$name]}.0 '$(grep -oE 'TRES=[^ ]*|TresPerTask=[^ ]*' <<<"$mine" | paste -sd' ')' against $ref's '$(grep -oE 'TresPerTask=[^ ]*' <<<"$theirs")'"
  else
    pass "$name: the emulator's step ${job_of[$name]}.0 bound no GPU ($(grep -oE 'TRES=[^ ]*' <<<"$mine"), no gres:gpu per task; $ref's step: $(grep -oE 'TresPerTask=[^ ]*' <<<"$theirs")), though the job holds one per task"
  fi
}
