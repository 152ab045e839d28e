#!/usr/bin/env bash
# Run a CUDA program built by nvcc (with the shared cudart, which is the default when the link
# is made by g++/mpicxx with -lcudart) on GPGPU-Sim, built by `make gpgpusim`:
#
#   tests/gpgpusim/run.sh [--model functional|qv100|rtx3070] [--keep] PROGRAM [ARGS...]
#   mpirun -np P tests/gpgpusim/run.sh PROGRAM ARGS...     (one simulated GPU per rank)
#
# functional (default) executes the PTX without timing; qv100 and rtx3070 are GPGPU-Sim's cycle
# models of a Quadro GV100 (SM 7.0) and an RTX 3070 (SM 8.6): their cycle counts are models,
# not measurements. The program runs in the caller's directory with its own stdout and stderr;
# the simulator's files and output go to a directory of its own per process
# ($GPGPUSIM_WORKDIR[/rankN], else a new one under $TMPDIR), its log being sim.log there. That
# directory is removed after a successful run unless --keep or GPGPUSIM_WORKDIR; on failure it
# is kept and named. The exit status is the program's.
set -uo pipefail
source "$(dirname "$0")/common.sh"

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
model=functional
keep=${GPGPUSIM_KEEP:-0}
while [ $# -gt 0 ]; do
  case "$1" in
    --model) [ $# -ge 2 ] || { echo "error: gpgpusim: --model needs a value" >&2; exit 2; }
             model=$2; shift 2;;
    --model=*) model=${1#--model=}; shift;;
    --keep) keep=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; break;;
    -*) echo "error: gpgpusim: unknown option $1 (see --help)" >&2; exit 2;;
    *) break;;
  esac
done
case "$model" in
  functional|qv100) config=SM7_QV100;;
  rtx3070) config=SM86_RTX3070;;
  *) echo "error: gpgpusim: --model must be functional, qv100 or rtx3070, not '$model'" >&2; exit 2;;
esac
[ $# -ge 1 ] || { usage >&2; exit 2; }
[ -f "$GPGPUSIM_HOME/.complete" ] ||
  { echo "error: gpgpusim: the simulator is not built ($GPGPUSIM_HOME): run 'make gpgpusim'" >&2; exit 2; }

prog=$1; shift
case "$prog" in */*) ;; *) prog=$(command -v "$prog" || echo "$prog");; esac
[ -x "$prog" ] || { echo "error: gpgpusim: $prog is not an executable program" >&2; exit 2; }

rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
if [ -n "${GPGPUSIM_WORKDIR:-}" ]; then
  dir=$GPGPUSIM_WORKDIR${rank:+/rank$rank}
  keep=1
  rm -rf "$dir" && mkdir -p "$dir" || exit 2
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/gpgpusim${rank:+-rank$rank}.XXXXXX") || exit 2
fi
dir=$(cd "$dir" && pwd)

# The model's configuration, with two changes: PTX of any SM version is accepted (the CUDA
# build embeds compute_90 PTX; GPGPU-Sim's configs cap it at their own SM), no power model
# (AccelWattch, slow and not asked for).
cp "$GPGPUSIM_HOME/configs/$config"/* "$dir/"
cat >> "$dir/gpgpusim.config" <<'EOF'

# tests/gpgpusim/run.sh
-gpgpu_ptx_force_max_capability 0
-power_simulation_enabled 0
EOF

export GPGPUSIM_DIR=$dir GPGPUSIM_LOG=$dir/sim.log
export CUDA_INSTALL_PATH=$GPGPUSIM_HOME/cuda
# GPGPU-Sim runs $CUDA_INSTALL_PATH/bin/ptxas on every PTX of the program at its start, here
# through ptxas_cached.sh: it tidies the report for the simulator's parser and, with
# GPGPUSIM_PTXAS_CACHE set (test.sh sets it), replays the reports of PTX it has seen.
mkdir -p "$dir/cuda/bin"
ln -sfn "$GPGPUSIM_HOME/cuda/include" "$dir/cuda/include"
for tool in "$GPGPUSIM_HOME"/cuda/bin/*; do ln -sfn "$tool" "$dir/cuda/bin/"; done
ln -sfn "$(cd "$(dirname "$0")" && pwd)/ptxas_cached.sh" "$dir/cuda/bin/ptxas"
PTXAS_REAL=$(readlink -f "$GPGPUSIM_HOME/cuda/bin/ptxas")
export PTXAS_REAL CUDA_INSTALL_PATH=$dir/cuda
export LD_LIBRARY_PATH=$GPGPUSIM_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The trainer's binaries carry a DT_RPATH naming the CUDA toolkit's lib directory (so that module
# prefixes need no LD_LIBRARY_PATH in a job), and DT_RPATH is searched before LD_LIBRARY_PATH:
# where the real libcudart would be found first, the simulator's is preloaded, so that its
# functions are the ones every call binds to. (Only there: GPGPU-Sim reads the application's
# CUDA version from the last libcudart line of `ldd`, and a preloaded library alone has none.)
if ldd "$prog" 2>/dev/null | grep 'libcudart\.so' | grep -qv "$GPGPUSIM_HOME/lib/"; then
  cudart_so=$(cd "$GPGPUSIM_HOME/lib" && ls libcudart.so.[0-9]* 2>/dev/null | sort -V | tail -n 1)
  export LD_PRELOAD=${cudart_so:+$GPGPUSIM_HOME/lib/$cudart_so}${LD_PRELOAD:+:$LD_PRELOAD}
fi
# What GPGPU-Sim's setup_environment sets for CUDA >= 6: PTX taken per file from cuobjdump.
export PTX_SIM_USE_PTX_FILE=1.ptx PTX_SIM_KERNELFILE=_1.ptx CUOBJDUMP_SIM_FILE=jj
if [ "$model" = functional ]; then export PTX_SIM_MODE_FUNC=1; else unset PTX_SIM_MODE_FUNC; fi

"$prog" "$@"
rc=$?
if [ ! -s "$dir/sim.log" ]; then
  # Nothing of the simulator ran: a static cudart (nvcc's default: link with -cudart shared).
  echo "error: gpgpusim: no simulator log in $dir (exit $rc): $(basename "$prog") did not load GPGPU-Sim's libcudart (build it with -cudart shared), or the directory was removed while it ran" >&2
  exit $(( rc ? rc : 2 ))
fi
if [ "$model" != functional ]; then
  cycles=$(grep -o 'gpu_tot_sim_cycle = [0-9]*' "$dir/sim.log" | tail -n 1 | grep -o '[0-9]*$')
  echo "gpgpusim: model $model ($config): ${cycles:-no} simulated cycles in all${rank:+ (rank $rank)}" >&2
fi
if [ $rc -ne 0 ]; then
  echo "gpgpusim: $(basename "$prog") exited with status $rc${rank:+ on rank $rank}; the simulator's log: $dir/sim.log" >&2
  grep -m 3 -iE 'error|assert|abort|not implemented|unsupported' "$dir/sim.log" 2>/dev/null | sed 's/^/gpgpusim:   /' >&2
elif [ "$keep" != 1 ]; then
  rm -rf "$dir"
fi
exit $rc
