#!/usr/bin/env bash
# hostile_test.sh PIPETWIN SOURCE_DIR: issue 16's regressions that cli_test.sh does not hold:
# cheap consistency checks before any schedule is built, and every output folder (compare
# --out, validate --out, plan --emit-jobs) and output file of plan checked before any work.
set -u
bin=$1 src=$2
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"
now_ms() { date +%s%3N; }

# --- Cheap checks first (defect 8). tp 3 does not divide the tiny model's 4 heads. Before,
# a 4.1-million-action schedule (pp 64 x m 16000) was built first: 4.3 s and 180 MB, then
# this message; pp 4096 x m 1e6 said only that the schedule was too large.
for spec in "64 16000" "4096 1000000"; do
  set -- $spec
  j=$(job "tp3-$1.yaml" "schedule: 1f1b\nmicrobatches: $2\nparallel: {pp: $1, tp: 3}\nmodel: {preset: tiny}\n")
  t0=$(now_ms)
  out=$("$bin" simulate "$j" 2>&1)
  rc=$?
  ms=$(( $(now_ms) - t0 ))
  if [ "$rc" -eq 2 ] && grep -q "model: parallel.tp (3) must divide model.heads (4)" <<<"$out" \
    && [ "$ms" -lt 2000 ]; then
    echo "ok: pp $1 x m $2 with tp 3: exit 2 after $ms ms: $out"
  else
    echo "FAIL: pp $1 x m $2 with tp 3: exit $rc after $ms ms (want 2, the tp message, < 2 s): $out"
    fail=1
  fi
done
# The layers split over the stages, checked before the schedule too (tiny: 4 layers).
expect 2 "model.layers \(4\) do not split evenly over 5 pipeline stages" -- simulate \
  "$(job layers.yaml 'schedule: 1f1b\nmicrobatches: 300000\nparallel: {pp: 5}\nmodel: {preset: tiny}\n')"

# --- compare --out (defects 11, 12).
p=$src/results/validation/pp2/pp2-1f1b/predicted.json
m=$src/results/validation/pp2/pp2-1f1b/measured.json
touch "$dir/afile"
expect 2 "--out: .*afile exists and is not a directory" -- compare "$p" "$m" --out "$dir/afile" --no-plots
expect 2 "--out: .*afile/sub: cannot use" -- compare "$p" "$m" --out "$dir/afile/sub" --no-plots
mkdir -p "$dir/cmp/errors.md"
expect 2 "--out: .*cmp/errors.md is a directory" -- compare "$p" "$m" --out "$dir/cmp" --no-plots
rmdir "$dir/cmp/errors.md"
# The measured report lies where compare copies the predicted one: refused, not overwritten.
cp "$m" "$dir/cmp/predicted.json"
expect 2 "--out: .*cmp/predicted.json, which this command writes, is its input" -- \
  compare "$p" "$dir/cmp/predicted.json" --out "$dir/cmp" --no-plots
cmp -s "$m" "$dir/cmp/predicted.json" || { echo "FAIL: an input was overwritten"; fail=1; }
# A report that is already its own copy in the folder is fine (compare DIR/predicted.json ...).
cp "$p" "$dir/cmp/predicted.json"
expect 0 "iteration time: predicted" -- compare "$dir/cmp/predicted.json" "$m" --out "$dir/cmp" --no-plots
cmp -s "$p" "$dir/cmp/predicted.json" || { echo "FAIL: the report's own copy changed"; fail=1; }
# A missing trace is found before any table is replaced.
echo keep > "$dir/cmp/errors.md"
expect 2 "missing.trace.json: cannot open" -- compare "$p" "$m" --out "$dir/cmp" --no-plots \
  --measured-trace "$dir/missing.trace.json"
[ "$(cat "$dir/cmp/errors.md")" = keep ] && echo "ok: errors.md kept" \
  || { echo "FAIL: compare replaced errors.md before failing"; fail=1; }
# A new folder under an existing one is created.
expect 0 "table: .*new/sub/errors.md" -- compare "$p" "$m" --out "$dir/new/sub" --no-plots
[ -f "$dir/new/sub/errors.csv" ] || { echo "FAIL: no errors.csv in the new folder"; fail=1; }

# --- validate --out: checked before anything runs (no mpirun starts: --mpirun false).
v=$src/examples/validate/pp2.yaml
expect 2 "--out: .*afile exists and is not a directory" -- validate "$v" --out "$dir/afile" \
  --mpirun false --no-plots
mkdir -p "$dir/a" "$dir/b"
cp "$v" "$dir/a/pp2.yaml"
cp "$v" "$dir/b/pp2.yaml"
expect 2 "--out: .*a/pp2.yaml and .*b/pp2.yaml would both write .*/vout/pp2/" -- validate \
  "$dir/a/pp2.yaml" "$dir/b/pp2.yaml" --out "$dir/vout" --mpirun false --no-plots
mkdir -p "$dir/vout/pp2"
cp "$v" "$dir/vout/pp2/pp2.yaml"
expect 2 "--out: the input .*vout/pp2/pp2.yaml is in .*vout/pp2/, which validate rewrites" -- \
  validate "$dir/vout/pp2/pp2.yaml" --out "$dir/vout" --mpirun false --no-plots
[ ! -e "$dir/vout/summary.md" ] && [ ! -e "$dir/vout/pp2/job.yaml" ] \
  && echo "ok: validate wrote nothing" || { echo "FAIL: validate wrote before failing"; fail=1; }

# --- plan: every output checked before the search.
pl=$src/examples/plan/llama3-70b.yaml
cp "$pl" "$dir/plan.yaml"
expect 2 "--report: .*plan.yaml is an input of this command" -- plan "$dir/plan.yaml" --report "$dir/plan.yaml"
expect 2 "--csv: .* is also the output of --report" -- plan "$pl" --report "$dir/o.json" --csv "$dir/o.json"
expect 2 "--plot: .*/no/such/p.png(.csv)?: the directory .* does not exist" -- plan "$pl" --plot "$dir/no/such/p.png"
expect 2 "--emit-jobs: .*afile exists and is not a directory" -- plan "$pl" --emit-jobs "$dir/afile"
# An empty output name, or a directory, is bad input (the CLI fuzzer found exit 1 here).
expect 2 "output file name is empty" -- plan "$pl" --report ""
expect 2 "output file name is empty" -- simulate "$src/examples/schedules/1f1b.yaml" --report ""
expect 2 "--trace: .* is a directory" -- simulate \
  "$src/examples/schedules/1f1b.yaml" --trace "$dir"
cp "$pl" "$dir/top01.yaml"
expect 2 "--emit-jobs: .*top01.yaml, which this command writes, is its input" -- plan "$dir/top01.yaml" \
  --emit-jobs "$dir"
cmp -s "$pl" "$dir/plan.yaml" && cmp -s "$pl" "$dir/top01.yaml" \
  || { echo "FAIL: plan overwrote its input"; fail=1; }
# The same file under another name (a hard link), and an output not yet written that another
# output names through another path; and --top far past the layouts checks its names quickly
# (the CLI fuzzer timed out on --top 61282 --emit-jobs, one path resolution per name and input).
mkdir -p "$dir/jobs" "$dir/jobs2"
ln "$dir/plan.yaml" "$dir/jobs/top02.yaml"
expect 2 "--emit-jobs: .*jobs/top02.yaml, which this command writes, is its input .*plan.yaml" -- \
  plan "$dir/plan.yaml" --emit-jobs "$dir/jobs"
expect 2 "--emit-jobs: .*jobs2/top03.yaml, which this command writes, is its input .*jobs2/../jobs2/top03.yaml" -- \
  plan "$pl" --emit-jobs "$dir/jobs2" --report "$dir/jobs2/../jobs2/top03.yaml"
expect 0 "^top [0-9]+ by tokens/s" -- plan "$pl" --top 100000 --emit-jobs "$dir/jobs2"

# --- The rest of issue 16's defects that had no command-line test.
# 5: `schedule` validates the whole job as `simulate` does, and derives the microbatches.
expect 2 "model: unknown key 'frob'" -- schedule \
  "$(job unk.yaml 'schedule: 1f1b\nparallel: {pp: 2}\nmodel: {preset: tiny, frob: 1}\ntraining: {global_batch: 8}\n')"
expect 2 "cluster: unknown key 'gpus'" -- schedule \
  "$(job unkc.yaml 'schedule: 1f1b\nparallel: {pp: 2}\nmodel: {preset: tiny}\ntraining: {global_batch: 8}\ncluster: {gpus: 3}\n')"
out=$("$bin" schedule "$(job derived.yaml 'schedule: 1f1b\nparallel: {pp: 2}\nmodel: {preset: tiny}\ntraining: {global_batch: 8}\n')" 2>&1)
rc=$?
# 8 sequences of micro_batch 1 on dp 1: 8 microbatches, 1F1B's first rank row ends with 0B7.
[ "$rc" -eq 0 ] && [ "$(wc -l <<<"$out")" -eq 2 ] && grep -q "0B7$" <<<"$(head -1 <<<"$out")" \
  && echo "ok: schedule derives 8 microbatches from the global batch" \
  || { echo "FAIL: schedule with derived microbatches -> $rc: $out"; fail=1; }
# 8: derived microbatches obey the same cap as given ones.
expect 2 "training.global_batch: gives 1073741824 microbatches; at most 1000000" -- simulate \
  "$(job gb.yaml 'schedule: 1f1b\nparallel: {pp: 2}\nmodel: {preset: tiny}\ntraining: {global_batch: 1073741824}\n')"
# 9: a --profile path that is not UTF-8 (byte 0xFF) is a path like any other.
cp "$src/results/validation/pp2/pp2-1f1b/profile.yaml" "$dir/$(printf '\xff').yaml"
expect 0 "iteration time" -- simulate "$src/results/validation/pp2/pp2-1f1b/job.yaml" \
  --profile "$dir/$(printf '\xff').yaml" --report "$dir/ff.json"
expect 2 "cannot open the profile" -- simulate "$src/results/validation/pp2/pp2-1f1b/job.yaml" \
  --profile "$dir/$(printf '\xfe').yaml"
# 12: `run` checks its outputs before any work (here: before MPI starts a step).
expect 2 "--report: .*/no/such/r.json: the directory .* does not exist" -- run \
  "$src/examples/schedules/1f1b.yaml" --backend cpu --report "$dir/no/such/r.json"
# Bad arguments with --backend cuda are reported (exit 2) before the hand-over to pipetwin-cuda:
# a copy of the program without pipetwin-cuda beside it said "built without CUDA" (exit 1).
mkdir -p "$dir/solo"
cp "$bin" "$dir/solo/pipetwin"
for cmd in "run --report" "calibrate --out"; do
  set -- $cmd
  out=$("$dir/solo/pipetwin" "$1" "$src/examples/schedules/1f1b.yaml" --backend cuda \
    "$2" "$dir/no/such/out" 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "$2: .*/no/such/out: the directory .* does not exist" <<<"$out" \
    && echo "ok: $cmd --backend cuda with bad arguments -> 2" \
    || { echo "FAIL: $cmd --backend cuda with bad arguments -> $rc: $out"; fail=1; }
done
# 14: a csv: path may name any readable file; its first line is not echoed.
out=$("$bin" simulate "$(job pw.yaml 'schedule: csv:/etc/passwd\nmicrobatches: 4\nparallel: {pp: 2}\ncosts: {forward_ms: 1}\n')" 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -q "/etc/passwd: row 1 (rank 0), column 1: bad action of [0-9]* characters (not shown" <<<"$out" \
  && ! grep -q "$(head -c 8 /etc/passwd)" <<<"$out"; then
  echo "ok: csv:/etc/passwd -> 2 without its first line"
else
  echo "FAIL: csv:/etc/passwd -> $rc: $out"; fail=1
fi

# 13: a run stopped by SIGTERM (or Ctrl-C) while it writes a trace (megatron-1t: 79 MB, about
# 1.4 s) leaves the old file as it was and no partial temporary beside it.
mkdir -p "$dir/kill"
echo keep > "$dir/kill/t.json"
"$bin" simulate "$src/examples/models/megatron-1t.yaml" --trace "$dir/kill/t.json" >/dev/null 2>&1 &
pid=$!
sleep 0.5
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
left=$(ls "$dir/kill" | grep -v '^t.json$')
if [ -z "$left" ] && { [ "$rc" -eq 0 ] || [ "$(cat "$dir/kill/t.json")" = keep ]; }; then
  echo "ok: SIGTERM while writing (exit $rc): target intact, no temporary left"
else
  echo "FAIL: SIGTERM while writing (exit $rc): left [$left], t.json starts $(head -c 20 "$dir/kill/t.json")"
  fail=1
fi

rm -rf "$dir"
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
