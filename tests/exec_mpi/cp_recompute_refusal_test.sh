#!/usr/bin/env bash
# cp_recompute_refusal_test.sh PIPETWIN JOBS_DIR MPIEXEC: activation recomputation with context
# parallelism (cp > 1) is not in the CPU executor: `run` and `simulate` (cluster.device: cpu)
# both exit 2 with a message naming training.recompute; cp 2 without recompute still
# simulates.
set -u
bin=$1 jobs=$2 mpiexec=$3
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {  # check WHAT RC OUT
  if [ "$2" -eq 2 ] && grep -qF -- "training.recompute" <<<"$3"; then
    echo "ok   exit 2 naming 'training.recompute': $1"
  else
    echo "FAIL exit $2, wanted 2 and 'training.recompute': $1"
    echo "$3" | tail -3
    bad=1
  fi
}
for mode in full selective; do
  job=$tmp/cp2-$mode.yaml
  sed "s/^training: {/training: {recompute: $mode, /" "$jobs/cp2.yaml" >"$job"
  grep -q "recompute: $mode" "$job" || { echo "FAIL could not write $job"; exit 1; }
  out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu 2>&1)
  check "run cp 2, recompute $mode" $? "$out"
  out=$("$bin" simulate "$job" 2>&1)
  check "simulate cp 2, recompute $mode" $? "$out"
done
if out=$("$bin" simulate "$jobs/cp2.yaml" 2>&1); then
  echo "ok   simulate cp 2 without recompute"
else
  echo "FAIL simulate cp 2 without recompute"
  echo "$out" | tail -3
  bad=1
fi
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
