#!/usr/bin/env bash
# torch-compare.sh — the CPU backend's step time against PyTorch's pipeline runtime (issue 17).
#
#   scripts/torch-compare.sh [OUT.md] [ROUNDS]   (default results/cpu-vs-torch.md, 3 rounds)
#
# The GEMM-bound GPT of bench/jobs/gemm-bound-pp2.yaml (8 layers, hidden 512, ffn 2048, seq 256,
# micro-batch 2, 8 microbatches, 2 pipeline ranks, Adam, fp32, one thread per rank) runs on
# pipetwin (`mpirun -np 2 pipetwin run JOB --backend cpu`, the median of its measured steps)
# and on torch.distributed.pipelining (scripts/torch_gpt_pipeline.py under torchrun, gloo,
# the same architecture and sizes), back to back, alternating, ROUNDS times for 1F1B and for
# GPipe. Each run reports the median of its steps after one warm-up step; the table gives the
# median over rounds and the ratio pipetwin / PyTorch (below 1: pipetwin is faster).
# Needs a built pipetwin ($PIPETWIN_BIN) and the torch venv of scripts/torch-interop.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/cpu-vs-torch.md}
rounds=${2:-3}
venv=${PIPETWIN_TORCH_VENV:-/work/.venv-torch}
bin=${PIPETWIN_BIN:-build/default/apps/pipetwin}
mpirun=${PIPETWIN_MPIRUN:-mpiexec --oversubscribe}
[ -x "$bin" ] || { echo "torch-compare.sh: $bin not found (build first, or set PIPETWIN_BIN)" >&2; exit 2; }
"$venv/bin/python" -c "import torch" 2>/dev/null ||
  { echo "torch-compare.sh: no torch in $venv (scripts/torch-interop.sh makes it)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job=bench/jobs/gemm-bound-pp2.yaml
port=29801
median() { python3 -c 'import statistics,sys; print(f"{statistics.median(map(float, sys.argv[1:])):.1f}")' "$@"; }
{
  echo "# pipetwin's CPU backend against PyTorch's pipeline runtime"
  echo
  echo "Written by \`scripts/torch-compare.sh\` ($(date -u +%Y-%m-%d), torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)'),"
  echo "$(nproc) cores, 1-minute load average $(cut -d' ' -f1 /proc/loadavg) at the start)."
  echo "Model: \`$job\` (8 layers, hidden 512, ffn 2048, seq 256, micro-batch 2, 8 microbatches,"
  echo "2 pipeline ranks, Adam, fp32, one thread per rank); PyTorch: \`scripts/torch_gpt_pipeline.py\`"
  echo "(the same architecture, \`scaled_dot_product_attention(is_causal=True)\`, gloo). Runs"
  echo "alternate pipetwin, PyTorch, $rounds rounds per schedule; each run's figure is the median of"
  echo "its 3 steps after one warm-up step."
  echo
  echo "| schedule | pipetwin runs (ms) | PyTorch runs (ms) | pipetwin median | PyTorch median | pipetwin / PyTorch |"
  echo "| --- | --- | --- | --: | --: | --: |"
} > "$tmp/report.md"
for sched in 1f1b gpipe; do
  sed "s/^schedule: .*/schedule: $sched/" "$job" > "$tmp/job.yaml"
  mine=() theirs=()
  for ((i = 0; i < rounds; i++)); do
    $mpirun -np 2 "$bin" run "$tmp/job.yaml" --backend cpu --report "$tmp/r.json" > "$tmp/run.log" 2>&1
    mine+=("$(python3 -c 'import json,statistics,sys; s = json.load(open(sys.argv[1]))["measured_steps_ms"]; print("%.1f" % statistics.median(s))' "$tmp/r.json")")
    port=$((port + 1))
    line=$("$venv/bin/torchrun" --nnodes 1 --nproc-per-node 2 --master-addr 127.0.0.1 \
      --master-port "$port" scripts/torch_gpt_pipeline.py --schedule "$sched" --layers 8 \
      --hidden 512 --ffn 2048 --heads 8 --vocab 256 --seq 256 --micro-batch 2 \
      --microbatches 8 2> "$tmp/torch.err" | grep -m1 median_step_ms)
    theirs+=("$(echo "$line" | sed 's/median_step_ms=\([0-9.]*\).*/\1/')")
    echo "$sched round $((i + 1)): pipetwin ${mine[-1]} ms, PyTorch ${theirs[-1]} ms" >&2
  done
  a=$(median "${mine[@]}") b=$(median "${theirs[@]}")
  ratio=$(python3 -c "print(f'{$a / $b:.2f}')")
  echo "| $sched | ${mine[*]} | ${theirs[*]} | $a | $b | $ratio |" >> "$tmp/report.md"
done
echo >> "$tmp/report.md"
echo "1-minute load average at the end: $(cut -d' ' -f1 /proc/loadavg)." >> "$tmp/report.md"
mkdir -p "$(dirname "$out")"
cp "$tmp/report.md" "$out.tmp" && mv "$out.tmp" "$out"
cat "$out"
