#!/usr/bin/env bash
# Standard CUDA programs, each in a correct and a buggy version (reduce_ok.cu / reduce_bug.cu,
# ...), written the way people write them. Each is built with simcc and run under the emulator in
# its DEFAULT mode (no SIM_* variable set). The first line says what must happen:
#   `// expect: ok`   - exit 0, and no line starting with `sim: ` on stderr (no fault, no warning);
#   `// expect: TEXT` - a non-zero exit and TEXT somewhere in the output (as in ../bugs/).
# With nvcc installed each must also compile for a GPU. Usage: sim/examples/standard/run.sh [outdir]
set -u
here=$(cd "$(dirname "$0")" && pwd)
simcc="$here/../../simcc"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
unset_sim=$(env | sed -n 's/^\(SIM_[A-Z_]*\)=.*/-u \1/p')
# check SRC: builds SRC, runs it in the default mode, compiles it with nvcc when there is one.
check() {
  local src=$1 name expect stdout rc
  name=$(basename "$src" .cu)
  expect=$(sed -n '1s|^// expect: ||p' "$src")
  if [ -z "$expect" ]; then echo "FAIL $name: first line is not '// expect: TEXT'"; return; fi
  if ! "$simcc" -O1 "$src" -o "$out/$name" 2>"$out/$name.build.log"; then
    echo "FAIL $name: does not build"; head -5 "$out/$name.build.log"; return
  fi
  # (a command substitution, so that bash does not report the abort of a buggy program here)
  # shellcheck disable=SC2086  # $unset_sim is a list of `-u NAME` words
  stdout=$(env $unset_sim "$out/$name" 2>"$out/$name.stderr"); rc=$?
  printf '%s\n' "$stdout" >"$out/$name.stdout"
  if [ "$expect" = ok ]; then
    if [ $rc -eq 0 ] && ! grep -q '^sim: ' "$out/$name.stderr"; then
      echo "ok   $name: exit 0, $(tail -1 "$out/$name.stdout")"
    else
      echo "FAIL $name: wanted exit 0 and no 'sim: ' line on stderr, got exit $rc:"
      head -5 "$out/$name.stderr" "$out/$name.stdout"
    fi
  elif [ $rc -ne 0 ] && cat "$out/$name.stdout" "$out/$name.stderr" | grep -qF -- "$expect"; then
    echo "ok   $name: exit $rc, '$expect'"
  else
    echo "FAIL $name: exit $rc, wanted non-zero and '$expect'; got:"
    head -5 "$out/$name.stderr" "$out/$name.stdout"
  fi
  if command -v nvcc >/dev/null; then
    if nvcc -arch=sm_90 -c "$src" -o "$out/$name.nvcc.o" 2>"$out/$name.nvcc.log"; then echo "ok   $name: nvcc -c for sm_90"
    else echo "FAIL $name: nvcc -c"; head -3 "$out/$name.nvcc.log"; fi
  fi
}
. "$here/../each.sh"
each_file check "$out" "$here"/*.cu
echo "standard: $passed passed, $failed failed"
[ $failed -eq 0 ]
