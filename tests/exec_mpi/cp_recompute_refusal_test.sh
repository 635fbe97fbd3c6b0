#!/usr/bin/env bash
# cp_recompute_refusal_test.sh PIPETWIN JOBS_DIR MPIEXEC: activation recomputation with context
# parallelism (cp > 1) is not in the CPU executor: `run` and `simulate` (cluster.device: cpu)
# both exit 2 with a message naming training.recompute; so does parallel.cp_comm: all_gather, a2a
# or a2a+p2p (its CP is ring attention), naming parallel.cp_comm; `run` refuses training.precision: fp8
# (simulated only), naming it, and training.master_weights: remainders (Apex's, simulated on GPU
# devices only) in `run` and in `simulate` on the cpu device. cp 2 without either still simulates.
set -u
bin=$1 jobs=$2 mpiexec=$3
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {  # check WHAT RC OUT [KEY]
  local key=${4:-training.recompute}
  if [ "$2" -eq 2 ] && grep -qF -- "$key" <<<"$3"; then
    echo "ok   exit 2 naming '$key': $1"
  else
    echo "FAIL exit $2, wanted 2 and '$key': $1"
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
for comm in all_gather a2a; do
  job=$tmp/cp2-$comm.yaml
  sed "s/^parallel: {/parallel: {cp_comm: $comm, /" "$jobs/cp2.yaml" >"$job"
  grep -q "cp_comm: $comm" "$job" || { echo "FAIL could not write $job"; exit 1; }
  out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu 2>&1)
  check "run cp 2, cp_comm $comm" $? "$out" parallel.cp_comm
  out=$("$bin" simulate "$job" 2>&1)
  check "simulate cp 2, cp_comm $comm" $? "$out" parallel.cp_comm
done
# a2a+p2p at cp 4 (two levels of 2): four ranks, refused before anything runs.
job=$tmp/cp4-a2a-p2p.yaml
sed "s/^parallel: {/parallel: {cp_comm: a2a+p2p, cp_a2a: 2, /; s/cp: 2}/cp: 4}/" "$jobs/cp2.yaml" >"$job"
grep -q "cp: 4}" "$job" || { echo "FAIL could not write $job"; exit 1; }
out=$("$mpiexec" --oversubscribe -np 4 "$bin" run "$job" --backend cpu 2>&1)
check "run cp 4, cp_comm a2a+p2p" $? "$out" parallel.cp_comm
out=$("$bin" simulate "$job" 2>&1)
check "simulate cp 4, cp_comm a2a+p2p" $? "$out" parallel.cp_comm
job=$tmp/fp8.yaml
sed "s/^training: {/training: {precision: fp8, /" "$jobs/cp2.yaml" >"$job"
grep -q "precision: fp8" "$job" || { echo "FAIL could not write $job"; exit 1; }
out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu 2>&1)
check "run, precision fp8" $? "$out" training.precision
job=$tmp/remainders.yaml
sed "s/^training: {/training: {master_weights: remainders, /" "$jobs/cp2.yaml" >"$job"
grep -q "master_weights: remainders" "$job" || { echo "FAIL could not write $job"; exit 1; }
out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu 2>&1)
check "run, master_weights remainders" $? "$out" training.master_weights
out=$("$bin" simulate "$job" 2>&1)
check "simulate (cpu device), master_weights remainders" $? "$out" training.master_weights
if out=$("$bin" simulate "$jobs/cp2.yaml" 2>&1); then
  echo "ok   simulate cp 2 without recompute"
else
  echo "FAIL simulate cp 2 without recompute"
  echo "$out" | tail -3
  bad=1
fi
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
