#!/usr/bin/env bash
# Regenerates results/validation/ (scripts/make-results.sh makes the rest of results/): the
# validation loop (run --calibrate, simulate --profile, compare) on the CPU backend with 2
# ranks, for every schedule on pp 2, dp 2, tp 2 and cp 2 (ring attention; cp2-allgather: K
# and V all-gathered; cp2-a2a: Ulysses' all-to-all), on pp 2 with
# activation recomputation (recompute-full, recompute-selective), on cp 2 with both
# recompute modes (cp2-recompute), and the classic tutorial
# experiment; the 8-rank hybrids (`hybrid8`: dp 2 x tp 2 x pp 2 with ZeRO-1, and
# dp 4 x pp 2; with fewer cores than ranks their timing is stated, not checked: memory and
# bytes are); and the sleep backend's row set (`sleep`: run --backend sleep against simulate
# on the same costs, every schedule at pp 4 and pp 8 and pp 2 x dp 4, up to 8 ranks on the
# machine's cores). Takes about 6 minutes on 2 cores (sleep: about 5 more); run it on an
# otherwise idle machine (other work slows the measured steps; summary.md records the load
# average).
#   scripts/make-validation-results.sh [BUILD_DIR [SET ...]]
# BUILD_DIR defaults to build/release, the sets to pp2 llama-pp2 llama-cp2 llama-cp2-a2a dp2 tp2 cp2 cp2-allgather cp2-a2a hybrid8
# recompute-full recompute-selective cp2-recompute tutorial sleep sleep-stragglers
# (sleep-stragglers: the sleep backend with execution.stragglers, a fixed 1.5x rank and a
# seeded lognormal draw per rank and step). Sets not named are kept as they are; README.md is
# made from all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
shift || true
sets=${*:-pp2 llama-pp2 llama-cp2 llama-cp2-a2a dp2 tp2 cp2 cp2-allgather cp2-a2a hybrid8 recompute-full recompute-selective cp2-recompute tutorial sleep sleep-stragglers}
pipetwin=$build/apps/pipetwin
[ -x "$pipetwin" ] || { echo "make-results: build first ($pipetwin not found)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PIPETWIN_MPIRUN=${PIPETWIN_MPIRUN:-"mpirun --oversubscribe"}
out=results/validation
mkdir -p "$out"
for set in $sets; do
  rm -rf "${out:?}/$set"
  if [ "$set" = tutorial ]; then
    "$pipetwin" validate examples/validate/tutorial/*.yaml --tutorial --out "$out/tutorial" || true
  elif [ "$set" = hybrid8 ]; then
    "$pipetwin" validate examples/validate/hybrid8-dp2-tp2-pp2-zero1.yaml \
      examples/validate/hybrid8-dp4-pp2.yaml --schedules all --out "$out/hybrid8" || true
  elif [ "$set" = cp2-recompute ]; then
    "$pipetwin" validate examples/validate/cp2-recompute-full.yaml \
      examples/validate/cp2-recompute-selective.yaml --schedules all --out "$out/$set" || true
  elif [ "$set" = sleep ]; then
    "$pipetwin" validate --backend sleep examples/validate/sleep-pp4.yaml \
      examples/validate/sleep-pp8.yaml examples/validate/sleep-pp2-dp4.yaml --schedules all \
      --out "$out/sleep" || true
  elif [ "$set" = sleep-stragglers ]; then
    "$pipetwin" validate --backend sleep examples/validate/sleep-stragglers-pp4.yaml \
      examples/validate/sleep-stragglers-pp2-dp4.yaml --schedules gpipe,1f1b,zb-h1 --no-plots \
      --out "$out/sleep-stragglers" || true
  else
    "$pipetwin" validate "examples/validate/$set.yaml" --schedules all --out "$out/$set" || true
  fi
done
# Keep what a reader needs: tables, plots, profiles, reports; drop the bulky traces and logs.
find "$out" \( -name '*.trace.json' -o -name '*.log' \) -delete
{
  echo "# Validation results"
  echo
  echo "Made by \`scripts/make-validation-results.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores."
  echo
  for d in pp2 llama-pp2 llama-cp2 llama-cp2-a2a dp2 tp2 cp2 cp2-allgather cp2-a2a hybrid8 recompute-full recompute-selective cp2-recompute tutorial sleep \
    sleep-stragglers; do
    [ -f "$out/$d/summary.md" ] || continue
    echo "## $d"
    echo
    sed -n '3,$p' "$out/$d/summary.md"
    echo
    ls "$out/$d"/*.png >/dev/null 2>&1 &&
      echo "Plots: $(cd "$out/$d" && ls ./*.png | sed 's|^\./||' | tr '\n' ' ')"
    echo
  done
} > "$out/README.md"
echo "results in $out/README.md"
