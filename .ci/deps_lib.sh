# shellcheck shell=bash
# The dependency probes of .ci/deps.sh (sourced by it): where each dependency is, the flags
# that use it, one report line each. Tested by tests/cluster/ (module prefixes) and make test-build.

CXX=${CXX:-g++}
MPICXX=${MPICXX:-mpicxx}
MULTIARCH=$("$CXX" -print-multiarch 2>/dev/null || true)
# name|header|libraries|pkg-config names|root stems (<STEM>_ROOT, <STEM>_DIR, EBROOT<STEM>, and
# CMake's <Name>_DIR)|CMake names|role
DEPS_TABLE='armadillo|armadillo|-larmadillo|armadillo|ARMADILLO|Armadillo|trainer
openblas|cblas.h|-lopenblas|openblas|OPENBLAS|OpenBLAS|trainer
zlib|zlib.h|-lz|zlib|ZLIB|ZLIB|trainer
cli11|CLI/CLI.hpp||CLI11|CLI11|CLI11|trainer
json|nlohmann/json.hpp||nlohmann_json|NLOHMANN_JSON JSON|nlohmann_json|trainer
gtest|gtest/gtest.h|-lgtest -pthread|gtest|GTEST GOOGLETEST|GTest|tests
boost_context|boost/context/detail/fcontext.hpp|-lboost_context||BOOST BOOST_CONTEXT|Boost|emulator
onednn|dnnl.h|-ldnnl|dnnl|ONEDNN DNNL|dnnl|onednn'
MIN_GCC=11
MIN_CUDA=12.0

# What each role is for, in the missing lines.
role_users() {
  case $1 in
    toolchain | trainer) echo "every build (make trainer, make run, make test)" ;;
    emulator) echo "the emulator build (make cpu, make test; make trainer and make run without nvcc)" ;;
    tests) echo "the gtest suite (make test, make cpu)" ;;
    cuda) echo "the CUDA build (make cuda; make trainer where nvcc exists)" ;;
    onednn) echo "--cpu-gemm onednn (DNNL=1); by default the build leaves it out" ;;
    nccl) echo "--comm nccl (the CUDA build); without it the build leaves it out" ;;
  esac
}
role_deps() {
  case $1 in
    toolchain) echo "cxx mpi" ;;
    trainer) echo "cxx mpi armadillo openblas zlib cli11 json" ;;
    emulator) echo "python3 boost_context" ;;
    tests) echo "gtest" ;;
    cuda) echo "cuda" ;;
    onednn) echo "onednn" ;;
    nccl) echo "nccl" ;;
    *) return 1 ;;
  esac
}

is_system_dir() {
  case $1 in /usr/lib | /usr/lib64 | /lib | /lib64 | /usr/lib/"$MULTIARCH" | /lib/"$MULTIARCH" | /usr/include) return 0 ;; esac
  return 1
}
# Canonical directory (symbolic links and .. resolved), or the argument as it is.
canon() { (cd "$1" 2>/dev/null && pwd -P) || echo "$1"; }

# compiles HEADER with CPPFLAGS, then links LIBS with LDFLAGS; 0 when both work. TRY_CPP and
# TRY_LD (CUDA's include directory and cudart, for NCCL) come after them, TRY_BODY is main's body.
try_build() {  # try_build HEADER CPP LD LIBS
  local tmp rc=0 cpp=() ld=() libs=() ucpp=() uld=()
  read -r -a cpp <<<"$2 ${TRY_CPP:-}"; read -r -a ld <<<"$3"; read -r -a libs <<<"$4 ${TRY_LD:-}"
  read -r -a ucpp <<<"${CPPFLAGS:-}"; read -r -a uld <<<"${LDFLAGS:-}"
  tmp=$(mktemp -d)
  printf '#include <%s>\nint main() { %s return 0; }\n' "$1" "${TRY_BODY:-}" >"$tmp/t.cpp"
  "$CXX" -std=c++20 "${ucpp[@]}" "${cpp[@]}" "$tmp/t.cpp" -o "$tmp/t" "${uld[@]}" "${ld[@]}" "${libs[@]}" >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"
  return "$rc"
}

# The prefix at or above DIR (up to 4 levels: CMake's lib/cmake/<Name>) holding include/HEADER.
prefix_of() {
  local d=$1 i
  for i in 0 1 2 3 4; do
    [ -e "$d/include/$2" ] && { canon "$d"; return 0; }
    d=$(dirname "$d")
  done
  return 1
}
# The library directories of PREFIX that hold any of LIBS' libraries.
lib_dirs_of() {
  local p=$1 l d out=()
  for l in $2; do
    [[ $l == -l* ]] || continue
    for d in "$p/lib64" "$p/lib" "$p/lib/$MULTIARCH"; do
      if compgen -G "$d/lib${l#-l}.*" >/dev/null; then
        d=$(canon "$d"); [[ " ${out[*]} " == *" $d "* ]] || out+=("$d"); break
      fi
    done
  done
  echo "${out[*]}"
}
# -L and rpath flags for directories (none for the system's).
ld_for_dirs() {
  local d out=()
  for d in "$@"; do d=$(canon "$d"); is_system_dir "$d" || out+=("-L$d" "-Wl,-rpath,$d"); done
  echo "${out[*]}"
}
# Where the compiler found a library on its own (LDFLAGS' -L, LIBRARY_PATH, its defaults).
compiler_lib_dir() {
  local lib=$1 d f
  for d in $(printf '%s\n' ${LDFLAGS:-} | sed -n 's/^-L//p') ${LIBRARY_PATH:+${LIBRARY_PATH//:/ }}; do
    compgen -G "$d/lib$lib.*" >/dev/null && { canon "$d"; return; }
  done
  f=$("$CXX" -print-file-name="lib$lib.so")
  [ "$f" != "lib$lib.so" ] && canon "$(dirname "$f")"
}
# Where the compiler found a header on its own (CPATH, CPPFLAGS, its defaults).
compiler_header_dir() {
  local ucpp=() f
  read -r -a ucpp <<<"${CPPFLAGS:-} ${TRY_CPP:-}"
  f=$(printf '#include <%s>\n' "$1" | "$CXX" -std=c++20 "${ucpp[@]}" -x c++ -M - 2>/dev/null | tr ' \\' '\n\n' | grep -m1 "/$1\$")
  [ -n "$f" ] && canon "${f%/"$1"}"
}

# Sets FOUND_CPP FOUND_LD FOUND_WHERE for one table row, or returns 1.
find_dep() {
  local name=$1 header=$2 libs=$3 pcs=$4 stems=$5 cmakes=$6 v p pc dirs hdir
  local candidates=()
  for v in $stems; do candidates+=("${v}_ROOT" "${v}_DIR" "EBROOT$v"); done
  for v in $cmakes; do candidates+=("${v}_DIR" "${v}_ROOT"); done
  for v in "${candidates[@]}"; do
    [ -n "${!v:-}" ] || continue
    if ! p=$(prefix_of "${!v}" "$header"); then FOUND_WHERE="$v=${!v} has no include/$header"; return 1; fi
    dirs=$(lib_dirs_of "$p" "$libs")
    # shellcheck disable=SC2086
    FOUND_CPP="-isystem $p/include" FOUND_LD=$(ld_for_dirs $dirs) FOUND_WHERE="$p ($v)"
    try_build "$header" "$FOUND_CPP" "$FOUND_LD" "$libs" && return 0
    FOUND_WHERE="$v=${!v}: include/$header found, but compiling or linking ${libs:-it} failed"; return 1
  done
  if command -v pkg-config >/dev/null 2>&1; then
    for pc in $pcs; do
      pkg-config --exists "$pc" 2>/dev/null || continue
      FOUND_CPP=$(pkg-config --cflags-only-I "$pc" | sed 's/-I/-isystem /g')
      FOUND_LD=$(ld_for_dirs $(pkg-config --libs-only-L "$pc" | sed 's/-L//g'))
      p=$(pkg-config --variable=prefix "$pc"); [ -n "$p" ] || p=$(awk '{print $2; exit}' <<<"$FOUND_CPP")
      [ -n "$p" ] || p=$(compiler_header_dir "$header")
      try_build "$header" "$FOUND_CPP" "$FOUND_LD" "$libs" && { FOUND_WHERE="${p:-?} (pkg-config $pc)"; return 0; }
    done
  fi
  for p in ${CMAKE_PREFIX_PATH:+${CMAKE_PREFIX_PATH//:/ }}; do
    [ -e "$p/include/$header" ] || continue
    p=$(canon "$p") dirs=$(lib_dirs_of "$p" "$libs")
    # shellcheck disable=SC2086
    FOUND_CPP="-isystem $p/include" FOUND_LD=$(ld_for_dirs $dirs)
    try_build "$header" "$FOUND_CPP" "$FOUND_LD" "$libs" && { FOUND_WHERE="$p (CMAKE_PREFIX_PATH)"; return 0; }
  done
  try_build "$header" "" "" "$libs" || { FOUND_WHERE=""; return 1; }
  # Found by the compiler itself: a directory outside the system's (CPATH, CPPFLAGS) becomes
  # -isystem (nvcc then treats it as a system header: no warnings from it); a library directory
  # outside the system's (LIBRARY_PATH, LDFLAGS) gets its rpath.
  hdir=$(compiler_header_dir "$header")
  FOUND_CPP='' FOUND_LD='' FOUND_WHERE="${hdir:-the default paths}"
  [ -z "$hdir" ] || is_system_dir "$hdir" || [ "$hdir" = /usr/local/include ] || FOUND_CPP="-isystem $hdir"
  dirs=''
  for v in $libs; do [[ $v == -l* ]] && dirs+=" $(compiler_lib_dir "${v#-l}")"; done
  # shellcheck disable=SC2086
  FOUND_LD=$(ld_for_dirs $dirs)
  return 0
}

# ---- the toolchain: C++20 with from_chars(double) (g++ 11), the MPI wrapper ----
check_cxx() {
  local v tmp rc=0
  command -v "$CXX" >/dev/null 2>&1 || { LINE="MISSING: no compiler $CXX (module load gcc, or CXX=...)"; return 1; }
  v=$("$CXX" -dumpfullversion -dumpversion 2>/dev/null | head -1)
  tmp=$(mktemp -d)
  printf '%s\n' '#include <charconv>' '#include <span>' \
    'int main() { double d = 0; const char s[] = "1.5"; return std::from_chars(s, s + 3, d).ec == std::errc{} ? 0 : 1; }' >"$tmp/t.cpp"
  "$CXX" -std=c++20 "$tmp/t.cpp" -o "$tmp/t" >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"
  if [ "$rc" = 1 ]; then
    LINE="TOO OLD: $CXX $v cannot compile C++20 with std::from_chars for double; the build needs g++ $MIN_GCC or newer (module load gcc/$MIN_GCC or newer, then make clean)"
    return 1
  fi
  LINE="$CXX $v ($(command -v "$CXX")): C++20 with from_chars(double), g++ $MIN_GCC or newer"
}
check_mpi() {
  local tmp rc=0 v dirs=()
  command -v "$MPICXX" >/dev/null 2>&1 || { LINE="MISSING: no MPI C++ wrapper $MPICXX on PATH (module load openmpi, or MPICXX=...)"; return 1; }
  tmp=$(mktemp -d)
  printf '%s\n' '#include <mpi.h>' 'int main(int c, char** v) { MPI_Init(&c, &v); return MPI_Finalize(); }' >"$tmp/t.cpp"
  # shellcheck disable=SC2086
  OMPI_CXX=$CXX "$MPICXX" -std=c++20 ${CPPFLAGS:-} "$tmp/t.cpp" -o "$tmp/t" ${LDFLAGS:-} >/dev/null 2>&1 || rc=1
  rm -rf "$tmp"
  [ "$rc" = 0 ] || { LINE="BROKEN: $MPICXX cannot build an MPI program with $CXX"; return 1; }
  v=$("$MPICXX" --showme:version 2>/dev/null | head -1 | sed 's/^mpicxx: *//')
  [ -n "$v" ] || v=$("$MPICXX" -show 2>/dev/null | awk '{print $1}')
  read -r -a dirs <<<"$("$MPICXX" --showme:libdirs 2>/dev/null)"
  MPI_LD=$(ld_for_dirs "${dirs[@]}")
  LINE="$(command -v "$MPICXX")${v:+ ($v)}"
}

# ---- CUDA: nvcc >= 12, cudart, cuBLAS (NVHPC: in math_libs), the architectures nvcc targets ----
check_cuda() {
  local nvcc home v libdirs=() d mathlibs
  nvcc=${NVCC:-}
  if [ -z "$nvcc" ]; then
    if [ -n "${CUDA_HOME:-}" ]; then nvcc=$CUDA_HOME/bin/nvcc; else nvcc=$(command -v nvcc 2>/dev/null); fi
  fi
  [ -n "$nvcc" ] && command -v "$nvcc" >/dev/null 2>&1 ||
    { LINE="not found: no nvcc (module load cuda, or CUDA_HOME=...): the CPU trainer only"; return 2; }
  nvcc=$(command -v "$nvcc")
  home=${CUDA_HOME:-$(canon "$(dirname "$nvcc")/..")}
  v=$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9]*\).*/\1/p')
  CUDA_VERSION=$v
  if [ "${v%%.*}" -lt "${MIN_CUDA%%.*}" ] 2>/dev/null; then
    LINE="TOO OLD: $nvcc is CUDA $v; the CUDA build needs CUDA $MIN_CUDA or newer (C++20 in nvcc, 3-argument cudaGraphInstantiate, sm_90a)"
    return 1
  fi
  CUDA_ARCHS=$("$nvcc" --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\([0-9]*\)$/\1/p' | tr '\n' ' ')
  for d in "$home/lib64" "$home/lib" "$home/targets/$(uname -m)-linux/lib"; do
    [ -e "$d/libcudart.so" ] && { libdirs+=("$(canon "$d")"); break; }
  done
  [ ${#libdirs[@]} -gt 0 ] || { LINE="BROKEN: CUDA $v at $home has no libcudart.so in lib64/ or lib/"; return 1; }
  CUDA_INC="-I$home/include"
  if ! compgen -G "${libdirs[0]}/libcublas.so*" >/dev/null; then
    # NVHPC: .../<version>/cuda/ beside .../<version>/math_libs/
    mathlibs=$(canon "$home/../math_libs")
    if [ -e "$mathlibs/lib64/libcublas.so" ]; then
      libdirs+=("$(canon "$mathlibs/lib64")"); CUDA_INC+=" -I$mathlibs/include"
    else
      LINE="BROKEN: CUDA $v at $home: no cuBLAS (lib64/libcublas.so, or NVHPC's ../math_libs)"; return 1
    fi
  fi
  CUDA_HOME_FOUND=$home NVCC_FOUND=$nvcc CUDA_LIBDIRS="${libdirs[*]}"
  NVTX_FOUND=$([ -d "$home/include/nvtx3" ] && echo "$home/include/nvtx3")
  LINE="$home (CUDA $v, nvcc $nvcc; cuBLAS in ${libdirs[*]: -1}; targets sm_${CUDA_ARCHS// / sm_})"
  LINE=${LINE% sm_)}")"
}

# ---- NCCL (optional, the CUDA build's --comm nccl): the table's places, then pip's wheel ----
# NVIDIA's wheel (pip install [--user] nvidia-nccl-cu<CUDA major>): <site>/nvidia/nccl/include/
# nccl.h and lib/libnccl.so.2 (no libnccl.so: linked as -l:libnccl.so.2), looked for in the
# site-packages of an active venv, of the python3 on PATH (the user's included) and in
# $(BUILD)/pip (make setup's). nccl.h includes cuda_runtime.h: every probe compiles with
# CUDA's include directory and links cudart too.
NCCL_PROBE='int v = 0; if (ncclGetVersion(&v) != ncclSuccess) return 1;'
nccl_sites() {  # nccl_sites BUILD_DIR: candidate site-packages directories, one a line
  local py
  [ -z "${VIRTUAL_ENV:-}" ] || compgen -G "$VIRTUAL_ENV/lib/python3*/site-packages"
  py=$(command -v python3 2>/dev/null) &&
    "$py" -c 'import site; print(*site.getsitepackages(), sep="\n"); print(site.getusersitepackages())' 2>/dev/null
  echo "$1/pip"
}
nccl_version() {  # nccl_version HEADER: x.y.z from NCCL_MAJOR/MINOR/PATCH
  sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$1" | head -3 | paste -sd.
}
# Sets NCCL_CPP NCCL_LD NCCL_WHERE NCCL_VER, or returns 1 with LINE saying why.
find_nccl() {
  local hdr v d
  TRY_CPP="$CUDA_INC" TRY_LD="$(ld_for_dirs $CUDA_LIBDIRS) -lcudart" TRY_BODY=$NCCL_PROBE
  if find_dep nccl nccl.h -lnccl nccl NCCL NCCL; then
    hdr=$(awk '{print $2}' <<<"$FOUND_CPP"); [ -n "$hdr" ] || hdr=$(compiler_header_dir nccl.h)
    # -I, ahead of CUDA's include directory in the build (a CUDA that has an nccl.h of its own).
    NCCL_CPP=${FOUND_CPP//-isystem /-I} NCCL_LD="$FOUND_LD -lnccl" NCCL_WHERE=$FOUND_WHERE
    d=$(tr ' ' '\n' <<<"$FOUND_LD" | sed -n 's/^-L//p' | head -1)  # the wheel's: no libnccl.so
    [ -z "$d" ] || [ -e "$d/libnccl.so" ] || [ ! -e "$d/libnccl.so.2" ] || NCCL_LD="$FOUND_LD -l:libnccl.so.2"
    if [ "-I$hdr" = "${CUDA_INC%% *}" ] || [ "$hdr" = "$(canon "$CUDA_HOME_FOUND/include")" ]; then
      NCCL_CPP='' NCCL_WHERE="$hdr, CUDA's own"
    fi
    NCCL_VER=$(nccl_version "${hdr:-/usr/include}/nccl.h")
  elif [ -n "$FOUND_WHERE" ]; then
    LINE="$FOUND_WHERE"
    # NCCL_ROOT=<site-packages>/nvidia/nccl: the wheel's prefix, libnccl.so.2 without libnccl.so.
    for v in NCCL_ROOT NCCL_DIR EBROOTNCCL; do
      d=${!v:-}; [ -n "$d" ] && [ -e "$d/include/nccl.h" ] && [ -e "$d/lib/libnccl.so.2" ] || continue
      d=$(canon "$d") NCCL_CPP="-I$d/include" NCCL_LD="$(ld_for_dirs "$d/lib") -l:libnccl.so.2"
      try_build nccl.h "$NCCL_CPP" "$NCCL_LD" "" || break
      NCCL_WHERE="$d ($v)" NCCL_VER=$(nccl_version "$d/include/nccl.h"); break
    done
  else find_nccl_wheel "$1"
  fi
  TRY_CPP='' TRY_LD='' TRY_BODY=''
  [ -n "${NCCL_WHERE:-}" ]
}
find_nccl_wheel() {  # find_nccl_wheel BUILD_DIR: the first wheel for nvcc's CUDA major that links
  local s d cu dist mism='' major=${CUDA_VERSION%%.*}
  LINE=''
  while read -r s; do
    d=$s/nvidia/nccl
    [ -e "$d/include/nccl.h" ] && [ -e "$d/lib/libnccl.so.2" ] || continue
    d=$(canon "$d")
    dist=$({ compgen -G "$s/nvidia_nccl_cu${major}-*.dist-info" || compgen -G "$s/nvidia_nccl_cu*-*.dist-info"; } | head -1)
    cu=$(sed -n 's/.*nvidia_nccl_cu\([0-9]*\)-.*/\1/p' <<<"${dist##*/}")
    if [ -n "$cu" ] && [ "$cu" != "$major" ]; then
      mism="nvidia-nccl-cu$cu is built for CUDA $cu, nvcc is CUDA $major: pip install nvidia-nccl-cu$major ($s)"; continue
    fi
    NCCL_CPP="-I$d/include" NCCL_LD="$(ld_for_dirs "$d/lib") -l:libnccl.so.2"
    if try_build nccl.h "$NCCL_CPP" "$NCCL_LD" ""; then
      dist=${dist##*/}; NCCL_WHERE="$d (pip wheel ${dist%.dist-info})" NCCL_VER=$(nccl_version "$d/include/nccl.h"); break
    fi
    LINE="$d: nccl.h found, but compiling or linking libnccl.so.2 with cudart failed"
  done < <(nccl_sites "$1" | awk 'NF && !($0 in s) {s[$0]; print}')
  [ -n "${NCCL_WHERE:-}" ] || LINE=${LINE:-$mism}
}
# Reports nccl's line: found, or off (why, and how to get it).
check_nccl() {
  NCCL_CPP='' NCCL_LD='' NCCL_WHERE='' NCCL_VER=''
  if [ "$1" != 0 ]; then report nccl off nccl "no CUDA build to use it (--comm nccl refused)"
  elif find_nccl "$2"; then report nccl found nccl "$NCCL_WHERE (NCCL $NCCL_VER)"
  elif [[ $LINE == nvidia-nccl-cu* ]]; then report nccl off nccl "$LINE; built without it (--comm nccl refused)"
  else
    report nccl off nccl "${LINE:-not found}: built without it (--comm nccl refused; module load nccl, NCCL_ROOT=PREFIX, or pip install --user nvidia-nccl-cu${CUDA_VERSION%%.*})"
  fi
}

# ---- probe: every dependency, one line each; OUT.mk and OUT.mk.txt ----
DEPS_LINES=()
report() {  # report NAME STATUS ROLE TEXT
  local text=$4
  [ "$2" != found ] || text="found: $4"
  [ "$2" != missing ] || text="MISSING: needed by $(role_users "$3"): $4"
  printf 'deps: %-13s %s\n' "$1" "$text"
  DEPS_LINES+=("$1|$2|$(printf 'deps: %-13s %s' "$1" "$text")")
}
hint_for() {  # how to point the build at NAME
  local stems=$1 pcs=$2 first
  first=${stems%% *}
  echo "module load it, or ${first}_ROOT=PREFIX${pcs:+ (or its pkg-config ${pcs%% *}.pc on PKG_CONFIG_PATH)}, CMAKE_PREFIX_PATH, CPATH + LIBRARY_PATH, or CPPFLAGS + LDFLAGS"
}

deps_probe() {
  local out=$1 name header libs pcs stems cmakes role cpp='' ld='' have=() st
  local arma_libs=-larmadillo
  MPI_LD='' CUDA_VERSION='' CUDA_ARCHS='' CUDA_HOME_FOUND='' NVCC_FOUND='' CUDA_LIBDIRS='' CUDA_INC='' NVTX_FOUND=''
  if check_cxx; then report cxx found toolchain "$LINE"; have+=(cxx); else report cxx bad toolchain "$LINE"; fi
  if check_mpi; then report mpi found toolchain "$LINE"; have+=(mpi); ld+=" $MPI_LD"
  else report mpi missing toolchain "${LINE#MISSING: }"; fi
  if command -v python3 >/dev/null 2>&1; then report python3 found emulator "$(command -v python3) (runs sim/simcc)"; have+=(python3)
  else report python3 missing emulator "python3 runs sim/simcc (module load python)"; fi
  while IFS='|' read -r name header libs pcs stems cmakes role; do
    if [ "$name" = onednn ] && [ "${DNNL:-auto}" = 0 ]; then report onednn off onednn "left out (DNNL=0)"; continue; fi
    if find_dep "$name" "$header" "$libs" "$pcs" "$stems" "$cmakes"; then
      report "$name" found "$role" "$FOUND_WHERE"; have+=("$name"); cpp+=" $FOUND_CPP"; ld+=" $FOUND_LD"
    elif [ "$name" = armadillo ] && [ -n "$FOUND_WHERE" ] || [ "$name" != armadillo ] || ! find_dep "$name" "$header" "" "$pcs" "$stems" "$cmakes"; then
      st=missing; [ "$role" = onednn ] && [ "${DNNL:-auto}" != 1 ] && st=off
      if [ "$st" = off ]; then report "$name" off onednn "not found: built without it (--cpu-gemm onednn refused; $(hint_for "$stems" "$pcs"))"
      else report "$name" missing "$role" "${FOUND_WHERE:+$FOUND_WHERE; }$(hint_for "$stems" "$pcs")"; fi
    else
      # Armadillo's headers without its library: its functions straight over the BLAS/LAPACK.
      report armadillo found trainer "$FOUND_WHERE (headers only: ARMA_DONT_USE_WRAPPER, over OpenBLAS)"
      have+=(armadillo); cpp+=" $FOUND_CPP -DARMA_DONT_USE_WRAPPER"; ld+=" $FOUND_LD"; arma_libs=''
    fi
  done <<<"$DEPS_TABLE"
  check_cuda; st=$?
  case $st in
    0) report cuda found cuda "$LINE"; have+=(cuda)
       if [ -n "$NVTX_FOUND" ]; then report nvtx3 found cuda "$NVTX_FOUND (NVTX ranges; slurm/profile.sbatch)"
       else report nvtx3 off cuda "not found in $CUDA_HOME_FOUND/include: built without NVTX ranges (slurm/profile.sbatch and make test-nsys refuse such a build)"; fi ;;
    2) report cuda off cuda "$LINE" ;;
    *) report cuda missing cuda "$LINE" ;;
  esac
  check_nccl "$st" "$(dirname "$out")"
  {
    echo "# Written by .ci/deps.sh probe (make remakes it when the environment or the script changes)."
    echo "DEPS_HAVE := ${have[*]}"
    echo "DEPS_CPPFLAGS := $(echo $cpp | sed 's/-isystem /-isystem\x01/g' | tr ' ' '\n' | awk 'NF && !($0 in s) {s[$0]; printf "%s ", $0}' | tr '\001' ' ')"
    echo "DEPS_LDFLAGS := $(echo $ld | tr ' ' '\n' | awk 'NF && !($0 in s) {s[$0]; printf "%s ", $0}')"
    echo "DEPS_ARMA_LIBS := $arma_libs"
    echo "DEPS_CUDA_VERSION := $CUDA_VERSION"
    echo "DEPS_CUDA_HOME := $CUDA_HOME_FOUND"
    echo "DEPS_NVCC := $NVCC_FOUND"
    echo "DEPS_CUDA_INC := $CUDA_INC"
    echo "DEPS_CUDA_LD := $(ld_for_dirs $CUDA_LIBDIRS)"
    echo "DEPS_CUDA_ARCHS := $CUDA_ARCHS"
    echo "DEPS_NVTX := $NVTX_FOUND"
    echo "DEPS_NCCL_CPP := $NCCL_CPP"
    echo "DEPS_NCCL_LD := $NCCL_LD"
    echo "DEPS_NCCL_VERSION := $NCCL_VER"
  } >"$out.tmp"
  printf '%s\n' "${DEPS_LINES[@]}" >"$out.txt"
  mv "$out.tmp" "$out"
}

# need ROLE OUT.mk: every dependency of ROLE found, else its line and exit 1.
deps_need() {
  local role=$1 txt=$2.txt d bad=0 line
  role_deps "$role" >/dev/null || { echo "deps: unknown role '$role'" >&2; return 2; }
  [ -f "$txt" ] || { echo "deps: $txt missing: run make again" >&2; return 1; }
  for d in $(role_deps "$role"); do
    line=$(grep -m1 "^$d|" "$txt") || continue
    case $line in "$d|found|"*) ;; *) echo "${line#*|*|}" >&2; bad=1 ;; esac
  done
  return "$bad"
}
