#!/usr/bin/env bash
# Pack the CUDA build for a GPU machine that has the NVIDIA driver and the CUDA toolkit (cuBLAS)
# but none of our other packages (Open MPI, Armadillo, OpenBLAS, ...): a rented cloud GPU, a
# container image, a node where `module load` offers CUDA and nothing else.
#   bash tests/cuda/gpu_kit.sh [BUILD_CUDA_DIR] [KIT_DIR]   (defaults build/cuda, .gpukit)
# KIT_DIR/kit.txz (xz: the 36 MB OpenBLAS shrinks to 4) holds:
#   bin/      nn_tests, nn_train, gemm_bench (and tc_peak) with their debug sections stripped (SASS and PTX kept)
#   lib/      every shared library they and Open MPI load, except glibc's, the C++ runtime's,
#             CUDA's own (cudart, cuBLAS come from the GPU machine's toolkit: same major version)
#             and NCCL's (libnccl.so.2 is over 200 MB; gpu_session.sh finds the machine's own: the
#             toolkit's, the linker's cache, or the nvidia-nccl wheel PyTorch installs)
#   ompi/     Open MPI's plugins, help texts, default MCA parameters, orterun and orted, under the
#             absolute paths this Debian build looks for (tests/cuda/gpu_session.sh links them in)
#   data/     the IDX files of data/current (the training and test sets, gzip)
# Copy KIT_DIR and the repository (tests/cuda/gpu_session.sh, slurm/mpirun.sh, and for the peer
# steps bench/peer_common.py, peer_torch.py, peer_jax.py and peers_gpu_table.py, which run under
# the GPU machine's own python3 with its PyTorch and JAX; nothing of them goes into the kit) to
# the GPU machine and run there, from the repository's root:
#   bash tests/cuda/gpu_session.sh KIT_DIR OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
CUDA_DIR=${1:-build/cuda}
KIT=${2:-.gpukit}
die() { echo "gpu_kit: error: $*" >&2; exit 1; }
# KIT_BINS: the programs to pack (the kit and the repository travel together under a size limit on
# some machines: leave out what a session does not run, e.g. KIT_BINS='nn_tests nn_train exchange_parts').
KIT_BINS=${KIT_BINS:-nn_tests nn_train gemm_bench exchange_parts}
for b in $KIT_BINS; do [ -x "$CUDA_DIR/bin/$b" ] || die "$CUDA_DIR/bin/$b not built (make cuda)"; done
[ -d data/current ] || die "data/current missing (make data)"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/ompi" "$stage/data"
for b in $KIT_BINS; do strip --strip-debug -o "$stage/bin/$b" "$CUDA_DIR/bin/$b"; done
# The tensor-core and FP32 limits (bench/tc_peak.cu), where built.
[ -x "$CUDA_DIR/bin/tc_peak" ] && strip --strip-debug -o "$stage/bin/tc_peak" "$CUDA_DIR/bin/tc_peak"

# Open MPI as Debian lays it out (libdir's openmpi/ tree, /usr/share/openmpi, /etc/openmpi).
ompi_lib=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libmpi\.so\.40 .*x86-64/ {print $NF; exit}')")")
ompi_tree=$ompi_lib/openmpi
[ -d "$ompi_tree" ] || die "Open MPI's plugin tree $ompi_tree not found"
pmix_tree=$ompi_lib/pmix2
paths=("${ompi_tree#/}" usr/share/openmpi etc/openmpi)
[ -d "$pmix_tree" ] && paths+=("${pmix_tree#/}")
tar -C / -cf - "${paths[@]}" usr/bin/orterun usr/bin/orted | tar -C "$stage/ompi" -xf -
printf '%s\n' "${paths[@]}" >"$stage/ompi/PATHS"
# Leave out the plugins for fabrics a one-node GPU check never uses (InfiniBand verbs, UCX, OFI,
# PSM) and OpenSHMEM's: their libraries would be half the kit.
fabric='lib(fabric|ucp|uct|ucs|ucm|psm|ibverbs|rdmacm|efa|infinipath|nl-|oshmem)'
for f in "$stage/ompi/${ompi_tree#/}"/lib/openmpi3/*.so; do
  ldd "$f" 2>/dev/null | grep -Eq "$fabric" && rm -f "$f"
done

# The shared-library closure of the binaries, orterun/orted and every plugin.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libutil|libresolv|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libnvidia|libnccl)'
{
  shopt -s nullglob  # PMIx's plugin folder may not exist
  for f in "$stage"/bin/* /usr/bin/orterun /usr/bin/orted "$stage/ompi/${ompi_tree#/}"/lib/openmpi3/*.so "$pmix_tree"/lib/pmix/*.so; do
    { ldd "$f" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
  done
} | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$stage/lib/$name"
done

# The C++ runtime, used there only if the machine's own is older than the one we built with.
mkdir -p "$stage/lib-compat"
for n in libstdc++.so.6 libgcc_s.so.1; do cp -L "$(ldconfig -p | awk -v n="$n" '$1 == n && /x86-64/ {print $NF; exit}')" "$stage/lib-compat/"; done
# The IDX files uncompressed: xz packs the raw bytes a fifth smaller than it packs their gzip.
for f in data/current/*-idx?-ubyte*; do
  case $f in *.gz) gzip -dc "$f" >"$stage/data/$(basename "${f%.gz}")" ;; *) cp -L "$f" "$stage/data/" ;; esac
done
mkdir -p "$KIT"
rm -f "$KIT"/kit.t*
XZ_OPT=${XZ_OPT:-'-9e -T0'} tar -C "$stage" -cJf "$KIT/kit.txz" .
echo "gpu_kit: $KIT/kit.txz: $(du -h "$KIT/kit.txz" | cut -f1) ($(ls "$stage/lib" | wc -l) libraries, $(find "$stage/ompi" -name '*.so' | wc -l) Open MPI plugins, data from $(readlink -f data/current))"
