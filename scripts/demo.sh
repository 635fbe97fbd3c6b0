#!/usr/bin/env bash
# Builds pipetwin and runs the demo: every schedule on 4 pipeline ranks with 8 microbatches,
# simulated, with its timeline drawn as the papers draw it; reports and Chrome traces
# (open them in https://ui.perfetto.dev) go to results/schedules/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target pipetwin
bin=build/release/apps/pipetwin
out=results/schedules
mkdir -p "$out"
for s in gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zbv dualpipev; do
  echo "==== $s"
  "$bin" simulate "examples/schedules/$s.yaml" --ascii \
    --report "$out/$s.report.json" --trace "$out/$s.trace.json"
  echo
done
echo "==== a hand-written schedule that pipetwin rejects (exit status 2 is expected):"
"$bin" simulate examples/schedules/bad-order.yaml || echo "(exit status $?)"
