#!/usr/bin/env bash
# The main demo: builds pipetwin, shows one schedule as the papers draw it, then runs the
# validation loop on the CPU backend — for every schedule on 2 pipeline ranks: calibrate,
# predict (simulate --profile), run for real under mpirun, compare — and leaves the error
# table and the plots in results/validation/pp2/ (summary.md, iteration_time.png,
# memory.png, timeline-*.png). Three to five minutes on 2 cores, the build included.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target pipetwin
bin=build/release/apps/pipetwin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PIPETWIN_MPIRUN=${PIPETWIN_MPIRUN:-"mpirun --oversubscribe"}

echo "==== ZB-H1 on 4 pipeline ranks, 8 microbatches, F = I = W: the predicted step"
"$bin" simulate examples/schedules/zb-h1.yaml --ascii
echo
echo "==== Predicted against measured: every schedule on 2 ranks (pp 2), CPU backend"
out=results/validation/pp2
rm -rf "$out"
"$bin" validate examples/validate/pp2.yaml --schedules all --out "$out"
echo
echo "Error table: $out/summary.md; plots: $out/*.png"
echo "More: scripts/make-results.sh (every schedule and model, predicted),"
echo "      scripts/make-validation-results.sh (pp 2, dp 2, tp 2, cp 2, recompute, the 8-rank hybrids,"
echo "      the tutorial experiment and the sleep backend)."
