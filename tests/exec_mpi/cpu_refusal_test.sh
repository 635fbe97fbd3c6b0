#!/usr/bin/env bash
# cpu_refusal_test.sh PIPETWIN JOBS_DIR MPIEXEC: what the CPU executor does not run is refused
# with exit 2 and a message naming the key. parallel.cp_comm: a2a with heads that do not split
# over the CP ranks, by `run` and by `simulate` (cluster.device: cpu); training.precision: fp8
# (simulated only) by `run`, bf16 and fp16 (the CPU executor is float32) by `run` on the CPU
# backend and by `simulate` on the cpu device, as are grad_reduce_dtype bf16, overlap.tp_comm,
# overlap.param_gather and overlap.tp_dgrad_reduce: true; training.master_weights: remainders (Apex's, simulated on GPU
# devices only) by `run` and by `simulate` on the cpu device. cp 2 with recompute full or
# selective is not refused: it simulates, and runs (recompute_test.sh checks it). A model
# the executor's decoder cannot be (rotary positions over an odd head dimension) by `run` and
# by `simulate` on the cpu device; Llama's blocks, dropout and tied embeddings,
# which the CPU backend runs, are not refused, except tied embeddings over a pipeline with
# ZeRO-1 or parameter servers, and on the sleep backend.
set -u
bin=$1 jobs=$2 mpiexec=$3
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {  # check WHAT RC OUT KEY
  local key=$4
  if [ "$2" -eq 2 ] && grep -qF -- "$key" <<<"$3"; then
    echo "ok   exit 2 naming '$key': $1"
  else
    echo "FAIL exit $2, wanted 2 and '$key': $1"
    echo "$3" | tail -3
    bad=1
  fi
}
# variant NAME SED MARK: cp2.yaml edited by SED into $tmp/NAME.yaml, which must contain MARK.
variant() {
  job=$tmp/$1.yaml
  sed "$2" "$jobs/cp2.yaml" >"$job"
  grep -qF -- "$3" "$job" || { echo "FAIL could not write $job"; exit 1; }
}
# refused NP WHAT KEY [simulate]: `run` on NP ranks (and `simulate`) of $job exit 2 naming KEY.
refused() {
  local out
  out=$("$mpiexec" --oversubscribe -np "$1" "$bin" run "$job" --backend cpu 2>&1)
  check "run $2" $? "$out" "$3"
  if [ "${4:-}" = simulate ]; then
    out=$("$bin" simulate "$job" 2>&1)
    check "simulate (cpu device) $2" $? "$out" "$3"
  fi
}
# answers WHAT: `simulate` of $job exits 0.
answers() {
  local out
  if out=$("$bin" simulate "$job" 2>&1); then
    echo "ok   simulate $1"
  else
    echo "FAIL simulate $1"
    echo "$out" | tail -3
    bad=1
  fi
}
# a2a at cp 4 with 2 heads: each rank's share of the heads would be half a head.
variant cp4-a2a-2heads "s/^parallel: {/parallel: {cp_comm: a2a, /; s/cp: 2}/cp: 4}/; s/^model: {/model: {heads: 2, /" "heads: 2"
refused 4 "cp 4, cp_comm a2a, 2 heads" parallel.cp_comm simulate
variant fp8 "s/^training: {/training: {precision: fp8, /" "precision: fp8"
refused 2 "precision fp8" training.precision
# float32 only: bf16 and fp16 by run and by simulate on the cpu device; on an A100 job, by run
# on the CPU backend while simulate prices it.
for prec in bf16 fp16; do
  variant "$prec" "s/^training: {/training: {precision: $prec, /" "precision: $prec"
  refused 2 "precision $prec" training.precision simulate
done
# What else of training: the CPU executor does not run, by run and by simulate on cpu.
for spec in "grad_reduce_dtype: bf16|training.grad_reduce_dtype" \
    "overlap: {tp_comm: true}|training.overlap.tp_comm" \
    "overlap: {param_gather: true}|training.overlap.param_gather" \
    "overlap: {tp_dgrad_reduce: true}|training.overlap.tp_dgrad_reduce"; do
  keys=${spec%%|*}
  variant "training-${keys%%:*}-$(echo "$keys" | tr -dc a-z)" "s/^training: {/training: {$keys, /" "$keys"
  refused 2 "$keys" "${spec##*|}" simulate
done
variant a100-bf16 "s/^training: {/training: {precision: bf16, /; s/device: cpu/device: a100-sxm-80gb/" \
  "device: a100-sxm-80gb"
refused 2 "precision bf16 on an A100 job" training.precision
answers "prices bf16 on an A100"
variant remainders "s/^training: {/training: {master_weights: remainders, /" "master_weights: remainders"
refused 2 "master_weights remainders" training.master_weights simulate
# The executor's decoder (models::ExecutorModelMismatch): a model with any other architecture
# is refused by `run` on every backend and by `simulate` on the cpu device (its machine), each
# naming the first key that differs. The tiny preset is that decoder; rotary positions need an
# even head dimension (64 / 4 = 16 is; 60 / 4 = 15 is not).
variant model-rope-odd "s/^model: {/model: {position: rope, hidden: 60, /" "hidden: 60"
refused 2 "rotary positions, head dimension 15" model.position simulate
# RMSNorm, linear layers without biases, rotary positions, SwiGLU and grouped-query attention
# are the executor's too (exec_reference_*-llama-style runs them): simulate on the cpu device
# prices them.
variant llama-style "s/^model: {/model: {norm: rmsnorm, bias: false, position: rope, mlp: swiglu, kv_heads: 2, /" "kv_heads: 2"
answers "cp 2 with RMSNorm, no biases, rotary positions, SwiGLU and grouped-query attention"
# Tied embeddings are the executor's (exec_reference_*-tied runs them); over a pipeline the
# two copies' gradients are summed after the data-parallel reduction (under ZeRO-1 slice by
# slice: exec_reference_*-zero1-tied), which parameter servers step before: refused by run and
# simulate, naming the key; the sleep backend does not run the sum: refused by run --backend
# sleep.
variant tied "s/^model: {/model: {tied_embeddings: true, /" "tied_embeddings: true"
answers "cp 2 with tied embeddings"
variant tied-pp2-zero1 "s/^model: {/model: {tied_embeddings: true, /; s/^parallel: {.*/parallel: {pp: 2, vpp: 1, dp: 2, tp: 1, zero: 1}/" "zero: 1"
answers "tied embeddings, pp 2, zero 1"
variant tied-pp2-ps "s/^model: {/model: {tied_embeddings: true, /; s/^parallel: {.*/parallel: {pp: 2, vpp: 1, dp: 2, tp: 1}/; s/^cluster: {/cluster: {dp_reduction: parameter-server, parameter_servers: 1, /" "parameter-server"
refused 5 "tied embeddings, pp 2, parameter servers" model.tied_embeddings simulate
variant tied-pp2 "s/^model: {/model: {tied_embeddings: true, /; s/^parallel: {.*/parallel: {pp: 2, vpp: 1, dp: 1, tp: 1}/" "pp: 2"
out=$("$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend sleep 2>&1)
check "run --backend sleep, tied embeddings, pp 2" $? "$out" model.tied_embeddings
# Dropout is the executor's (hidden and attention, exec_reference_*-dropout runs it): simulate
# on the cpu device prices it.
variant dropout "s/^model: {/model: {dropout: true, /" "dropout: true"
answers "cp 2 with dropout"
for mode in none full selective; do
  variant "cp2-$mode" "s/^training: {/training: {recompute: $mode, /" "recompute: $mode"
  answers "cp 2, recompute $mode"
done
[ "$bad" -eq 0 ] && echo PASS
exit "$bad"
