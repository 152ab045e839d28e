# shellcheck shell=bash
# Shared by the slurm/*.sbatch scripts (sourced, never run on its own): finds the
# repository, picks the build, and launches MPI ranks with srun or mpirun.
#
# Environment (all optional; the scripts' headers repeat what applies to them):
#   NN_ROOT       repository root (default: the directory sbatch was run from,
#                 $SLURM_SUBMIT_DIR, else the parent of slurm/)
#   NN_BUILD      cpu | cuda: the emulator build (build/cpu) or the CUDA build
#                 (build/cuda). Default: cuda when `nvidia-smi -L` sees a GPU on the node
#                 and build/cuda/bin/nn_train exists, else cpu; a job that asked for GPUs
#                 (without --device cpu) stops with one line when either is missing, and a
#                 visible GPU without the CUDA build trains with --device cpu (nn_pick_build).
#   LAUNCHER      srun | mpirun. Default: srun inside a Slurm job, mpirun outside.
#   SRUN_MPI      srun --mpi=PLUGIN. Default: pmix when `srun --mpi=list` offers it (Open MPI
#                 4.x as packaged by Debian/Ubuntu starts under srun only through PMIx;
#                 --mpi=pmi2 fails in MPI_Init), else nothing (the site's MpiDefault).
#   SRUN_FLAGS    extra srun options, split on spaces. The job's --cpus-per-task is passed on
#                 to srun (unless SRUN_FLAGS names it), so each task gets its cores.
#   MPIRUN        mpirun command (default slurm/mpirun.sh: the real mpirun, NN_MPIRUN or
#                 mpirun on PATH, with a session directory of its own, so that concurrent
#                 jobs on a node never collide); MPIRUN_FLAGS extra options, split on
#                 spaces. Outside a Slurm job --oversubscribe is added (Open MPI) when more
#                 ranks than cores are asked for; slurm/mpirun.sh maps each rank to as many
#                 cores as its threads (--cpus-per-task inside a job).
# As root, Open MPI's mpirun needs OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM}=1: set here.

nn_die() {
  echo "${NN_SCRIPT:-slurm}: error: $*" >&2
  exit 1
}

nn_log() {
  echo "${NN_SCRIPT:-slurm}: $*"
}

# The calling script has set NN_ROOT (see its source line) and sourced this file from it.
# Then the site's hook, slurm/site.sh when it exists (git-ignored): `module load` lines and
# whatever else a job on this cluster needs before it starts (docs/cluster.md#the-site-hook).
nn_cd_root() {
  cd "$NN_ROOT" || nn_die "NN_ROOT=$NN_ROOT: no such directory"
  NN_ROOT=$(pwd)
  export NN_ROOT
  # shellcheck source=/dev/null
  if [ -f slurm/site.sh ]; then . slurm/site.sh || nn_die "slurm/site.sh failed"; fi
}

nn_gpu_visible() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

# Did the job ask for GPUs? (Slurm sets these with --gpus*, --gres=gpu:N; 0 and empty are no.)
nn_gpus_asked() {
  local v
  for v in "${SLURM_GPUS_PER_TASK:-}" "${SLURM_GPUS_ON_NODE:-}" "${SLURM_JOB_GPUS:-}" "${SLURM_STEP_GPUS:-}" \
           "${SLURM_GPUS:-}" "${SLURM_GPUS_PER_NODE:-}"; do
    [ -n "$v" ] && [ "$v" != 0 ] && return 0
  done
  [[ ${SLURM_JOB_GRES:-${SLURM_GRES:-}} == *gpu* ]] && [[ ${SLURM_JOB_GRES:-${SLURM_GRES:-}} != *gpu:0* ]]
}
# The last --device among the trainer's arguments (nn_train's own rule), or "".
nn_device_arg() {
  local dev='' prev=''
  for a in "$@"; do
    case $a in --device=*) dev=${a#--device=} ;; esac
    [ "$prev" = --device ] && dev=$a
    prev=$a
  done
  echo "$dev"
}

# nn_pick_build ROLE [TRAINER ARGS...]: sets NN_BUILD (cpu|cuda) unless given; an explicit choice is
# never overridden. A job that asked for GPUs gets the CUDA build on a usable GPU or stops with
# one line. A GPU visible without the CUDA build never means the emulator by surprise: with ROLE
# train (train.sbatch) and no --device, the host's cores train (NN_DEVICE_ARGS=(--device cpu),
# for the caller to pass on, said in one line); with ROLE run (profile, scaling) or --device gpu,
# it stops with one line; ROLE tests (test.sbatch: the emulator's suite) notes it. --device cpu,
# or NN_BUILD=cpu, says otherwise. The emulator build runs where no GPU is visible.
NN_DEVICE_ARGS=()
nn_pick_build() {
  local role=$1
  shift
  if [ -z "${NN_BUILD:-}" ]; then
    local device
    device=$(nn_device_arg "$@")
    if nn_gpus_asked && [ "$device" != cpu ]; then
      [ -x build/cuda/bin/nn_train ] ||
        nn_die "the job asked for GPUs but build/cuda/bin/nn_train is missing: build it (module load cuda; make trainer), or run with --device cpu (or NN_BUILD=cpu for the emulator)"
      nn_gpu_visible ||
        nn_die "the job asked for GPUs but none is usable on $(hostname -s) (nvidia-smi -L fails: no driver or no device); run with --device cpu, or ask for a GPU partition"
      NN_BUILD=cuda
    elif nn_gpu_visible && [ -x build/cuda/bin/nn_train ]; then
      NN_BUILD=cuda
    else
      NN_BUILD=cpu
      if nn_gpu_visible && [ "$device" != cpu ]; then
        local missing="a GPU is visible but build/cuda/bin/nn_train is missing (module load cuda; make trainer)"
        if [ "$role" = tests ]; then
          nn_log "note: $missing: the emulator build's suite"
        elif [ "$role" = train ] && [ -z "$device" ]; then
          NN_DEVICE_ARGS=(--device cpu)
          nn_log "note: $missing: training on the host's cores (--device cpu); NN_BUILD=cpu runs the emulator build instead"
        else
          nn_die "$missing; run with --device cpu, or NN_BUILD=cpu for the emulator build"
        fi
      fi
    fi
  fi
  case $NN_BUILD in
    cpu | cuda) ;;
    *) nn_die "NN_BUILD must be cpu or cuda (got '$NN_BUILD')" ;;
  esac
  export NN_BUILD
}

# Sets LAUNCHER and the launcher's flags; exports what Open MPI needs as root.
nn_pick_launcher() {
  if [ -z "${LAUNCHER:-}" ]; then
    if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null 2>&1; then
      LAUNCHER=srun
    else
      LAUNCHER=mpirun
    fi
  fi
  case $LAUNCHER in
    srun)
      command -v srun >/dev/null 2>&1 || nn_die "LAUNCHER=srun but srun is not on PATH"
      [ -n "${SLURM_JOB_ID:-}" ] || nn_die "LAUNCHER=srun outside a Slurm job: submit with sbatch, or LAUNCHER=mpirun"
      if [ -z "${SRUN_MPI+set}" ]; then
        if srun --mpi=list 2>&1 | grep -qw pmix; then SRUN_MPI=pmix; else SRUN_MPI=; fi
      fi
      ;;
    mpirun)
      MPIRUN=${MPIRUN:-$NN_ROOT/slurm/mpirun.sh}
      command -v "$MPIRUN" >/dev/null 2>&1 || nn_die "LAUNCHER=mpirun but $MPIRUN is not on PATH (module load openmpi?)"
      if [ "$MPIRUN" = "$NN_ROOT/slurm/mpirun.sh" ]; then
        command -v "${NN_MPIRUN:-mpirun}" >/dev/null 2>&1 ||
          nn_die "LAUNCHER=mpirun but ${NN_MPIRUN:-mpirun} is not on PATH (module load openmpi?)"
      fi
      ;;
    *) nn_die "LAUNCHER must be srun or mpirun (got '$LAUNCHER')" ;;
  esac
  export LAUNCHER
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
}

# _nn_exec CMD [ARGS...]: runs CMD and returns its status. With NN_LAUNCH_BG=1 CMD runs in
# the background while the shell waits, so that the calling script's traps run at once
# (bash defers a trap until a foreground command ends): NN_LAUNCH_PID is CMD's process id
# meanwhile, and a wait cut short by a trap (nn_signal_launcher) is resumed.
_nn_exec() {
  if [ "${NN_LAUNCH_BG:-0}" != 1 ]; then
    "$@"
    return
  fi
  "$@" &
  NN_LAUNCH_PID=$!
  local st
  while :; do
    NN_LAUNCH_SIGNALLED=0
    wait "$NN_LAUNCH_PID" && st=0 || st=$?
    [ "$NN_LAUNCH_SIGNALLED" = 1 ] || break # a trap ran: the launcher may still be running
  done
  NN_LAUNCH_PID=
  return "$st"
}

# nn_signal_launcher SIG: for a trap of a script that launched with NN_LAUNCH_BG=1: sends SIG
# to the launcher, which passes it on to the ranks (srun forwards SIGUSR1 to its tasks;
# slurm/mpirun.sh to mpirun, and mpirun to the ranks). Returns 1 when no launch is under way.
nn_signal_launcher() {
  NN_LAUNCH_SIGNALLED=1
  [ -n "${NN_LAUNCH_PID:-}" ] || return 1
  kill -s "$1" "$NN_LAUNCH_PID" 2>/dev/null
}

# nn_launch NP PROGRAM [ARGS...]: NP ranks of PROGRAM with the chosen launcher (in the
# background with NN_LAUNCH_BG=1, see _nn_exec); returns the launcher's status.
# The job's GPUs (tested by tests/multinode/slurm.sh, nodes with gres.conf GPUs):
#   srun      with --gpus-per-task=1 each task gets its own GPU (Slurm binds them per task);
#             with --gpus-per-task=0 --gres=gpu:N the step runs without SLURM_GPUS_PER_TASK,
#             which srun would read as "no GPU per task", so every task sees its node's N GPUs.
#   mpirun    Open MPI starts its daemon on each other node with a one-task srun step, which
#             would get one GPU (--gpus-per-task=1) or none: that step asks for as many GPUs
#             as the job has on this node (--gpus-per-node, through Open MPI's plm_slurm_args;
#             nodes with the same count, as --ntasks-per-node gives), and every rank takes
#             local rank % GPUs, as on the first node.
#   NN_STEP_GPUS=none (test.sbatch's emulator runs): the ranks are bound to none of the job's
#             GPUs: srun --gres=none; mpirun without CUDA_VISIBLE_DEVICES, its daemons' steps
#             with --gres=none (Open MPI's plm_slurm_args).
nn_launch() {
  local np=$1
  shift
  local -a flags=() genv=()
  if [ -n "${SLURM_NTASKS:-}" ] && [ "$np" -gt "$SLURM_NTASKS" ]; then
    nn_die "$np ranks asked for, but the job has $SLURM_NTASKS tasks: submit with --ntasks=$np"
  fi
  if [ "$LAUNCHER" = srun ]; then
    [ -n "${SRUN_MPI:-}" ] && flags+=("--mpi=$SRUN_MPI")
    if [ "${NN_STEP_GPUS:-}" = none ]; then
      flags+=(--gres=none)
    elif [ "${SLURM_GPUS_PER_TASK:-}" = 0 ]; then
      genv=(-u SLURM_GPUS_PER_TASK)
    fi
    # The job's cores per task for each task of the step: srun no longer takes them from
    # SLURM_CPUS_PER_TASK (Slurm 22.05 and later), and would give each task one CPU, so a
    # --device cpu rank would run its BLAS threads on one core.
    case " ${SRUN_FLAGS:-} " in
      *" --cpus-per-task"* | *" -c "* | *" -c"[0-9]*) ;;
      *) [ -z "${SLURM_CPUS_PER_TASK:-}" ] || flags+=("--cpus-per-task=$SLURM_CPUS_PER_TASK") ;;
    esac
    # shellcheck disable=SC2206  # SRUN_FLAGS is a list of options, split on purpose
    flags+=(${SRUN_FLAGS:-})
    echo "+ ${genv[*]:+env ${genv[*]} }srun --ntasks=$np${flags[*]:+ ${flags[*]}} $*"
    # Open MPI's session directory: one of this launch's own, as slurm/mpirun.sh makes for
    # mpirun (two jobs' steps on one node could otherwise collide on the shared one). Other
    # nodes create it themselves and keep it, empty, after the step.
    local private= status=0
    if [ -z "${OMPI_MCA_orte_tmpdir_base:-}" ]; then
      private=$(mktemp -d "${TMPDIR:-/tmp}/nn-ompi.XXXXXX") || nn_die "cannot create a directory under ${TMPDIR:-/tmp}"
    fi
    _nn_exec env "${genv[@]}" OMPI_MCA_orte_tmpdir_base="${OMPI_MCA_orte_tmpdir_base:-$private}" \
      srun --ntasks="$np" "${flags[@]}" "$@" || status=$?
    [ -z "$private" ] || rm -rf "$private"
    return "$status"
  else
    # shellcheck disable=SC2206  # MPIRUN_FLAGS is a list of options, split on purpose
    flags+=(${MPIRUN_FLAGS:-})
    if [ -z "${SLURM_JOB_ID:-}" ] && [ "$np" -gt "$(nproc 2>/dev/null || echo 1)" ] &&
      "$MPIRUN" --version 2>&1 | grep -q 'Open MPI'; then
      flags+=(--oversubscribe)
    fi
    if [ -n "${SLURM_JOB_ID:-}" ] && [ "${NN_STEP_GPUS:-}" = none ]; then
      genv=(-u CUDA_VISIBLE_DEVICES OMPI_MCA_plm_slurm_args="${OMPI_MCA_plm_slurm_args:+$OMPI_MCA_plm_slurm_args }--gres=none")
    elif [ -n "${SLURM_JOB_ID:-}" ] && [ "${SLURM_GPUS_ON_NODE:-0}" != 0 ]; then
      genv=(-u SLURM_GPUS_PER_TASK OMPI_MCA_plm_slurm_args="${OMPI_MCA_plm_slurm_args:+$OMPI_MCA_plm_slurm_args }--gpus-per-node=$SLURM_GPUS_ON_NODE")
    fi
    echo "+ ${genv[*]:+env ${genv[*]} }$MPIRUN -np $np${flags[*]:+ ${flags[*]}} $*"
    _nn_exec env "${genv[@]}" "$MPIRUN" -np "$np" "${flags[@]}" "$@"
  fi
}
