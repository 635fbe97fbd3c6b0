#!/usr/bin/env bash
# calibrate (2 ranks) -> simulate --profile -> run (2 ranks) -> compare, on a tiny job;
# then run --calibrate (interleaved) -> simulate --profile.
# Checks that every step succeeds, that the profile drives the prediction, and that the
# error table says communication bytes are equal. Timing accuracy is not asserted here:
# CI machines are shared; results/validation/ holds the measured figures.
set -euo pipefail
pipetwin=$1 job=$2 mpirun=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpirun" --oversubscribe -np 2 "$pipetwin" calibrate --backend cpu "$job" --out "$dir/profile.yaml" \
  --steps 3 --warmup 1
grep -q "^stages:" "$dir/profile.yaml"
grep -q "backward_input_ms" "$dir/profile.yaml"   # zb-h1 splits the backward
"$pipetwin" simulate "$job" --profile "$dir/profile.yaml" --report "$dir/p.json" --trace "$dir/p.trace.json"
grep -q '"profile"' "$dir/p.json"
# The rates beside the medians: each measured kind's GFLOP/s x its ms is the cost model's FLOPs
# of one rank in that action / 1e6, and F + I + W over the stages and microbatches make the
# report's hardware FLOPs of a step (tp, cp and dp are 1 here); the roofline, one line.
python3 - "$dir/profile.yaml" "$dir/p.json" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
hw = json.load(open(sys.argv[2]))["job"]["hardware_flops_per_iteration"]
stages = re.findall(r"^  - \{stage: (\d+), (.*)\}$", text.split("\nstages:\n")[1], re.M)
assert len(stages) == 2, stages
flops = 0.0
for _, body in stages:
    kv = dict(p.split(": ") for p in body.split(", "))
    for kind in ("forward", "backward_input", "backward_weight"):
        ms, rate = float(kv[kind + "_ms"]), float(kv[kind + "_gflops"])
        assert rate > 0, kv
        flops += rate * ms * 1e6
    assert "backward_gflops" not in kv, kv  # zb-h1 runs no fused B
total = flops * int(re.search(r"^microbatches: (\d+)$", text, re.M).group(1))
assert abs(total / hw - 1) < 1e-5, (total, hw)
roof = re.search(r"^roofline: \{gemm_gflops: ([^,]+), memory_gb_s: ([^}]+)\}$", text, re.M)
assert roof and float(roof.group(1)) > 0 and float(roof.group(2)) > 0, roof
print(f"rates: F+I+W x microbatches = {total:.6g} FLOPs = report's hardware FLOPs {hw:.6g}; "
      f"roofline {roof.group(1)} GFLOP/s, {roof.group(2)} GB/s")
PY
"$mpirun" --oversubscribe -np 2 "$pipetwin" run "$job" --backend cpu --report "$dir/m.json" \
  --trace "$dir/m.trace.json"
out=$("$pipetwin" compare "$dir/p.json" "$dir/m.json" --out "$dir/cmp" --no-plots \
  --profile "$dir/profile.yaml")
echo "$out"
echo "$out" | grep -q "communication bytes: equal"
grep -q "| iteration_time_ms | all | ms |" "$dir/cmp/errors.md"
# Where time goes: F, I, W of both stages with a rate and a share of the roofline; OPT without.
grep -q "^### Where time goes$" "$dir/cmp/errors.md"
[ "$(grep -cE '^\| [01] \| [FIW] \| [0-9.]+ \| [0-9.e+-]+ \| [0-9.]+ \| [0-9.]+% \|$' "$dir/cmp/errors.md")" -eq 6 ]
grep -qE '^\| 1 \| OPT \| [0-9.]+ \| – \| – \| – \|$' "$dir/cmp/errors.md"
head -1 "$dir/cmp/errors.csv" | grep -q "^metric,rank,unit,predicted,measured,difference,relative_error,ok$"
# Interleaved (what validate does): one run, calibration steps between the measured ones.
# The job asks 5 steps: 5 measured, 5 calibration, so 5 jitter rows of 2 pipeline ranks.
"$mpirun" --oversubscribe -np 2 "$pipetwin" run "$job" --backend cpu --report "$dir/mi.json" \
  --calibrate "$dir/pi.yaml" | tee "$dir/run.txt"
grep -q "calibration: 5 steps interleaved" "$dir/run.txt"
python3 - "$dir/mi.json" "$dir/pi.yaml" <<'PY'
import json, re, sys
steps = json.load(open(sys.argv[1]))["measured_steps_ms"]
assert len(steps) == 5, steps
text = open(sys.argv[2]).read()
rows = re.findall(r"^  - \[([^\]]*)\]$", text.split("\njitter:")[1], re.M)
assert len(rows) == 5 and all(len(r.split(",")) == 2 for r in rows), rows
PY
"$pipetwin" simulate "$job" --profile "$dir/pi.yaml" --report "$dir/pi.json"
python3 - "$dir/pi.json" "$dir/mi.json" <<'PY'
import json, sys
p, m = (json.load(open(f)) for f in sys.argv[1:3])
assert p["jitter"]["samples"] == 5, p["jitter"]
# Timing accuracy is not asserted on a shared CI machine, only that nothing is grossly off
# (a unit wrong, or a kind of action missing): each rank's compute-busy time, predicted from
# the calibration steps against the measured steps of the same run, within a factor of 3.
# Busy time, not the step: a machine loaded by other work deschedules the ranks between
# actions, which no profile sees (a CI run once measured steps 2.3x the prediction that way);
# and a factor 3, because such load also lands inside the measured actions, whose sum is not
# a median (0.6 was seen at a load average of 7 on 2 cores).
for a, b in zip(p["ranks"], m["ranks"]):
    busy = a["compute_busy_ms"] / b["compute_busy_ms"]
    assert 1 / 3 < busy < 3, (a["rank"], a["compute_busy_ms"], b["compute_busy_ms"])
print(f"interleaved: predicted/measured step {p['iteration_time_ms'] / m['iteration_time_ms']:.3f}, "
      f"busy rank 0 {p['ranks'][0]['compute_busy_ms'] / m['ranks'][0]['compute_busy_ms']:.3f}")
PY
set +e
err=$("$mpirun" --oversubscribe -np 2 "$pipetwin" run "$job" --backend cpu --calibrate "$dir/x.yaml" \
  --check-reference 2>&1)
rc=$?
set -e
[ "$rc" -eq 2 ] && echo "$err" | grep -q "cannot be combined"
# A profile of another job is refused as bad input (exit 2), naming the key.
sed 's/pp: 2, dp/pp: 4, dp/' "$dir/profile.yaml" > "$dir/bad.yaml"
set +e
err=$("$pipetwin" simulate "$job" --profile "$dir/bad.yaml" 2>&1)
rc=$?
set -e
[ "$rc" -eq 2 ] && echo "$err" | grep -q "parallel.pp"
# validate: the loop for two schedules, interleaved (default) and separate calibration.
export PIPETWIN_MPIRUN="$mpirun --oversubscribe"
"$pipetwin" validate "$job" --schedules 1f1b,zb-h1 --out "$dir/val" --no-plots > "$dir/val.txt"
"$pipetwin" validate "$job" --schedules gpipe --separate-calibration --calibrate-steps 3 \
  --out "$dir/val2" --no-plots > "$dir/val2.txt"
python3 - "$dir/val/summary.csv" "$dir/val2/summary.csv" <<'PY'
import csv, sys
for path, labels in ((sys.argv[1], ["pp2-1f1b", "pp2-zb-h1"]), (sys.argv[2], ["pp2-gpipe"])):
    rows = list(csv.DictReader(open(path)))
    assert [r["label"] for r in rows] == labels, rows
    for r in rows:
        assert r["memory_equal"] == "1" and r["bytes_equal"] == "1", r
        assert int(r["measured_steps"]) == 5, r
        # Not grossly off: the prediction (from the calibration steps' median action times)
        # against the replay (the same schedule played with the measured steps' median action
        # times), within a factor of 2; both are medians, so load from other work that
        # deschedules the ranks moves neither much (the measured step itself it can double).
        # Interleaved only: a separate calibration run can meet other load than the measured.
        if path == sys.argv[1]:
            assert 0.5 < float(r["predicted_ms"]) / float(r["replay_ms"]) < 2.0, r
PY
grep -q "run --calibrate" "$dir/val/summary.md"
# validate passes each set's profile to compare: its errors.md shows where time goes (1f1b and
# gpipe run a fused B).
for md in "$dir/val/pp2-1f1b/errors.md" "$dir/val2/pp2-gpipe/errors.md"; do
  grep -q "^### Where time goes$" "$md"
  grep -qE '^\| 1 \| B \| [0-9.]+ \| [0-9.e+-]+ \| [0-9.]+ \| [0-9.]+% \|$' "$md"
done
# The plots (scripts/plot.py, Debian's python3-matplotlib from scripts/deps.sh).
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/../../scripts/plot.py" "$dir/val"
  for png in iteration_time memory timeline-pp2-1f1b timeline-pp2-zb-h1; do
    [ -s "$dir/val/$png.png" ] || { echo "plot.py made no $png.png"; exit 1; }
  done
else
  echo "plots not checked: /usr/bin/python3 has no matplotlib"
fi
grep -q "pipetwin calibrate" "$dir/val2/summary.md"
[ -f "$dir/val/pp2-zb-h1/profile.yaml" ] && [ -f "$dir/val2/pp2-gpipe/calibrate.log" ]
for bad in "--calibrate-steps 3" "--tolerance 2" "--schedules no-such-schedule"; do
  set +e
  # shellcheck disable=SC2086
  err=$("$pipetwin" validate "$job" $bad --out "$dir/val3" --no-plots 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "validate $bad: exit $rc, expected 2: $err"; exit 1; }
done
set +e
"$pipetwin" compare "$dir/p.json" "$dir/m.json" --out "$dir/cmp2" --no-plots --tolerance 5% 2>/dev/null
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "compare --tolerance 5%: exit $rc, expected 2"; exit 1; }
echo "end to end ok"
