#!/usr/bin/env bash
# Regenerates results/schedules/, results/models/, results/plan/ and results/published.md from the example jobs (predictions only;
# results/validation/ comes from the validation loop), results/memory/ (predicted against measured) and results/dp-sync/ (measured, under mpirun). Run after scripts/demo.sh has built.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPETWIN_BIN:-build/release/apps/pipetwin}
[ -x "$bin" ] || { cmake --preset release >/dev/null && cmake --build --preset release --target pipetwin; }
mkdir -p results/schedules results/models results/dp-sync
for s in gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zbv dualpipev; do
  "$bin" simulate "examples/schedules/$s.yaml" --ascii \
    --report "results/schedules/$s.report.json" --trace "results/schedules/$s.trace.json" \
    > "results/schedules/$s.txt"
done
for j in gpt3-175b llama3-70b llama3-405b megatron-1t; do
  trace=(--trace "results/models/$j.trace.json")
  # The 1T job has 391,424 actions on 64 pipeline ranks: its trace (~60 MB) is not kept.
  # The two largest jobs report one row per pipeline rank, not one per GPU (3,072 and 16,384).
  case $j in
    megatron-1t) trace=(--per-pipeline-rank) ;;
    llama3-405b) trace+=(--per-pipeline-rank) ;;
  esac
  "$bin" simulate "examples/models/$j.yaml" --report "results/models/$j.report.json" "${trace[@]}" \
    > "results/models/$j.txt"
done
python3 scripts/megatron_comparison.py "$bin" > results/models/megatron-table1.md
# The two devices' fitted GEMM efficiency (models/cluster.cc takes the printed value by hand).
python3 scripts/fit_gemm_efficiency.py "$bin" a100-sxm-80gb > results/models/a100-gemm-fit.md
python3 scripts/fit_gemm_efficiency.py "$bin" h100-sxm-80gb > results/models/h100-gemm-fit.md
# MosaicML's attention as their sequence sweep measured it (their jobs state the result).
python3 scripts/attention_sweep.py "$bin" > results/models/mosaicml-attention.md
python3 scripts/published.py "$bin" > results/published.md
# The fitted constants refitted without each source (leave one source out).
python3 scripts/cross_validate.py "$bin" > results/models/cross-validation.md
# Would plan have chosen the layouts NVIDIA's recipes ran?
python3 scripts/plan_vs_published.py "$bin" > results/plan/vs-published.md
python3 scripts/published.py "$bin" --without tp_dgrad_reduce,pipeline_engine,cross_entropy,zero3_unit,pp_scatter_gather \
  > results/published-defaults.md
# The layout searches: the top 10, every layout (CSV) and the plot.
for p in gpt3-175b llama3-70b llama3-405b nemotron4-340b-fp8; do
  mkdir -p "results/plan/$p"
  "$bin" plan "examples/plan/$p.yaml" --report "results/plan/$p/plan.json" \
    --csv "results/plan/$p/all.csv" --plot "results/plan/$p/plan.png" > "results/plan/$p/plan.txt"
done
# Memory per pipeline rank and recompute's memory against time, on the CPU backend (issue 14):
# predicted against measured (mpirun, 2 ranks; about 3 minutes on 2 idle cores: the timings of
# recompute.png want an otherwise idle machine).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
/usr/bin/python3 scripts/memory_plots.py "$bin" results/memory
# The data-parallel synchronisation experiment (issue 15): measured under mpirun on the sleep
# and CPU backends (needs MPI; minutes; the machine's load shows in the measured numbers).
PIPETWIN_MPIRUN=${PIPETWIN_MPIRUN:-mpirun --oversubscribe} \
  python3 scripts/dp_sync_experiment.py "$bin" results/dp-sync > results/dp-sync/log.txt
ls -la results/schedules results/models results/plan results/memory results/dp-sync
