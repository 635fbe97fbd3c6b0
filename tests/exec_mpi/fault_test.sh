#!/usr/bin/env bash
# fault_test.sh PIPETWIN hang|kill JOB MPIEXEC: rank 1 stalls (or dies) at the first measured
# step; the run must exit non-zero with a message, well within the job's 5 s timeout + margin.
set -u
bin=$1 mode=$2 job=$3 mpiexec=$4
start=$(date +%s)
out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu --test-fault "$mode:1" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | tail -15
echo "exit status $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || { echo "FAIL: the run exited 0"; exit 1; }
[ "$elapsed" -le 60 ] || { echo "FAIL: took ${elapsed}s"; exit 1; }
if [ "$mode" = hang ]; then
  echo "$out" | grep -q "timed out: rank 0 (pipeline rank 0), action 0RECV_B0, peer pipeline rank 1" \
    || { echo "FAIL: no timeout message naming the rank, the action and the peer"; exit 1; }
else
  echo "$out" | grep -qiE "signal 9|killed" || { echo "FAIL: no message about the killed rank"; exit 1; }
fi
echo PASS
