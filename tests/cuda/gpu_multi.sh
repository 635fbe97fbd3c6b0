#!/bin/sh
# Every schedule on as many GPUs as the machine has (pp = number of GPUs, one process per GPU),
# each checked against the CPU reference; then 1f1b and zbv with selective and full recompute.
# Exit 77 (CTest: skipped) with a reason when fewer than 2 GPUs are visible.
# usage: gpu_multi.sh PIPETWIN MPIEXEC
pipetwin=$1
mpiexec=$2
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${n:-0}" -lt 2 ]; then
  echo "SKIP: ${n:-0} GPU(s) visible, the multi-GPU test needs 2 or more"
  exit 77
fi
dir=$(mktemp -d)
status=0
for run in gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zbv dualpipev \
    1f1b:selective 1f1b:full zbv:selective zbv:full; do
  s=${run%%:*}
  recompute=none
  case $run in *:*) recompute=${run#*:} ;; esac
  vpp=1
  case $s in interleaved-1f1b|zbv|dualpipev) vpp=2 ;; esac
  cat > "$dir/job.yaml" <<JOB
schedule: $s
microbatches: $((2 * n))
parallel: {pp: $n, vpp: $vpp, dp: 1, tp: 1}
model: {preset: tiny, seq_len: 16, layers: $((4 * n)), dropout: false}
training: {micro_batch: 2, optimizer: adam, precision: fp32, recompute: $recompute}
execution: {steps: 2, warmup: 1, timeout_s: 120}
JOB
  if ! "$mpiexec" --oversubscribe -np "$n" "$pipetwin" run "$dir/job.yaml" --backend cuda \
      --check-reference; then
    echo "FAILED: $s, recompute $recompute, on $n GPUs"
    status=1
  fi
done
rm -rf "$dir"
exit $status
