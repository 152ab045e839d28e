#!/usr/bin/env bash
# make test-cuda12: the CUDA build compiled by a CUDA 12 nvcc, the last that targets sm_70 (V100;
# CUDA 13 dropped it). No GPU needed: it compiles and links, nothing runs. The toolkit is Debian
# 13's non-free nvidia-cuda-toolkit (CUDA 12.4): its .deb files come from the Debian mirror
# through a private apt configuration (nothing is installed into the system), dpkg-deb unpacks
# them into the cache, and a CUDA_HOME is laid out there (bin/ with an nvcc.profile of its own,
# include/, lib64/, nvvm/), the layout make and .ci/deps.sh expect. Fetched and unpacked once
# (about 1.3 GB of .deb files, 3.2 GB unpacked); later runs only build. Needs apt-get and dpkg-deb
# (Debian, Ubuntu) and a host g++ that CUDA 12.4 accepts (up to 13). Not in make test or CI.
#
#   bash tests/cluster/cuda12.sh     CUDA_ARCH='70 75 80 90' BUILD=build/cuda12 JOBS=2
#                                    NN_CUDA12_CACHE=~/.cache/nn-cuda12 DEBIAN_MIRROR=http://deb.debian.org/debian
# Prints `cuda12: PASS ...` or `cuda12: FAIL ...` last; exit status 0 or 1 (2: nothing to build with).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
CACHE=${NN_CUDA12_CACHE:-$HOME/.cache/nn-cuda12}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
ARCHS=${CUDA_ARCH:-70 75 80 90}
OUTDIR=${BUILD:-build/cuda12}
JOBS=${JOBS:-2}
# nvcc and its pieces (cicc: libnvvm4's sibling in nvidia-cuda-toolkit; ptxas, headers, libcudart.so
# and libcublas.so in nvidia-cuda-dev), the runtime libraries, libcu++ (<cuda/pipeline>). Not
# libcuda1: nothing here runs on a GPU.
PKGS=(nvidia-cuda-toolkit nvidia-cuda-dev libcudart12 libcublas12 libcublaslt12 libnvvm4
      libcu++-dev libcub-dev libthrust-dev)
HOME_DIR=$CACHE/cuda
ROOT=$CACHE/root
STAMP=$HOME_DIR/.complete

stop() { echo "cuda12: $1" >&2; exit "${2:-2}"; }

apt_opts() {  # the private apt configuration: its own sources, lists and archive cache
  echo "-o Dir::Etc::sourcelist=$CACHE/apt/sources.list -o Dir::Etc::sourceparts=/nonexistent
        -o Dir::State=$CACHE/apt/state -o Dir::State::status=$CACHE/apt/state/status
        -o Dir::Cache=$CACHE/apt/cache -o APT::Architecture=amd64 -o Debug::NoLocking=1
        -o APT::Sandbox::User=root"
}

fetch() {  # the .deb files of PKGS into $CACHE/debs; prints their file names
  local opts uris
  { command -v apt-get && command -v dpkg-deb; } >/dev/null ||
    stop "needs apt-get and dpkg-deb (a Debian or Ubuntu host) to fetch Debian's CUDA 12 packages"
  [ -r "$KEYRING" ] || stop "no $KEYRING (apt-get install debian-archive-keyring): cannot check the mirror's signatures"
  curl -fsS --max-time 20 -o /dev/null "$MIRROR/dists/$SUITE/Release" 2>/dev/null ||
    stop "the Debian mirror is unreachable ($MIRROR/dists/$SUITE/Release): CUDA 12 cannot be fetched (DEBIAN_MIRROR=... for another mirror)"
  mkdir -p "$CACHE/apt/state/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/debs"
  touch "$CACHE/apt/state/status"
  echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main contrib non-free" >"$CACHE/apt/sources.list"
  opts=$(apt_opts)
  # shellcheck disable=SC2086
  apt-get $opts -qq update >&2 || stop "apt-get update from $MIRROR ($SUITE) failed" 1
  # shellcheck disable=SC2086
  uris=$(apt-get $opts --print-uris download "${PKGS[@]}") || stop "apt-get cannot find ${PKGS[*]} in $SUITE" 1
  # shellcheck disable=SC2086
  (cd "$CACHE/debs" && apt-get $opts -q download "${PKGS[@]}" >&2) || stop "apt-get download failed" 1
  sed -n "s/^'[^']*' \([^ ]*\.deb\) .*/\1/p" <<<"$uris"
}

layout() {  # a CUDA_HOME in $HOME_DIR from the files unpacked in $ROOT
  local tk=$ROOT/usr/lib/nvidia-cuda-toolkit t
  rm -rf "$HOME_DIR" && mkdir -p "$HOME_DIR/bin" "$HOME_DIR/nvvm/bin" || return 1
  # nvcc reads nvcc.profile beside itself: a copy, not a link, so that _HERE_ is $HOME_DIR/bin.
  cp "$tk/bin/nvcc" "$HOME_DIR/bin/nvcc" || return 1
  for t in ptxas cudafe++ fatbinary nvlink bin2c nvprune cuobjdump nvdisasm cu++filt; do
    ln -s "$ROOT/usr/bin/$t" "$HOME_DIR/bin/$t" || return 1
  done
  ln -s "$tk/bin/crt" "$HOME_DIR/bin/crt" && ln -s "$tk/bin/cicc" "$HOME_DIR/nvvm/bin/cicc" &&
    ln -s "$tk/libdevice" "$HOME_DIR/nvvm/libdevice" && ln -s "$ROOT/usr/include" "$HOME_DIR/include" &&
    ln -s "$ROOT/usr/lib/x86_64-linux-gnu" "$HOME_DIR/lib64" || return 1
  # Debian's own profile points at /usr; this one at the prefix (CUDA's standard profile, less stubs).
  cat >"$HOME_DIR/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
}

install_toolkit() {  # fetch, unpack, lay out: once (the stamp names the files it came from)
  local debs f
  debs=$(fetch) || exit $?
  [ -n "$debs" ] || stop "apt-get named no .deb files for ${PKGS[*]}" 1
  rm -rf "$ROOT" && mkdir -p "$ROOT"
  echo "cuda12: unpacking $(wc -l <<<"$debs") packages into $ROOT" >&2
  for f in $debs; do
    dpkg-deb -x "$CACHE/debs/$f" "$ROOT" || stop "dpkg-deb -x $f failed" 1
  done
  layout || stop "could not lay out $HOME_DIR" 1
  echo "$debs" >"$STAMP"
}

{ [ -s "$STAMP" ] && [ -x "$HOME_DIR/bin/nvcc" ]; } || install_toolkit
NVCC=$HOME_DIR/bin/nvcc
version=$("$NVCC" --version 2>&1 | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p')
[ "${version%%.*}" = 12 ] || stop "$NVCC is not a CUDA 12 nvcc: $("$NVCC" --version 2>&1 | tail -2 | tr '\n' ' ')" 1
echo "cuda12: nvcc $version ($HOME_DIR), CUDA_ARCH='$ARCHS', BUILD=$OUTDIR, host $(${CXX:-g++} --version | head -1)"

t0=$SECONDS
make -j"$JOBS" cuda CUDA_HOME="$HOME_DIR" CUDA_ARCH="$ARCHS" BUILD="$OUTDIR"
rc=$? secs=$((SECONDS - t0))
[ "$rc" = 0 ] || { echo "cuda12: FAIL: make cuda with CUDA $version (CUDA_ARCH='$ARCHS') stopped with status $rc after $secs s"; exit 1; }

# The trainer has SASS for every listed architecture.
bin=$OUTDIR/cuda/bin/nn_train
have=$("$HOME_DIR/bin/cuobjdump" --list-elf "$bin" 2>/dev/null | sed -n 's/.*\.\(sm_[0-9a-z]*\)\.cubin$/\1/p' | sort -u | tr '\n' ' ')
missing=
for a in $ARCHS; do case " $have" in *" sm_$a "*) ;; *) missing+=" sm_$a" ;; esac; done
[ -z "$missing" ] || { echo "cuda12: FAIL: $bin has no code for$missing (it has: $have)"; exit 1; }
echo "cuda12: PASS: make cuda with CUDA $version for sm_${ARCHS// / sm_} in $secs s ($bin has $have)"
