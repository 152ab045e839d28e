#!/usr/bin/env bash
# shellcheck disable=SC2317  # the checks are called indirectly, through need() and check_all
# Checks the build dependencies by what the build needs (a header, a library, a tool), not
# by package name: the base through .ci/deps.sh, the same probes and flags as the build, so it
# also works with cluster modules and prefixes. On a Debian-family system as root it installs
# what is missing with apt-get; elsewhere it prints one line per dependency (found where, or
# missing and needed by which targets) and fails. Run by `make setup`; tested by make test-build.
#
#   bash .ci/setup.sh [--check | --auto] [COMPONENT...]
#
# --auto (make, before probing): install as root on Debian, else do nothing; never fails.
# NCCL (optional, the CUDA build's --comm nccl), where nvcc exists and .ci/deps.sh finds none: PyPI's
# nvidia-nccl-cu<nvcc's CUDA major> by pip install --target $NN_BUILD/pip (no root, no venv: where
# .ci/deps.sh looks; about 200 MB), once; root or not, but not with --check, nor as a non-root
# --auto, nor with NN_NCCL_PIP=0. Offline or without pip: one line, and the build goes on without it.
# No component: `base`, what `make` builds with. The optional components, each for the make
# targets that need more than the base build (the Makefile runs them through the stamps
# $(BUILD)/.setup-COMPONENT, `make setup-COMPONENT`):
#   plots      matplotlib for PLOTS_PYTHON (make plots: bench/plots.py)
#   scaling    the same (make scaling: bench/scaling_plot.py)
#   peer       numpy and PyTorch for PLOTS_PYTHON, python3's venv (make peer: bench/peer_compare.sh;
#              the PyPI peers go into venvs that bench/peer_venvs.sh creates)
#   fuzz       clang that links -fsanitize=fuzzer,address,undefined with zlib (make fuzz)
#   slurm      Slurm's daemons and client, munge (make test-slurm)
#   gpgpusim   GPGPU-Sim's build tools: bison flex makedepend patch git xz pip zlib libGL
#   multinode  ip (network namespaces), unshare, nsenter, ps/pgrep/pkill, and slurm's
#   gemmlab    BLIS and oneDNN's libraries, python3's venv (make cpu-gemm-lab: bench/cpu_gemm/lab.sh,
#              which installs Intel MKL from PyPI into a venv of its own)
#   nsys       Nsight Systems (nsys, QdstrmImporter; make test-nsys): Debian's nsight-systems from
#              the non-free component, installed through a private source list and package lists
#              (the machine's apt configuration is left as it is)
# PLOTS_PYTHON (default /usr/bin/python3): the python of plots, scaling and peer; Debian's
# packages serve only the system interpreter, so for another one setup names the pip module.
# --check: check only, install nothing (exit 1 when something is missing). --list: the
# component names. Unknown component: one line, exit 2.
set -euo pipefail

COMPONENTS=(base plots scaling peer fuzz slurm gpgpusim multinode gemmlab nsys)
CXX=${CXX:-g++}
MPICXX=${MPICXX:-mpicxx}
CLANGXX=${CLANGXX:-clang++}
PY=${PLOTS_PYTHON:-/usr/bin/python3}
OPTIONAL_PKGS=(dataset-fashion-mnist ?libdnnl-dev)  # missing and not installable: a note, not a failure

check_only=
auto=
selected=()
for arg in "$@"; do
  case $arg in
    --check) check_only=yes ;;
    --auto) auto=yes ;;
    --list) echo "${COMPONENTS[*]}"; exit 0 ;;
    *)
      if [[ " ${COMPONENTS[*]} " != *" $arg "* ]]; then
        echo "setup: unknown component '$arg' (known: ${COMPONENTS[*]})" >&2
        exit 2
      fi
      [[ " ${selected[*]} " == *" $arg "* ]] || selected+=("$arg") ;;
  esac
done
[ ${#selected[@]} -gt 0 ] || selected=(base)
# Messages: `setup: ...` for the base (as always), `setup: plots: ...` for a component.
if [ "${selected[*]}" = base ]; then tag="setup:"; else tag="setup: $(IFS=+; echo "${selected[*]}"):"; fi

missing_pkgs=()    # Debian packages to install (`?name`: only where the distribution has it;
                   # `!name`: from Debian's non-free component, install_nonfree)
missing_desc=()    # human-readable list for non-Debian systems
missing_manual=()  # what no Debian package provides (another python, say): always a failure

have_cmd() { command -v "$1" >/dev/null 2>&1; }

# Does `#include <$1>` compile and, if $2 is given, does linking with $2 work?
have_lib() {
  local header=$1 tmp link=()
  read -r -a link <<<"${2:-}"
  tmp=$(mktemp -d)
  printf '#include <%s>\nint main() { return 0; }\n' "$header" >"$tmp/t.cpp"
  if "$CXX" -std=c++20 "$tmp/t.cpp" -o "$tmp/t" "${link[@]}" >/dev/null 2>&1; then
    rm -rf "$tmp"; return 0
  fi
  rm -rf "$tmp"; return 1
}

# Does linking an empty program with $1 (e.g. -lGL) work?
have_link() {
  local tmp rc=0
  tmp=$(mktemp -d)
  printf 'int main() { return 0; }\n' >"$tmp/t.cpp"
  "$CXX" "$tmp/t.cpp" -o "$tmp/t" "$1" >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"; return "$rc"
}

# Can $CLANGXX link a libFuzzer + sanitizer program using zlib? (clang alone is not enough:
# on Debian 12 the libFuzzer runtime is in libclang-rt-14-dev, reached via libclang-rt-dev.)
have_fuzzer_toolchain() {
  local tmp rc=0
  tmp=$(mktemp -d)
  printf '%s\n' '#include <zlib.h>' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {' \
    '  return static_cast<int>(crc32(0, d, static_cast<unsigned>(n)) & 0); }' >"$tmp/probe.cpp"
  "$CLANGXX" -fsanitize=fuzzer,address,undefined "$tmp/probe.cpp" -lz -o "$tmp/probe" >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"; return "$rc"
}

have_module() { "$PY" -c "import $1" >/dev/null 2>&1; }
have_pip() { python3 -m pip --version >/dev/null 2>&1; }  # tests/gpgpusim/build.sh: python3 -m pip
# Debian's python3-* packages serve the system interpreter (prefix /usr), not a venv's.
system_python() { [ "$("$PY" -c 'import sys; print(sys.prefix)' 2>/dev/null)" = /usr ]; }

need() {  # need <debian-package(s)> <description> <check command...>
  local desc=$2 p pkgs=()
  read -r -a pkgs <<<"$1"; shift 2
  "$@" && return 0
  for p in "${pkgs[@]}"; do [[ " ${missing_pkgs[*]} " == *" $p "* ]] || missing_pkgs+=("$p"); done
  pkgs=("${pkgs[@]//\?/}")
  missing_desc+=("$desc (${pkgs[*]//\!/})")
}

need_module() {  # need_module <module> <debian-package> <description>
  if system_python; then
    need "$2" "$3 for $PY" have_module "$1"
  elif ! have_module "$1"; then
    missing_manual+=("$3: $PY cannot import $1 (pip install $1 into it, or PLOTS_PYTHON=/usr/bin/python3)")
  fi
}

# The Debian packages of each dependency .ci/deps.sh probes (cuda and nvtx3: none).
deb_of() {
  case $1 in
    cxx) echo g++ ;; mpi) echo "openmpi-bin libopenmpi-dev" ;; python3) echo python3 ;;
    armadillo) echo libarmadillo-dev ;; openblas) echo libopenblas-dev ;; zlib) echo zlib1g-dev ;;
    cli11) echo libcli11-dev ;; json) echo nlohmann-json3-dev ;; gtest) echo libgtest-dev ;;
    boost_context) echo libboost-context-dev ;; onednn) echo libdnnl-dev ;;
  esac
}
DEPS_REPORT='' NCCL_STATE='' CUDA_MAJOR=''
check_base() {
  local tmp name st line pkgs
  tmp=$(mktemp -d)
  CXX=$CXX MPICXX=$MPICXX DNNL=${NN_DNNL:-auto} bash "$(dirname "$0")/deps.sh" probe "$tmp/deps.mk" >/dev/null
  DEPS_REPORT=$(cut -d'|' -f3- "$tmp/deps.mk.txt")
  NCCL_STATE=$(grep -m1 '^nccl|' "$tmp/deps.mk.txt" | cut -d'|' -f2)
  CUDA_MAJOR=$(sed -n 's/^DEPS_CUDA_VERSION := \([0-9]*\).*/\1/p' "$tmp/deps.mk")
  while IFS='|' read -r name st line; do
    pkgs=$(deb_of "$name")
    [ -n "$pkgs" ] || continue
    case $st in
      found) ;;
      # oneDNN is optional (DNNL=auto): installed where apt-get can, never a failure.
      off) [ "$name" != onednn ] || [ "${NN_DNNL:-auto}" = 0 ] || need "?$pkgs" "$line" false ;;
      *) need "$pkgs" "$line" false ;;
    esac
  done <"$tmp/deps.mk.txt"
  rm -rf "$tmp"
  # Offline data: Debian ships Fashion-MNIST in IDX format (make data falls back to it).
  need dataset-fashion-mnist "Fashion-MNIST (offline data)"     test -d /usr/share/datasets/fashion-mnist
}
# PyPI's NCCL wheel for nvcc's CUDA into $NN_BUILD/pip (see the header); never fails.
install_nccl() {
  local dir=${NN_BUILD:-build}/pip pkg
  pkg=nvidia-nccl-cu$CUDA_MAJOR
  [ "${NN_NCCL_PIP:-1}" != 0 ] && [ -n "$CUDA_MAJOR" ] && [ "$NCCL_STATE" != found ] || return 0
  if compgen -G "$dir/nvidia_nccl_cu$CUDA_MAJOR-*.dist-info" >/dev/null && [ -e "$dir/nvidia/nccl/include/nccl.h" ]; then return 0; fi
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "$tag nccl: no pip for python3 (apt-get install python3-pip, or pip install --user $pkg): the CUDA build goes on without NCCL (--comm nccl refused)"
    return 0
  fi
  echo "$tag nccl: pip install $pkg into $dir (about 200 MB, once)"
  if PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --no-deps --upgrade \
      --timeout 20 --retries 1 --target "$dir" "$pkg" >"${TMPDIR:-/tmp}/nn-setup-nccl.log" 2>&1; then
    echo "$tag nccl: $(compgen -G "$dir/nvidia_nccl_cu$CUDA_MAJOR-*.dist-info" | head -1 | sed 's#.*/##; s#\.dist-info$##') in $dir"
  else
    echo "$tag nccl: pip could not install $pkg (offline? $(tail -1 "${TMPDIR:-/tmp}/nn-setup-nccl.log" | cut -c1-120)): the CUDA build goes on without NCCL (--comm nccl refused)"
  fi
  return 0
}
check_plots() {
  if [ "$PY" = /usr/bin/python3 ]; then need python3 "python3" have_cmd "$PY"; fi
  need_module matplotlib python3-matplotlib "matplotlib"
}
check_scaling() { check_plots; }  # bench/scaling.sh itself: python3's standard library, awk
check_peer() {
  if [ "$PY" = /usr/bin/python3 ]; then need python3 "python3" have_cmd "$PY"; fi
  need_module numpy python3-numpy "numpy"
  need_module torch python3-torch "PyTorch"
  need python3-venv "python3 -m venv (the PyPI peers' venvs)" python3 -c 'import ensurepip, venv' 
}
check_fuzz() {
  # Debian 12 splits compiler-rt (libFuzzer, sanitizers) out of clang; Ubuntu 22.04 does not.
  need "clang zlib1g-dev ?libclang-rt-dev" "$CLANGXX with libFuzzer, ASan, UBSan and zlib" have_fuzzer_toolchain
}
check_slurm() {
  local c
  for c in slurmctld slurmd sbatch srun scontrol squeue scancel sinfo; do
    need slurm-wlm "Slurm ($c)" have_cmd "$c"
  done
  for c in munged munge; do need munge "munge ($c)" have_cmd "$c"; done
}
check_gpgpusim() {  # what tests/gpgpusim/build.sh uses besides the CUDA toolkit
  need bison      "bison"                    have_cmd bison
  need flex       "flex"                     have_cmd flex
  need xutils-dev "makedepend"               have_cmd makedepend
  need make       "make"                     have_cmd make
  need g++        "g++"                      have_cmd g++
  need xz-utils   "xz"                       have_cmd xz
  need patch      "patch"                    have_cmd patch
  need git        "git (the source archive's commit)" have_cmd git
  need python3-pip "pip (the CUDA 11.8 headers, cuobjdump)" have_pip
  need zlib1g-dev "zlib"                     have_lib zlib.h -lz
  need libgl-dev  "libGL"                    have_link -lGL
}
check_multinode() {
  need iproute2   "ip (network namespaces)"  have_cmd ip
  need util-linux "unshare"                  have_cmd unshare
  need util-linux "nsenter"                  have_cmd nsenter
  local c
  for c in ps pgrep pkill; do need procps "$c" have_cmd "$c"; done
  check_slurm
}

check_gemmlab() {
  local dir
  dir=/usr/lib/$("$CXX" -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  need libblis4-pthread "BLIS (pthreads)"        test -e "$dir/blis-pthread/libblis.so.4"
  need libdnnl2         "oneDNN"                 test -e "$dir/libdnnl.so.2"
  need python3-venv     "python3 -m venv (MKL)"  python3 -c 'import ensurepip, venv'
}

check_nsys() {  # nsys.sh: nsys profile/stats, and QdstrmImporter where nsys cannot import itself
  need '!nsight-systems' "Nsight Systems (nsys)" have_cmd nsys
}

# install_nonfree PKG...: Debian's non-free packages without touching the machine's apt setup:
# a private source list (the mirror and release the machine already uses, main contrib
# non-free) and private package lists, removed afterwards; apt's caches are not rewritten.
install_nonfree() {
  local codename uri dir rc=0 keyring=/usr/share/keyrings/debian-archive-keyring.gpg opts=()
  # shellcheck source=/dev/null
  codename=$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || { echo "$tag cannot tell the Debian release (VERSION_CODENAME in /etc/os-release)" >&2; return 1; }
  # shellcheck disable=SC2016  # $(REPO_URI): apt's own fields, not the shell's
  uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
    awk -v c="$codename" '$2 == c && $1 !~ /security/ { print $1; exit }')
  uri=${uri:-http://deb.debian.org/debian/}
  dir=$(mktemp -d "${TMPDIR:-/tmp}/nn-setup-apt.XXXXXX")
  mkdir -p "$dir/lists/partial"
  chmod 755 "$dir" "$dir/lists"  # apt downloads as _apt, as into /var/lib/apt/lists
  chown _apt "$dir/lists/partial" 2>/dev/null || true
  [ -f "$keyring" ] && opts=("[signed-by=$keyring]")
  echo "deb ${opts[*]} $uri $codename main contrib non-free" >"$dir/sources.list"
  opts=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$dir/lists"
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
  echo "$tag installing from $uri $codename non-free (private source list): $*"
  if ! apt-get "${opts[@]}" update -qq; then rc=1
  elif ! apt-get "${opts[@]}" install -y -qq --no-install-recommends "$@" >/dev/null \
      2> >(grep -v '^debconf: delaying package configuration' >&2); then rc=1
  fi
  rm -rf "$dir"
  return "$rc"
}

check_all() {
  missing_pkgs=(); missing_desc=(); missing_manual=()
  local c
  for c in "${selected[@]}"; do "check_$c"; done
}

# True when all that is missing is optional (the offline data).
only_optional() {
  [ ${#missing_manual[@]} -eq 0 ] || return 1
  local p
  for p in "${missing_pkgs[@]}"; do [[ " ${OPTIONAL_PKGS[*]} " == *" $p "* ]] || return 1; done
}

report_missing() {
  local d m
  if [ -n "$DEPS_REPORT" ]; then
    echo "$DEPS_REPORT"
    for d in "${missing_desc[@]}"; do [[ $d == deps:* ]] || echo "$tag missing: $d"; done
  elif [ ${#missing_desc[@]} -gt 0 ]; then
    echo "$tag missing: ${missing_desc[*]}"
  fi
  for m in "${missing_manual[@]}"; do echo "$tag missing: $m"; done
}

if [ -n "$auto" ]; then
  { [ "$(id -u)" -eq 0 ] && have_cmd apt-get; } || exit 0
fi
check_all
[ -n "$check_only" ] || [[ " ${selected[*]} " != *" base "* ]] || install_nccl
[ ${#missing_pkgs[@]} -eq 0 ] && [ ${#missing_manual[@]} -eq 0 ] && exit 0
[ -n "$auto" ] && only_optional && ! have_cmd apt-get && exit 0

report_missing
if [ -z "$check_only" ] && [ ${#missing_pkgs[@]} -gt 0 ] && have_cmd apt-get && [ "$(id -u)" -eq 0 ]; then
  # One install at a time: `make -j` may run several components at once (dpkg's lock).
  if have_cmd flock; then exec 9>"${TMPDIR:-/tmp}/nn-setup.lock"; flock 9; check_all; fi
  if [ ${#missing_pkgs[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    pkgs=() nonfree=()
    for p in "${missing_pkgs[@]}"; do
      case $p in
        \!*) nonfree+=("${p#\!}") ;;
        *) pkgs+=("$p") ;;
      esac
    done
    if [ ${#pkgs[@]} -gt 0 ]; then
      apt-get update -qq
      for i in "${!pkgs[@]}"; do
        p=${pkgs[$i]}
        case $p in \?*) if apt-cache show "${p#\?}" >/dev/null 2>&1; then pkgs[i]=${p#\?}; else unset "pkgs[$i]"; fi ;; esac
      done
      echo "$tag installing with apt-get: ${pkgs[*]}"
      # (debconf's "delaying package configuration, since apt-utils is not installed" is noise)
      apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null \
        2> >(grep -v '^debconf: delaying package configuration' >&2)
    fi
    [ ${#nonfree[@]} = 0 ] || install_nonfree "${nonfree[@]}" || true
    check_all
  fi
  if [ ${#missing_pkgs[@]} -eq 0 ] && [ ${#missing_manual[@]} -eq 0 ]; then
    echo "$tag all dependencies present"; exit 0
  fi
  if [ ${#missing_desc[@]} -gt 0 ]; then echo "$tag still missing after apt-get: ${missing_desc[*]}" >&2; fi
  for m in "${missing_manual[@]}"; do echo "$tag still missing: $m" >&2; done
  exit 1
fi

if [ ${#missing_pkgs[@]} -gt 0 ]; then
  {
    if [ -n "$check_only" ]; then
      echo "$tag --check: nothing installed. Install:"
    else
      echo "$tag cannot install automatically (needs root and apt-get). Install:"
    fi
    pkgs_hint=("${missing_pkgs[@]//\?/}")
    echo "  Debian/Ubuntu:  sudo apt-get install ${pkgs_hint[*]//\!/}"
    [[ " ${missing_pkgs[*]} " != *" !"* ]] ||
      echo "                  (nsight-systems: Debian's non-free component, or NVIDIA's installer; on a cluster 'module load nsight-systems')"
    if [[ " ${selected[*]} " == *" base "* ]]; then
      echo "  Without root:   'module load' what the lines above name (Lmod, Spack or EasyBuild modules),"
      echo "                  or point the build at a prefix: NAME_ROOT=PREFIX, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH,"
      echo "                  CPATH + LIBRARY_PATH, or CPPFLAGS + LDFLAGS (docs/cluster.md#building-on-a-cluster)."
      echo "                  Each target needs only its own: 'make trainer' no GoogleTest, the CUDA trainer no Boost."
      echo "  The Fashion-MNIST fallback is optional when 'make data' can download MNIST."
    fi
  } >&2
fi
# Only the data package is optional for building; everything else stops the build.
if only_optional; then exit 0; fi
exit 1
