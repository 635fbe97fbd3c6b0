#!/usr/bin/env bash
# pipeline_engine_refusal_test.sh PIPETWIN JOBS_DIR MPIEXEC: training.pipeline_engine:
# deepspeed (blocking sends) is modelled by simulate only. `run` exits 2 naming the key;
# `simulate` predicts the same job, and its step is no shorter than with megatron's sends.
set -u
bin=$1 jobs=$2 mpiexec=$3
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job=$tmp/deepspeed.yaml
sed "s/^training: {/training: {pipeline_engine: deepspeed, /" "$jobs/1f1b.yaml" >"$job"
grep -q "pipeline_engine: deepspeed" "$job" || { echo "FAIL could not write $job"; exit 1; }
out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -qF -- "training.pipeline_engine" <<<"$out"; then
  echo "ok   run exits 2 naming 'training.pipeline_engine'"
else
  echo "FAIL run exit $rc, wanted 2 and 'training.pipeline_engine'"
  echo "$out" | tail -3
  bad=1
fi
if "$bin" simulate "$job" --report "$tmp/ds.json" >/dev/null 2>&1 &&
  "$bin" simulate "$jobs/1f1b.yaml" --report "$tmp/mg.json" >/dev/null 2>&1; then
  ds=$(sed -n 's/.*"iteration_time_ms": *\([0-9.e+-]*\).*/\1/p' "$tmp/ds.json" | head -1)
  mg=$(sed -n 's/.*"iteration_time_ms": *\([0-9.e+-]*\).*/\1/p' "$tmp/mg.json" | head -1)
  if awk -v a="$ds" -v b="$mg" 'BEGIN { exit !(a != "" && b != "" && a + 0 >= b + 0) }'; then
    echo "ok   simulate: deepspeed $ds ms >= megatron $mg ms"
  else
    echo "FAIL simulate: deepspeed '$ds' ms, megatron '$mg' ms"
    bad=1
  fi
else
  echo "FAIL simulate the job"
  bad=1
fi
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
