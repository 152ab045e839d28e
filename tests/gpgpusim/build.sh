#!/usr/bin/env bash
# make gpgpusim: build GPGPU-Sim (pinned commit + tests/gpgpusim/gpgpu-sim.patch) once, into a
# cache outside the work tree ($GPGPUSIM_CACHE, default ~/.cache/nn-gpgpusim/<commit>-<hash>);
# a second run finds it and does nothing. One line per step; the build's own output goes to a
# log that is named if the build fails.
#
# Source, first found: $GPGPUSIM_SRC (a .tar.xz/.tar.gz made by `git archive` of the pinned
# commit, or a checkout of it); ../shared/gpgpusim/gpgpu-sim_distribution-*.tar.xz beside the
# project (CI, no internet); a clone of the pinned commit (needs internet).
#
# Toolchain: no CUDA 11 toolkit. The simulator compiles against the CUDA 11.8 runtime headers
# (PyPI wheel nvidia-cuda-runtime-cu11, 0.9 MB), reads fat binaries with cuobjdump 13.2
# (PyPI nvidia-cuda-cuobjdump, 0.3 MB) and asks the project's own CUDA toolkit's ptxas for
# register counts. Build tools from Debian: bison flex xutils-dev (makedepend) zlib1g-dev
# libgl-dev, installed here when missing and root.
set -euo pipefail
source "$(dirname "$0")/common.sh"

say() { printf '  %-9s %s\n' "$1" "$2"; }
die() { echo "error: gpgpusim: $*" >&2; exit 1; }

if [ -f "$GPGPUSIM_HOME/.complete" ]; then
  say GPGPUSIM "cached: $GPGPUSIM_HOME"
  exit 0
fi

# ---- the CUDA toolkit of the project (its ptxas) ----
nvcc_path=${NVCC:-$(command -v nvcc || true)}
cuda_home=${CUDA_HOME:-${nvcc_path%/bin/nvcc}}
[ -x "$cuda_home/bin/ptxas" ] || die "no ptxas in '$cuda_home/bin' (set CUDA_HOME to the CUDA toolkit nvcc comes from)"

# ---- build tools ----
missing=()
for tool in bison:bison flex:flex makedepend:xutils-dev g++:g++ make:make xz:xz-utils; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
[ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
compgen -G "/usr/lib/*/libGL.so" >/dev/null || compgen -G /usr/lib/libGL.so >/dev/null || missing+=(libgl-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say APT "installing ${missing[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
      >/dev/null 2>&1 || die "apt-get install ${missing[*]} failed"
  else
    die "missing build tools: apt-get install ${missing[*]} (Debian/Ubuntu)"
  fi
fi

mkdir -p "$GPGPUSIM_CACHE"
work=$(mktemp -d "$GPGPUSIM_CACHE/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$GPGPUSIM_CACHE/build.log
: > "$log"
fail() { echo "error: gpgpusim: $1; the log: $log" >&2; tail -n 15 "$log" >&2; exit 1; }

# ---- source ----
src=$work/src
mkdir -p "$src"
shared=$(ls "$GPGPUSIM_TESTS_DIR"/../../../shared/gpgpusim/gpgpu-sim_distribution-*.tar.xz 2>/dev/null | head -n 1 || true)
from=${GPGPUSIM_SRC:-$shared}
if [ -n "$from" ] && [ -d "$from" ]; then
  say SOURCE "$from (directory)"
  cp -a "$from/." "$src/"
elif [ -n "$from" ]; then
  [ -f "$from" ] || die "GPGPUSIM_SRC=$from does not exist"
  case "$from" in *.xz) unz=(xz -dc);; *.gz|*.tgz) unz=(gzip -dc);; *) unz=(cat);; esac
  got=$("${unz[@]}" "$from" | git get-tar-commit-id 2>/dev/null || true)
  [ -z "$got" ] || [ "$got" = "$GPGPUSIM_COMMIT" ] ||
    die "$from is commit $got, not the pinned $GPGPUSIM_COMMIT"
  say SOURCE "$(basename "$from") (commit ${got:-not recorded})"
  "${unz[@]}" "$from" | tar -x -C "$src" --strip-components=1 || die "cannot unpack $from"
else
  say SOURCE "git clone $GPGPUSIM_REPO @ ${GPGPUSIM_COMMIT:0:12}"
  { git clone -q "$GPGPUSIM_REPO" "$src" && git -C "$src" checkout -q "$GPGPUSIM_COMMIT"; } >>"$log" 2>&1 ||
    fail "no source: no GPGPUSIM_SRC, no ../shared/gpgpusim archive, and the clone failed"
fi

# ---- our patch ----
say PATCH "tests/gpgpusim/gpgpu-sim.patch"
patch -d "$src" -p1 --quiet --no-backup-if-mismatch < "$GPGPUSIM_TESTS_DIR/gpgpu-sim.patch" >>"$log" 2>&1 ||
  fail "the patch does not apply"

# ---- the CUDA pieces: headers, cuobjdump (PyPI), ptxas (the project's toolkit) ----
cuda=$work/home/cuda
mkdir -p "$cuda/bin" "$cuda/include" "$work/wheels"
say PIP "nvidia-cuda-runtime-cu11==11.8.89 (headers), nvidia-cuda-cuobjdump==13.2.51"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$work/wheels" \
  nvidia-cuda-runtime-cu11==11.8.89 nvidia-cuda-cuobjdump==13.2.51 >>"$log" 2>&1 ||
  fail "pip download of the CUDA headers / cuobjdump failed"
python3 - "$work/wheels" "$cuda" <<'PY' >>"$log" 2>&1 || fail "cannot unpack the wheels"
import glob, os, sys, zipfile
wheels, cuda = sys.argv[1:]
for w in glob.glob(os.path.join(wheels, "*.whl")):
    z = zipfile.ZipFile(w)
    for n in z.namelist():
        base = os.path.basename(n)
        if "/include/" in n and base.endswith((".h", ".hpp")):
            open(os.path.join(cuda, "include", base), "wb").write(z.read(n))
        elif n.endswith("/bin/cuobjdump"):
            out = os.path.join(cuda, "bin", "cuobjdump")
            open(out, "wb").write(z.read(n)); os.chmod(out, 0o755)
PY
[ -x "$cuda/bin/cuobjdump" ] && [ -f "$cuda/include/cuda_runtime_api.h" ] || fail "the wheels lack cuobjdump or the headers"
ln -s "$cuda_home/bin/ptxas" "$cuda/bin/ptxas"
# GPGPU-Sim's build reads only the release number from `nvcc --version` (it selects the
# CUDA 11 code paths and names the output directory); the headers above are 11.8.
cat > "$cuda/bin/nvcc" <<'SH'
#!/bin/sh
echo "Cuda compilation tools, release 11.8, V11.8.89 (stand-in for GPGPU-Sim's build)"
SH
chmod +x "$cuda/bin/nvcc"

# ---- build ----
say MAKE "GPGPU-Sim (about 3 min on 2 cores; log: $log)"
( cd "$src" && export CUDA_INSTALL_PATH="$cuda" && set +eu && source setup_environment release >/dev/null &&
  make -j"$(nproc)" ) >>"$log" 2>&1 || fail "the build failed"

# ---- install: the library, its CUDA pieces and the two tested configs, nothing else ----
lib=$(ls -d "$src"/lib/gcc-*/cuda-*/release | head -n 1)
mkdir -p "$work/home/lib" "$work/home/configs"
cp -a "$lib/libcudart.so" "$work/home/lib/"
for v in 12 13; do ln -s libcudart.so "$work/home/lib/libcudart.so.$v"; done
for c in SM7_QV100 SM86_RTX3070; do
  mkdir -p "$work/home/configs/$c"
  cp "$src/configs/tested-cfgs/$c/gpgpusim.config" "$src"/configs/tested-cfgs/$c/*.icnt "$work/home/configs/$c/"
done
cp "$src/COPYRIGHT" "$work/home/"
echo "$GPGPUSIM_COMMIT $(gpgpusim_key)" > "$work/home/.complete"
rm -rf "$GPGPUSIM_HOME"
mv "$work/home" "$GPGPUSIM_HOME"
# Builds of an older patch or script are not used again: keep only this one (60 MB each).
for old in "$GPGPUSIM_CACHE"/*-*; do
  [ "$old" = "$GPGPUSIM_HOME" ] || [ ! -f "$old/.complete" ] || rm -rf "$old"
done
say DONE "$GPGPUSIM_HOME"
