#!/usr/bin/env bash
# Every rank's node and device, end to end: nn_train at 1-4 ranks on this node with
# SIM_DEVICES unset and set (the emulator presents k devices), --report FILE, and then:
#   - "rank_devices" in the report lists every rank once, in order, with this host, its
#     node-local rank, device == local_rank % k and device_count == k (--device cpu: null, 0);
#   - the header's "ranks on HOST: ..." line is the one those entries give (r->gpuD ...);
#   - a bad SIM_DEVICES (0, 65, "two") stops the run with one "sim: SIM_DEVICES=" line;
#   - --gemm 5 on devices of compute capability 7.5 (SIM_COMPUTE_CAPABILITY) is refused with one
#     line, at 8.0 it trains; a malformed SIM_COMPUTE_CAPABILITY stops the run with one line.
# On one node the local rank is the global rank; tests/multinode runs the two-node case.
#
#   tests/cli/device_map.sh NN_TRAIN DATA_DIR
#
# Environment: MPIRUN (slurm/mpirun.sh), MPIRUN_FLAGS (--oversubscribe), SIM_WORKERS (1),
#   CASES ("1:- 2:2 3:2 4:- 4:3 4:4 2:cpu": ranks:SIM_DEVICES, "-" unset, "cpu" --device cpu),
#   MAP_ARGS (training options). Prints "ok ..."/"FAIL ..." and "device_map: N passed, M failed".
set -uo pipefail
export LC_ALL=C
if [ $# -ne 2 ]; then
  echo "usage: $0 NN_TRAIN DATA_DIR" >&2
  exit 2
fi
train=$1 data=$2
mpirun_cmd=${MPIRUN:-$(cd "$(dirname "$0")/../.." && pwd)/slurm/mpirun.sh}
read -r -a mpirun_flags <<<"${MPIRUN_FLAGS---oversubscribe}"
read -r -a cases <<<"${CASES:-1:- 2:2 3:2 4:- 4:3 4:4 2:cpu}"
read -r -a args <<<"${MAP_ARGS:---epochs 1 --train-size 600 --test-size 100 --hidden 16 --batch 100}"
export SIM_WORKERS=${SIM_WORKERS:-1}
unset SIM_DEVICES
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d "${TMPDIR:-/tmp}/nn-cli-devmap.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# check.py LOG REPORT NP K: the report's rank_devices and the header agree with the job.
cat >"$work/check.py" <<'EOF'
import json, sys
log, report, np_, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cpu = k == "cpu"
k = 0 if cpu else int(k)
r = json.load(open(report))
rd = r["rank_devices"]
assert r["ranks"] == np_, r["ranks"]
assert [e["rank"] for e in rd] == list(range(np_)), rd
hosts = {}
for e in rd:
    want_local = hosts.setdefault(e["host"], [])
    assert e["local_rank"] == len(want_local), e
    want_local.append(e)
    if cpu:
        assert e["device"] is None and e["device_count"] == 0 and e["threads"] >= 1, e
    else:
        assert e["device_count"] == k, e
        assert e["device"] == e["local_rank"] % k, e
    assert e["device_name"], e
assert len(hosts) == 1, hosts
text = open(log).read().splitlines()
for host, es in hosts.items():
    tokens = " ".join("%d->%s" % (e["rank"], "cpu" if cpu else "gpu%d" % e["device"]) for e in es)
    prefix = "ranks on %s: %s (" % (host, tokens)
    assert any(line.startswith(prefix) for line in text), (prefix, text[:12])
print(" ".join(l for l in text if l.startswith("ranks on ")))
EOF

for c in "${cases[@]}"; do
  np=${c%%:*} k=${c#*:}
  env=() opts=()
  case $k in
    -) kk=1 ;;
    cpu) kk=cpu opts=(--device cpu) ;;
    *) kk=$k env=(SIM_DEVICES="$k") ;;
  esac
  rm -f "$work/r.json"
  if env "${env[@]}" "$mpirun_cmd" "${mpirun_flags[@]}" -np "$np" "$train" --data "$data" "${args[@]}" \
      "${opts[@]}" --report "$work/r.json" >"$work/log" 2>&1; then
    if line=$(python3 "$work/check.py" "$work/log" "$work/r.json" "$np" "$kk" 2>&1); then
      ok "$np ranks, SIM_DEVICES=$k: $line"
    else
      fail "$np ranks, SIM_DEVICES=$k: $line"
    fi
  else
    fail "$np ranks, SIM_DEVICES=$k: nn_train exited $?"
    tail -5 "$work/log"
  fi
done

for bad in 0 65 two; do
  if SIM_DEVICES=$bad "$mpirun_cmd" "${mpirun_flags[@]}" -np 2 "$train" --data "$data" "${args[@]}" \
      >"$work/log" 2>&1; then
    fail "SIM_DEVICES=$bad: nn_train exited 0"
  elif grep -q "^sim: SIM_DEVICES=$bad is not a device count 1..64$" "$work/log" && ! grep -q "^epoch" "$work/log"; then
    ok "SIM_DEVICES=$bad refused: $(grep -m1 '^sim: SIM_DEVICES' "$work/log")"
  else
    fail "SIM_DEVICES=$bad: no 'sim: SIM_DEVICES=$bad' line, or it trained"
    tail -5 "$work/log"
  fi
done

# A GPU older than compute capability 8.0 (SIM_COMPUTE_CAPABILITY: what the emulator's devices
# report): --gemm 5 (TF32 tensor cores) is refused with one line before anything trains; at 8.0
# it trains. A malformed value stops the run with one "sim:" line.
cc_case() {  # CC EXPECT(refused|trains|bad)
  local cc=$1 want=$2 rc=0 n
  SIM_COMPUTE_CAPABILITY=$cc "$mpirun_cmd" "${mpirun_flags[@]}" -np 2 "$train" --data "$data" "${args[@]}" --gemm 5 \
    >"$work/log" 2>&1 || rc=$?
  case $want in
    refused)
      n=$(grep -Ec "^error: (rank [0-9]+: )?--gemm 5 \(TF32 tensor cores\) needs compute capability 8\.0 or newer; .* is $cc: use --gemm 4" "$work/log")
      if [ "$rc" != 0 ] && [ "$n" = 1 ] && ! grep -q "^epoch" "$work/log"; then
        ok "SIM_COMPUTE_CAPABILITY=$cc --gemm 5 refused (exit $rc): $(grep -m1 'needs compute capability' "$work/log" | cut -c1-120)"
      else fail "SIM_COMPUTE_CAPABILITY=$cc --gemm 5: exit $rc, $n refusal lines (expected 1), or it trained"; tail -5 "$work/log"; fi ;;
    trains)
      if [ "$rc" = 0 ] && grep -q "^test precision" "$work/log"; then ok "SIM_COMPUTE_CAPABILITY=$cc --gemm 5 trains"
      else fail "SIM_COMPUTE_CAPABILITY=$cc --gemm 5: exit $rc, no test precision"; tail -5 "$work/log"; fi ;;
    bad)
      if [ "$rc" != 0 ] && grep -q "^sim: SIM_COMPUTE_CAPABILITY=$cc is not MAJOR.MINOR" "$work/log" && ! grep -q "^epoch" "$work/log"; then
        ok "SIM_COMPUTE_CAPABILITY=$cc refused: $(grep -m1 '^sim: SIM_COMPUTE' "$work/log")"
      else fail "SIM_COMPUTE_CAPABILITY=$cc: exit $rc, no 'sim: SIM_COMPUTE_CAPABILITY=$cc' line, or it trained"; tail -5 "$work/log"; fi ;;
  esac
}
cc_case 7.5 refused
cc_case 8.0 trains
cc_case 7 bad

echo "device_map: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
