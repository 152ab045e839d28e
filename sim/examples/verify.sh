#!/usr/bin/env bash
# shellcheck disable=SC2015  # ok() never fails, so "A && ok || bad" is an if-then-else here
# Builds and runs the emulator examples and checks their outcomes (the manual
# verification of sim). Usage: sim/examples/verify.sh [outdir]
# Needs g++, Boost.Context; uses nvcc -c too when it is installed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
simcc="$here/../simcc"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
fail=0 passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; fail=1; failed=$((failed + 1)); }
expect_fault() {  # name, expected text, command...
  local name=$1 text=$2; shift 2
  local log; log=$("$@" 2>&1); local rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$text" <<<"$log"; then ok "$name"; else bad "$name (rc=$rc)"; echo "$log" | head -5; fi
}

# The builds are independent: side by side, then each checked.
declare -A build_pid=()
build() { "$simcc" "${@:2}" & build_pid[$1]=$!; }
build saxpy -O2 -Wall -Wextra "$here/saxpy.cu" -o "$out/saxpy"
build bench_tiled -O2 "$here/bench_tiled.cu" -o "$out/bench_tiled"
build checks -O2 -Wall -Wextra "$here/checks.cu" -o "$out/checks"
build faults -g -O1 "$here/faults.cu" -o "$out/faults"
build "faults (asan)" -g -O1 -fsanitize=address,undefined "$here/faults.cu" -o "$out/faults_asan"
build "checks (asan)" -g -O1 -fsanitize=address,undefined "$here/checks.cu" -o "$out/checks_asan"
build query_poll -O1 "$here/query_poll.cu" -o "$out/query_poll"
for name in saxpy bench_tiled checks faults "faults (asan)" "checks (asan)" query_poll; do
  wait "${build_pid[$name]}" || bad "build $name"
done
for order in forward reverse random; do
  for w in 1 2; do
    SIM_ORDER=$order SIM_WORKERS=$w "$out/saxpy" >/dev/null && ok "saxpy order=$order workers=$w" || bad "saxpy order=$order workers=$w"
  done
  SIM_ORDER=$order "$out/bench_tiled" 128 | grep -q correct && ok "tiled gemm order=$order" || bad "tiled gemm order=$order"
done
"$out/checks" >"$out/checks.log" 2>&1 && ok "checks.cu (orders, races, faults, shuffles, errors)" || { bad "checks.cu"; grep FAILED "$out/checks.log"; }
SIM_WORKERS=2 "$out/checks" >/dev/null 2>&1 && ok "checks.cu with SIM_WORKERS=2" || bad "checks.cu with SIM_WORKERS=2"
"$out/checks_asan" >"$out/checks_asan.log" 2>&1 && ! grep -q "ERROR: AddressSanitizer" "$out/checks_asan.log" && ok "checks.cu under ASan+UBSan" || bad "checks.cu under ASan"
"$out/faults" ok >/dev/null && ok "faults ok" || bad "faults ok"
expect_fault "divergence reported (abort mode)" "barrier divergence in kernel 'early_return'" "$out/faults" divergence
expect_fault "host pointer reported" "is not a device pointer (host memory?)" "$out/faults" hostptr
expect_fault "half-warp shuffle reported" "__shfl_down_sync" "$out/faults" warp
expect_fault "static shared over 48 KiB reported" "static __shared__ memory" "$out/faults" smem
# Device memory is mmap'd with poisoned red zones: ASan reports the write itself (use-after-poison).
expect_fault "ASan sees an out-of-bounds kernel write" "ERROR: AddressSanitizer: use-after-poison" "$out/faults_asan" oob
if command -v nvcc >/dev/null; then
  declare -A nvcc_pid=()
  for f in saxpy bench_tiled checks faults; do
    nvcc -arch=sm_90 -c "$here/$f.cu" -o "$out/$f.nvcc.o" 2>/dev/null & nvcc_pid[$f]=$!
  done
  for f in saxpy bench_tiled checks faults; do
    wait "${nvcc_pid[$f]}" && ok "nvcc -c $f.cu" || bad "nvcc -c $f.cu"
  done
fi
env -u SIM_STREAMS "$out/query_poll" | grep -q "query_poll: ok" && ok "query_poll: a cudaEventQuery loop sees not-ready rounds and ends" || bad "query_poll"
# One standard program per fault class, each caught in the default mode (bugs/run.sh).
if bash "$here/bugs/run.sh" "$out/bugs"; then ok "bugs/: every buggy program caught"; else bad "bugs/"; fi
# Independent standard programs, each in a correct version (must pass with no emulator message)
# and a buggy one (must be caught): the checks find bugs without false alarms (standard/run.sh).
if bash "$here/standard/run.sh" "$out/standard"; then ok "standard/: correct programs pass, buggy ones caught"; else bad "standard/"; fi
echo "verify: $passed passed, $failed failed"
exit $fail
