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
passed=0 failed=0
for src in "$here"/*.cu; do
  name=$(basename "$src" .cu)
  expect=$(sed -n '1s|^// expect: ||p' "$src")
  if [ -z "$expect" ]; then echo "FAIL $name: first line is not '// expect: TEXT'"; failed=$((failed + 1)); continue; fi
  libs=()
  grep -q 'cublas' "$src" && libs=(-lcublas)
  if ! "$simcc" -O1 "$src" "${libs[@]}" -o "$out/$name" 2>"$out/$name.build.log"; then
    echo "FAIL $name: does not build"; head -5 "$out/$name.build.log"; failed=$((failed + 1)); continue
  fi
  log=$(env $(env | sed -n 's/^\(SIM_[A-Z_]*\)=.*/-u \1/p') "$out/$name" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$expect" <<<"$log"; then
    echo "ok   $name: exit $rc, '$expect'"; passed=$((passed + 1))
  else
    echo "FAIL $name: exit $rc, wanted non-zero and '$expect'; got:"; head -5 <<<"$log"; failed=$((failed + 1))
  fi
  if command -v nvcc >/dev/null; then
    if nvcc -arch=sm_90 -c "$src" -o "$out/$name.nvcc.o" 2>"$out/$name.nvcc.log"; then passed=$((passed + 1))
    else echo "FAIL $name: nvcc -c"; head -3 "$out/$name.nvcc.log"; failed=$((failed + 1)); fi
  fi
done
echo "bugs: $passed passed, $failed failed"
[ $failed -eq 0 ]
