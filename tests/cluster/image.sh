#!/usr/bin/env bash
# The simulated cluster's login node: a minimal Debian 12 root (debootstrap) with g++, make,
# python3, Open MPI and Lmod, a user without root (nnuser), and the trainer's libraries only in
# /opt/<name>/<version> prefixes (moved out of /usr after apt-get installed them), each with two
# modulefiles: /opt/modules/easybuild (CPATH, LIBRARY_PATH, LD_LIBRARY_PATH) and /opt/modules/spack
# (PATH, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH), the styles of those two tools' generated modules.
# NCCL: PyPI's nvidia-nccl-cu13 wheel (fetched with the host's pip into ~/.cache/nn-cluster/wheels),
# laid out as an EasyBuild-style prefix /opt/nccl/<version> (include/, lib/ with a libnccl.so link;
# its module sets EBROOTNCCL) and kept in /opt/wheels for `pip install --user` (python3-pip is in
# the image). Root; needs the Debian mirror and PyPI once: packages cached in
# ~/.cache/nn-cluster/debs, the finished root in ~/.cache/nn-cluster/root-<hash of this script>.
# Used by tests/cluster/run.sh.
#
#   bash tests/cluster/image.sh     prints the root's path (builds it when missing)
set -euo pipefail
CACHE=${NN_CLUSTER_CACHE:-$HOME/.cache/nn-cluster}
MIRROR=${NN_CLUSTER_MIRROR:-http://deb.debian.org/debian/}
hash=$(sha256sum "$0" | cut -c1-12)
ROOT=$CACHE/root-$hash
[ -f "$ROOT/.done" ] && { echo "$ROOT"; exit 0; }
say() { echo "cluster-image: $*" >&2; }
command -v debootstrap >/dev/null || { say "installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }
mkdir -p "$CACHE/debs"
rm -rf "$ROOT.tmp"
say "debootstrap bookworm (minbase) into $ROOT.tmp"
debootstrap --variant=minbase --cache-dir="$CACHE/debs" bookworm "$ROOT.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
  { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }

# Packages: the toolchain and Lmod stay in /usr (a cluster's base system); the libraries below
# go to /opt after installation. Open MPI stays Debian's: its wrappers are not relocatable.
BASE=(g++ make python3 python3-pip lmod openmpi-bin libopenmpi-dev pkg-config procps file git)
declare -A MOVE=(
  [armadillo/11.4.2]="libarmadillo-dev libarmadillo11"
  [openblas/0.3.21]="libopenblas-dev libopenblas-pthread-dev"
  [googletest/1.12.1]="libgtest-dev"
  [boost/1.74.0]="libboost1.74-dev libboost-context1.74-dev libboost-context1.74.0 libboost-context-dev"
  [cli11/2.3.2]="libcli11-dev"
  [nlohmann_json/3.11.2]="nlohmann-json3-dev"
  [zlib/1.2.13]="zlib1g-dev"
)
mount --bind "$CACHE/debs" "$ROOT.tmp/var/cache/apt/archives"
mount -t proc proc "$ROOT.tmp/proc"
trap 'umount "$ROOT.tmp/var/cache/apt/archives" "$ROOT.tmp/proc" 2>/dev/null || true' EXIT
say "apt-get install ${BASE[*]} and the libraries"
# shellcheck disable=SC2068
chroot "$ROOT.tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${BASE[@]}" ${MOVE[@]} >"$CACHE/apt.log" 2>&1 || { tail -20 "$CACHE/apt.log" >&2; exit 1; }

# relocate PKG... to /opt/PREFIX: headers to include/, libraries (and pkgconfig, cmake) to lib/.
relocate() {
  local prefix=/opt/$1 pkg f rel dest d t r=$ROOT.tmp
  shift
  mkdir -p "$r$prefix/include" "$r$prefix/lib/pkgconfig"
  for pkg in "$@"; do
    chroot "$r" dpkg -L "$pkg" | while read -r f; do
      [ -f "$r$f" ] || [ -L "$r$f" ] || continue
      case $f in
        /usr/include/*) rel=include/${f#/usr/include/} ;;
        /usr/lib/x86_64-linux-gnu/*) rel=lib/${f#/usr/lib/x86_64-linux-gnu/} ;;
        /usr/lib/*) rel=lib/${f#/usr/lib/} ;;
        /usr/share/pkgconfig/*) rel=lib/pkgconfig/${f#/usr/share/pkgconfig/} ;;
        *) continue ;;
      esac
      dest=$r$prefix/$rel
      mkdir -p "$(dirname "$dest")"
      mv "$r$f" "$dest"
    done
  done
  for f in "$r$prefix"/lib/pkgconfig/*.pc "$r$prefix"/lib/*/pkgconfig/*.pc; do
    [ -f "$f" ] || continue
    sed -i -e "s#^prefix=.*#prefix=$prefix#" -e 's#${prefix}/lib/x86_64-linux-gnu#${prefix}/lib#' \
      -e "s#/usr/lib/x86_64-linux-gnu#$prefix/lib#g" -e "s#/usr/include#$prefix/include#g" -e "s#=/usr\$#=$prefix#" \
      -e "s#=/usr/lib\$#=$prefix/lib#" "$f"
  done
  # A link to a file that stayed behind (libz.so -> the runtime's libz.so.1): a copy of it.
  find "$r$prefix" -type l ! -exec test -e {} \; -print | while read -r f; do
    for d in /usr/lib/x86_64-linux-gnu /usr/lib; do
      t=$(readlink "$f")
      if [ -e "$r$d/$t" ]; then rm -f "$f"; cp "$r$d/$t" "$f"; break; fi
    done
  done
}
for p in "${!MOVE[@]}"; do
  say "moving ${MOVE[$p]} to /opt/$p"
  # shellcheck disable=SC2086
  relocate "$p" ${MOVE[$p]}
done
# OpenBLAS: Debian's files sit in openblas-pthread/ subdirectories (behind alternatives); the
# prefix gets the plain layout of a source build: include/cblas.h, lib/libopenblas.so{,.0}.
ob=$ROOT.tmp/opt/openblas/0.3.21
mv "$ob"/include/x86_64-linux-gnu/openblas-pthread/* "$ob/include/" && rm -rf "$ob/include/x86_64-linux-gnu"
cp -a "$ob"/lib/openblas-pthread/* "$ob/lib/" && rm -rf "$ob/lib/openblas-pthread"
cp -L "$ROOT.tmp/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0" "$ob/lib/"
ln -sfn libopenblas.so.0 "$ob/lib/libopenblas.so"
sed -i -e "s#^libdir=.*#libdir=/opt/openblas/0.3.21/lib#" -e "s#^includedir=.*#includedir=/opt/openblas/0.3.21/include#" "$ob"/lib/pkgconfig/openblas.pc
chroot "$ROOT.tmp" ldconfig

# Modulefiles, both styles.
modulefile() {  # modulefile STYLE NAME/VERSION [extra lua]
  local style=$1 nv=$2 prefix=/opt/$2 f
  f=$ROOT.tmp/opt/modules/$style/$nv.lua
  mkdir -p "$(dirname "$f")"
  {
    echo "-- $nv, $style style"
    echo "whatis(\"$nv from $prefix\")"
    if [ "$style" = easybuild ]; then
      echo "prepend_path(\"CPATH\", \"$prefix/include\")"
      echo "prepend_path(\"LIBRARY_PATH\", \"$prefix/lib\")"
      echo "prepend_path(\"LD_LIBRARY_PATH\", \"$prefix/lib\")"
    else
      echo "prepend_path(\"PKG_CONFIG_PATH\", \"$prefix/lib/pkgconfig\")"
      echo "prepend_path(\"CMAKE_PREFIX_PATH\", \"$prefix\")"
    fi
    echo "${3:-}"
  } >"$f"
}
for style in easybuild spack; do
  for p in "${!MOVE[@]}"; do modulefile "$style" "$p"; done
done
# CUDA: the host's toolkit, bound read-only to /opt/cuda/13.0 by run.sh. Both tools' CUDA
# modules set CUDA_HOME and PATH.
modulefile easybuild cuda/13.0 'prepend_path("PATH", "/opt/cuda/13.0/bin")
setenv("CUDA_HOME", "/opt/cuda/13.0")'
sed -i 's#/opt/cuda/13.0/lib"#/opt/cuda/13.0/lib64"#' "$ROOT.tmp/opt/modules/easybuild/cuda/13.0.lua"
modulefile spack cuda/13.0 'prepend_path("PATH", "/opt/cuda/13.0/bin")
setenv("CUDA_HOME", "/opt/cuda/13.0")'
mkdir -p "$ROOT.tmp/opt/cuda/13.0"

# NCCL from PyPI's wheel (CUDA 13, as the cuda module): an EasyBuild-style prefix and the wheel.
mkdir -p "$CACHE/wheels"
whl=$(compgen -G "$CACHE/wheels/nvidia_nccl_cu13-*.whl" | head -1) || {
  say "pip download nvidia-nccl-cu13 (about 200 MB) into $CACHE/wheels"
  python3 -m pip download -q --no-deps -d "$CACHE/wheels" nvidia-nccl-cu13 >&2
  whl=$(compgen -G "$CACHE/wheels/nvidia_nccl_cu13-*.whl" | head -1)
}
v=$(basename "$whl" | sed -n 's/^nvidia_nccl_cu13-\([0-9.]*\)-.*/\1/p')
nccl=$ROOT.tmp/opt/nccl/$v
mkdir -p "$nccl" "$ROOT.tmp/opt/wheels" && cp "$whl" "$ROOT.tmp/opt/wheels/"
python3 -m zipfile -e "$whl" "$nccl.unpacked"
mv "$nccl.unpacked/nvidia/nccl/include" "$nccl.unpacked/nvidia/nccl/lib" "$nccl/" && rm -rf "$nccl.unpacked"
ln -s libnccl.so.2 "$nccl/lib/libnccl.so"
modulefile easybuild "nccl/$v" "setenv(\"EBROOTNCCL\", \"/opt/nccl/$v\")"
modulefile spack "nccl/$v"

chroot "$ROOT.tmp" useradd -m -s /bin/bash nnuser
umount "$ROOT.tmp/var/cache/apt/archives" "$ROOT.tmp/proc"
trap - EXIT
touch "$ROOT.tmp/.done"
rm -rf "$ROOT"
mv "$ROOT.tmp" "$ROOT"
say "ready: $ROOT"
echo "$ROOT"
