#!/usr/bin/env bash
# calibrate (2 ranks) -> simulate --profile -> run (2 ranks) -> compare, on a tiny job.
# Checks that every step succeeds, that the profile drives the prediction, and that the
# error table says communication bytes are equal. Timing accuracy is not asserted here:
# CI machines are shared; results/validation/ holds the measured figures.
set -euo pipefail
pipetwin=$1 job=$2 mpirun=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpirun" --oversubscribe -np 2 "$pipetwin" calibrate --backend cpu "$job" --out "$dir/profile.yaml" \
  --steps 3 --warmup 1
grep -q "^stages:" "$dir/profile.yaml"
grep -q "backward_input_ms" "$dir/profile.yaml"   # zb-h1 splits the backward
"$pipetwin" simulate "$job" --profile "$dir/profile.yaml" --report "$dir/p.json" --trace "$dir/p.trace.json"
grep -q '"profile"' "$dir/p.json"
"$mpirun" --oversubscribe -np 2 "$pipetwin" run "$job" --backend cpu --report "$dir/m.json" \
  --trace "$dir/m.trace.json"
out=$("$pipetwin" compare "$dir/p.json" "$dir/m.json" --out "$dir/cmp" --no-plots)
echo "$out"
echo "$out" | grep -q "communication bytes: equal"
grep -q "| iteration_time_ms | all | ms |" "$dir/cmp/errors.md"
head -1 "$dir/cmp/errors.csv" | grep -q "^metric,rank,unit,predicted,measured,difference,relative_error,ok$"
# A profile of another job is refused as bad input (exit 2), naming the key.
sed 's/pp: 2, dp/pp: 4, dp/' "$dir/profile.yaml" > "$dir/bad.yaml"
set +e
err=$("$pipetwin" simulate "$job" --profile "$dir/bad.yaml" 2>&1)
rc=$?
set -e
[ "$rc" -eq 2 ] && echo "$err" | grep -q "parallel.pp"
echo "end to end ok"
