#!/usr/bin/env bash
# fault_sized_test.sh PIPETWIN JOB MPIEXEC: JOB gives no execution.timeout_s; rank 1 stalls at
# the first measured step. The run must stop with the timeout sized from the predicted step,
# 10 x (simulate's iteration_time_ms) / 1000 + 15 s, computed here from simulate's report, and
# end within a few seconds of it (before issue 16: 300 s).
set -u
bin=$1 job=$2 mpiexec=$3
dir=$(mktemp -d)
"$bin" simulate "$job" --report "$dir/r.json" >/dev/null || { echo "FAIL: simulate"; exit 1; }
step_ms=$(grep -o '"iteration_time_ms": [0-9.e+-]*' "$dir/r.json" | head -1 | awk '{print $2}')
want=$(awk -v ms="$step_ms" 'BEGIN { printf "%.6f", 10 * ms / 1000 + 15 }')
rm -rf "$dir"
echo "predicted step $step_ms ms: expected timeout $want s"
start=$(date +%s)
out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu --test-fault hang:1 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | tail -6
echo "exit status $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || { echo "FAIL: the run exited 0"; exit 1; }
got=$(grep -o "timed out: rank 0 (pipeline rank 0), action 0RECV_B0, peer pipeline rank 1.*after [0-9.]* s" \
  <<<"$out" | grep -o "after [0-9.]* s" | awk '{print $2}' | head -1)
[ -n "$got" ] || { echo "FAIL: no timeout message naming the rank, the action, the peer and the time"; exit 1; }
awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; exit !(d < 0.001 && d > -0.001) }' \
  || { echo "FAIL: timed out after $got s, want $want s"; exit 1; }
lo=${want%.*}
[ "$elapsed" -ge "$lo" ] && [ "$elapsed" -le $(( lo + 25 )) ] \
  || { echo "FAIL: ended after ${elapsed}s, want between $lo and $(( lo + 25 ))"; exit 1; }
echo PASS
