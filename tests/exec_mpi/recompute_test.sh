#!/usr/bin/env bash
# recompute_test.sh PIPETWIN JOB MODE NP MPIEXEC: JOB with `training.recompute: MODE` (selective
# or full) run on the CPU backend:
#   - its loss and every gradient equal the single-process reference, which stores every
#     activation (--check-reference, 1e-6 relative);
#   - the simulator's memory per rank and category, and its bytes sent, equal the measured ones
#     byte for byte (memory_test.sh);
#   - full: each rank's saved activations are smaller than JOB's without recompute by exactly
#     the amount the simulator predicts (both measured, both predicted), and with pp > 1 some
#     rank saves something.
set -eu
bin=$1 job=$2 mode=$3 np=$4 mpiexec=$5
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
variant="$dir/$(basename "$job" .yaml)-recompute-$mode.yaml"
grep -q '^training: {' "$job" || { echo "FAIL: $job has no one-line training: {...}"; exit 1; }
sed "s/^training: {/training: {recompute: $mode, /" "$job" >"$variant"
# A failed run prints what it said (set -e would otherwise end the script without a word).
rc=0
out=$("$mpiexec" --oversubscribe -np "$np" "$bin" run "$variant" --backend cpu --check-reference 2>&1) ||
  rc=$?
if [ "$rc" -ne 0 ]; then
  echo "$out" | tail -40
  echo "FAIL: the run exited $rc"
  exit 1
fi
echo "$out" | grep "reference check"
echo "$out" | grep -q "reference check: worst relative error .* ok" || { echo "FAIL: reference"; exit 1; }
# Issue 14 asks 1e-6 relative (run's own tolerance is looser).
err=$(echo "$out" | sed -n 's/.*reference check: worst relative error \([^ ]*\) .*/\1/p' | head -1)
python3 -c "import sys; sys.exit(0 if float('$err') <= 1e-6 else 1)" ||
  { echo "FAIL: worst relative error $err > 1e-6"; exit 1; }
"$here/memory_test.sh" "$bin" "$variant" "$np" "$mpiexec" | tee "$dir/memory.txt"
grep -q '^PASS' "$dir/memory.txt" || { echo "FAIL: memory"; exit 1; }
if [ "$mode" = full ]; then
  "$bin" simulate "$job" --report "$dir/p-none.json" >/dev/null
  "$bin" simulate "$variant" --report "$dir/p-full.json" >/dev/null
  measure() {  # measure NAME JOB: a run's report to $dir/NAME.json; its output if it fails
    "$mpiexec" --oversubscribe -np "$np" "$bin" run "$2" --backend cpu --report "$dir/$1.json" \
      >"$dir/$1.log" 2>&1 || { tail -40 "$dir/$1.log"; echo "FAIL: the $1 run exited"; exit 1; }
  }
  measure m-none "$job"
  measure m-full "$variant"
  python3 - "$dir" <<'PY' || { echo "FAIL: saving"; exit 1; }
import json, sys
d = sys.argv[1]
r = {k: json.load(open(f"{d}/{k}.json"))["ranks"] for k in ("p-none", "p-full", "m-none", "m-full")}
bad = 0
saved_somewhere = False
for i in range(len(r["p-none"])):
    act = {k: v[i]["memory_bytes"]["activations"] for k, v in r.items()}
    pred = act["p-none"] - act["p-full"]
    meas = act["m-none"] - act["m-full"]
    ok = pred == meas
    saved_somewhere = saved_somewhere or pred > 0
    print(f"rank {i} activations saved by full recompute: predicted {pred} measured {meas}"
          f" (none {act['m-none']} -> full {act['m-full']})" + ("" if ok else "  MISMATCH"))
    bad += not ok
# With one microbatch in flight (pp 1) the peak is inside I of the first block, where both
# modes hold the same tensors (the W parts of the later blocks and the first block's saved
# state, recomputed or kept): full saves nothing there, exactly as predicted.
pipelined = json.load(open(f"{d}/p-none.json"))["pp"] > 1
if pipelined and not saved_somewhere:
    print("no rank saves anything: full recompute keeps as much as none")
    bad += 1
sys.exit(1 if bad else 0)
PY
fi
echo PASS
