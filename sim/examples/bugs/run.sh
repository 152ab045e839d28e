#!/usr/bin/env bash
# Standard CUDA programs with exactly one bug each, as a user would write them: each must fail
# under the emulator in its DEFAULT mode (no SIM_* variable set), with a non-zero exit and the
# text named on its first line, `// expect: TEXT`. With nvcc installed each must also compile
# for a GPU. Usage: sim/examples/bugs/run.sh [outdir]; run by examples/verify.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
simcc="$here/../../simcc"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
# check SRC: builds SRC, runs it in the default mode, compiles it with nvcc when there is one.
check() {
  local src=$1 name expect libs=() log rc
  name=$(basename "$src" .cu)
  expect=$(sed -n '1s|^// expect: ||p' "$src")
  if [ -z "$expect" ]; then echo "FAIL $name: first line is not '// expect: TEXT'"; return; fi
  grep -q 'cublas' "$src" && libs=(-lcublas)
  if ! "$simcc" -O1 "$src" "${libs[@]}" -o "$out/$name" 2>"$out/$name.build.log"; then
    echo "FAIL $name: does not build"; head -5 "$out/$name.build.log"; return
  fi
  # shellcheck disable=SC2046  # a list of `-u NAME` words
  log=$(env $(env | sed -n 's/^\(SIM_[A-Z_]*\)=.*/-u \1/p') "$out/$name" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$expect" <<<"$log"; then
    echo "ok   $name: exit $rc, '$expect'"
  else
    echo "FAIL $name: exit $rc, wanted non-zero and '$expect'; got:"; head -5 <<<"$log"
  fi
  if command -v nvcc >/dev/null; then
    if nvcc -arch=sm_90 -c "$src" -o "$out/$name.nvcc.o" 2>"$out/$name.nvcc.log"; then echo "ok   $name: nvcc -c for sm_90"
    else echo "FAIL $name: nvcc -c"; head -3 "$out/$name.nvcc.log"; fi
  fi
}
. "$here/../each.sh"
each_file check "$out" "$here"/*.cu
echo "bugs: $passed passed, $failed failed"
[ $failed -eq 0 ]
