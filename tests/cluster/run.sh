#!/usr/bin/env bash
# make test-cluster: the build on a simulated cluster login node (tests/cluster/image.sh: Debian 12
# minbase, Lmod, the libraries only in /opt prefixes), as a user without root, from a fresh clone
# of HEAD, once per module style (easybuild: CPATH/LIBRARY_PATH/LD_LIBRARY_PATH; spack: PATH,
# PKG_CONFIG_PATH, CMAKE_PREFIX_PATH). In each: a module left unloaded gives the one-line answer;
# the CUDA and the CPU trainer build and start without LD_LIBRARY_PATH; make run trains; the gtest
# suite passes at one rank. The CUDA trainer links NCCL: from its EasyBuild-style module
# (EBROOTNCCL) in the easybuild pass, from PyPI's wheel installed with `pip install --user` in the
# spack pass; the cuda module's toolkit is the host's without its own NCCL (as the two tools' CUDA
# modules: NCCL is a module of its own). Root (chroot, mounts). Prints `cluster: N passed, M failed`.
#
#   bash tests/cluster/run.sh     CLUSTER_STYLES='easybuild spack' CLUSTER_CUDA_ARCH=80
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
REPO=$(pwd)
STYLES=${CLUSTER_STYLES:-easybuild spack}
ARCH=${CLUSTER_CUDA_ARCH:-80}
OUT=${CLUSTER_OUT:-$REPO/build/cluster}
mkdir -p "$OUT"
passes=0 fails=0 t0=$SECONDS
took=''  # the last as_user's wall time, shown by the next pass or fail
pass() { echo "PASS cluster: $*${took:+ [$took s]}"; passes=$((passes + 1)) took=''; }
fail() { echo "FAIL cluster: $*${took:+ [$took s]}"; fails=$((fails + 1)) took=''; }
finish() { echo "cluster: $passes passed, $fails failed ($((SECONDS - t0)) s)"; [ "$fails" = 0 ]; exit $?; }
[ "$(id -u)" = 0 ] || { fail "needs root (chroot, mounts)"; finish; }

ROOT=$(bash tests/cluster/image.sh) || { fail "the login node image could not be built"; finish; }
cuda=$(cd "${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}" 2>/dev/null && pwd -P)
mounts=()
cleanup() { local i; for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null; done; }
trap cleanup EXIT
bind() { mount --bind "$1" "$2" && mounts+=("$2") && { [ -z "${3:-}" ] || mount -o remount,bind,ro "$2"; }; }
mount -t proc proc "$ROOT/proc" && mounts+=("$ROOT/proc")
bind /dev "$ROOT/dev"
bind /dev/shm "$ROOT/dev/shm"
bind /sys "$ROOT/sys" ro # hwloc (Open MPI) reads the CPU topology there
# The host's toolkit at /opt/cuda/13.0-full; /opt/cuda/13.0 (the cuda module's) links to all of it
# but an NCCL of its own (nccl*.h, libnccl*), which some toolkits carry.
cudamod=$ROOT/opt/cuda/13.0
if [ -n "$cuda" ]; then
  mkdir -p "$ROOT/opt/cuda/13.0-full" && bind "$cuda" "$ROOT/opt/cuda/13.0-full" ro
  rm -rf "$cudamod" && mkdir -p "$cudamod/include" "$cudamod/lib"
  for e in "$cuda"/* "$cuda"/include/* "$cuda"/lib/*; do
    rel=${e#"$cuda"/}
    case $rel in include | lib | lib64 | include/nccl* | lib/libnccl*) continue ;; esac
    ln -s "/opt/cuda/13.0-full/$rel" "$cudamod/$rel"
  done
  ln -s lib "$cudamod/lib64"
fi

# A fresh clone, and the user's own IDX files (Fashion-MNIST copied in by hand: the node is offline).
home=$ROOT/home/nnuser
rm -rf "$home/nn"
git clone -q "$REPO" "$home/nn" || { fail "git clone"; finish; }
rev=$(git -C "$home/nn" rev-parse --short HEAD)
mkdir -p "$home/nn/data/mnist"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -s "$src/train-images-idx3-ubyte.gz" ] || src=$(readlink -f data/current)
cp "$src"/*-ubyte* "$home/nn/data/mnist/" || { fail "no IDX files to copy in ($src)"; finish; }
rm -rf "$home/.local"  # the spack pass's pip install --user starts from nothing
chroot "$ROOT" chown -R nnuser:nnuser /home/nnuser
echo "cluster: login node $ROOT, a fresh clone of $rev and the IDX files ready ($((SECONDS - t0)) s)"

as_user() {  # as_user STYLE LOG SCRIPT: bash as nnuser with Lmod and the style's modules in use
  local t=$SECONDS rc=0
  chroot --userspec=nnuser:nnuser "$ROOT" env -i HOME=/home/nnuser USER=nnuser LOGNAME=nnuser \
    PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb bash -c ". /usr/share/lmod/lmod/init/bash
    module use /opt/modules/$1; cd ~/nn; set -x; $3" >"$2" 2>&1 || rc=$?
  took=$((SECONDS - t))
  return "$rc"
}
TRAIN_ARGS='--epochs 1 --train-size 2000 --test-size 500 --hidden 32'
CUDA_TEST_OBJ=cuda/obj/tests/sim/test_sim_runtime.o
# shellcheck disable=SC2016  # run by nnuser's shell, with B its build directory
NCCL_PROBE='f() { sed -n "s/^$1 := //p" "$B/deps.mk"; }
  printf "#include <nccl.h>\nint main() { int v = 0; return ncclGetVersion(&v); }\n" >"$B/nccl_probe.cpp" &&
  g++ "$B/nccl_probe.cpp" $(f DEPS_NCCL_CPP) $(f DEPS_CUDA_INC) -o "$B/nccl_probe" $(f DEPS_NCCL_LD) $(f DEPS_CUDA_LD) -lcudart &&
  env -u LD_LIBRARY_PATH ldd "$B/nccl_probe"'
for style in $STYLES; do
  b=build-$style log=$OUT/$style
  base="module load armadillo openblas zlib cli11 nlohmann_json"
  # 1. GoogleTest not loaded: the tests' own line, and nothing built.
  as_user "$style" "$log-unloaded.log" "$base boost; make BUILD=$b $b/cpu/bin/nn_tests"
  rc=$?
  if [ "$rc" != 0 ] && grep -q '^deps: gtest .*MISSING: needed by the gtest suite' "$log-unloaded.log" &&
     ! grep -q 'CC  ' "$log-unloaded.log"; then
    pass "[$style] googletest unloaded: make $b/cpu/bin/nn_tests stops at once: $(grep -m1 '^deps: gtest' "$log-unloaded.log" | cut -c1-110)..."
  else fail "[$style] googletest unloaded: exit $rc, no one-line answer before compiling ($log-unloaded.log)"; fi
  # 2. The CUDA trainer (make trainer with nvcc: no Boost, no GoogleTest loaded), no LD_LIBRARY_PATH,
  # with NCCL: easybuild, its module (EBROOTNCCL); spack, the wheel by pip install --user (Debian's
  # python3 is externally managed; a cluster's python module is not: PIP_BREAK_SYSTEM_PACKAGES).
  if [ "$style" = easybuild ]; then nccl="module load nccl;" where='/opt/nccl/[0-9.]* (EBROOTNCCL)' nlib='/opt/nccl/'
  else nccl="PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --user --no-index --no-deps /opt/wheels/nvidia_nccl_cu13-*.whl &&"
    where='/home/nnuser/.local/lib/python3[0-9.]*/site-packages/nvidia/nccl (pip wheel nvidia_nccl_cu13-' nlib='/home/nnuser/.local/'; fi
  # nn_train takes libnccl only where its code calls NCCL (the linker drops an unused library): a
  # probe calling ncclGetVersion, linked with build/deps.mk's flags, shows where the loader finds it.
  if as_user "$style" "$log-cuda.log" "$base cuda; $nccl make BUILD=$b CUDA_ARCH=$ARCH trainer && env -u LD_LIBRARY_PATH ldd $b/cuda/bin/nn_train && env -u LD_LIBRARY_PATH $b/cuda/bin/nn_train --help >/dev/null && B=$b; $NCCL_PROBE"; then
    nccl_libs=$(grep -o 'libnccl[.]so[.]2 => [^ ]*' "$log-cuda.log" | sort -u)
    if grep -q '=> not found' "$log-cuda.log"; then fail "[$style] CUDA trainer: ldd finds a library missing without LD_LIBRARY_PATH: $(grep -m3 '=> not found' "$log-cuda.log" | tr -s ' \t\n' ' ')"
    elif ! grep -q "^deps: nccl *found: $where" "$log-cuda.log" || [ -z "$nccl_libs" ] || grep -qv "=> $nlib" <<<"$nccl_libs"; then
      fail "[$style] CUDA trainer: NCCL not found or not linked from $nlib: $(grep -m1 '^deps: nccl' "$log-cuda.log"); ${nccl_libs:-libnccl.so.2 in no ldd output}"
    else pass "[$style] make trainer: the CUDA nn_train (sm_$ARCH) built with Boost and GoogleTest unloaded; ldd resolves all $(grep -c '=> /' "$log-cuda.log") libraries and it starts without LD_LIBRARY_PATH; $(grep -m1 '^deps: nccl' "$log-cuda.log" | tr -s ' '); $nccl_libs"; fi
  else fail "[$style] make trainer (CUDA): $(tail -3 "$log-cuda.log" | tr '\n' ' ')"; fi
  # 3. The CPU trainer and make run (cuda unloaded: make run builds the emulator build's trainer).
  if as_user "$style" "$log-run.log" "$base boost; make BUILD=$b $b/cpu/bin/nn_train && env -u LD_LIBRARY_PATH ldd $b/cpu/bin/nn_train && env -u LD_LIBRARY_PATH $b/cpu/bin/nn_train --help >/dev/null && make BUILD=$b run RUN_ARGS='$TRAIN_ARGS'" &&
     grep -q 'test precision' "$log-run.log" && ! grep -q '=> not found' "$log-run.log"; then
    pass "[$style] CPU nn_train built, ldd resolves all $(grep -c '=> /' "$log-run.log") libraries and it starts without LD_LIBRARY_PATH; make run: $(grep -m1 'test precision' "$log-run.log")"
  else fail "[$style] CPU trainer / make run: $(tail -3 "$log-run.log" | tr '\n' ' ')"; fi
  # 4. The gtest suite at one rank (googletest loaded).
  if as_user "$style" "$log-tests.log" "$base boost googletest; make BUILD=$b $b/cpu/bin/nn_tests && SIM_WORKERS=2 mpirun -np 1 $b/cpu/bin/nn_tests" &&
     grep -q '\[  PASSED  \]' "$log-tests.log"; then
    pass "[$style] gtest suite at one rank: $(grep -m1 '\[  PASSED  \]' "$log-tests.log")"
  else fail "[$style] gtest suite: $(grep -E 'FAILED|error' "$log-tests.log" | head -3 | tr '\n' ' ')"; fi
  # 5. nvcc finds GoogleTest in its prefix and warns nothing from its macros: one CUDA test
  # object with 12 TESTs (where the prefix was an ordinary include directory, nvcc warned
  # #177-D once per TEST).
  if as_user "$style" "$log-cudatest.log" "$base googletest cuda; make BUILD=$b CUDA_ARCH=$ARCH V=1 $b/$CUDA_TEST_OBJ"; then
    n177=$(grep -c '#177-D' "$log-cudatest.log")
    if [ "$n177" = 0 ]; then pass "[$style] nvcc compiled $CUDA_TEST_OBJ (GoogleTest from its module) with 0 warnings #177-D"
    else fail "[$style] nvcc warned #177-D $n177 times compiling $CUDA_TEST_OBJ ($log-cudatest.log)"; fi
  else fail "[$style] CUDA test object with GoogleTest from its module: $(grep -m3 -E 'error|fatal' "$log-cudatest.log" | tr '\n' ' ')"; fi
done
finish
