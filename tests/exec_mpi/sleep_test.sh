#!/usr/bin/env bash
# sleep_test.sh PIPETWIN JOB NP MPIEXEC [TOLERANCE]: `run --backend sleep` against `simulate`
# of the same costs. Without stragglers every compute action of the measured trace lasts at
# least its cost, and the median one less than 0.5 ms more (a precise sleep); the measured iteration time is the prediction within
# TOLERANCE (default 0.10: ctest runs beside other work; 0.20 under the sanitizers), and at least
# 0.15 where the ranks outnumber the cores: they then time-share them, and a rank whose sleep or
# receive ends waits for a slice, which the simulator does not model (pp 2 x dp 2 on 2 cores, run
# alone: -1.3% to -7.9% over five runs on an idle machine, -10.6% once in CI); the pipeline and
# data-parallel bytes sent equal the prediction exactly (real buffers, the model's sizes).
# Where only the wall-clock checks miss (the iteration time, the median oversleep) the step is
# measured again after a 10 s pause, up to five times in all (about a minute), and the test
# passes only if a measurement holds every check: a shared machine's cores change speed, in
# bursts of seconds to tens of seconds (gpipe on 2 ranks and 2 cores read -12.4% once in CI on
# 2026-11-28, run alone; interleaved pp 2 x dp 2 on 2 cores -17.4% and, at once again, -21.4%
# the same day, then within 15% in 4 of 5 runs; later that day, in a fresh clone's CI, pp 2 x
# dp 2 read -16.5%, -17.4%, -23.7% and interleaved -41%, -37%, -32% within one 40 s burst, three
# attempts 5 s apart, and both passed when run again a minute later), where a real regression
# misses every time.
set -eu
bin=$1 job=$2 np=$3 mpiexec=$4 tol=${5:-0.10}
cores=$(nproc 2>/dev/null || echo 1)
if [ "$np" -gt "$cores" ]; then
  tol=$(python3 -c "print(max($tol, 0.15))")
  echo "$np ranks on $cores cores: the iteration time within $tol"
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" simulate "$job" --report "$dir/predicted.json" >/dev/null
. "$(dirname "$0")/retry_wall_clock.sh"
measure() {
"$mpiexec" --oversubscribe -np "$np" "$bin" run "$job" --backend sleep \
  --report "$dir/measured.json" --trace "$dir/measured.trace.json" || return 1
python3 - "$dir/predicted.json" "$dir/measured.json" "$dir/measured.trace.json" "$job" "$tol" <<'PY'
import json, re, sys
p, m, t = (json.load(open(f)) for f in sys.argv[1:4])
job, tol = open(sys.argv[4]).read(), float(sys.argv[5])
costs = {k: float(v) for k, v in re.findall(r"(\w+_ms): ([0-9.]+)", job)}
want = {"F": costs["forward_ms"], "I": costs["backward_input_ms"],
        "W": costs["backward_weight_ms"], "OPT": costs.get("optimizer_ms", 0.0)}
want["B"] = want["I"] + want["W"]
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)
check(m.get("backend") == "sleep", "the report says backend sleep")
late = []
for ev in t["traceEvents"]:
    if ev.get("ph") != "X" or ev.get("tid") != 0: continue
    kind = re.sub(r"^\d+|\d+$", "", ev["name"])
    if kind not in want: continue
    ms = ev["dur"] * 1e-3
    late.append(ms - want[kind])
if "stragglers" in job:  # each rank's actions are scaled: the iteration check covers them
    check(len(late) > 0, f"{len(late)} compute actions traced (stragglers: durations scaled)")
else:
    check(len(late) > 0 and min(late) >= -0.01,
          f"every compute action sleeps at least its cost (worst {min(late):+.3f} ms)")
    late.sort()
    check(late[len(late) // 2] < 0.5, f"median oversleep {late[len(late) // 2]:.3f} ms < 0.5 ms")
# Without overlap.grad_reduce a rank's reductions start after its last backward (its
# program's REDUCE_GRADs are held until its first OPT), in the measured trace as predicted.
if "REDUCE_GRAD" in json.dumps(t) and "grad_reduce: true" not in job:
    last_grad, first_reduce = {}, {}
    for ev in t["traceEvents"]:
        if ev.get("ph") != "X": continue
        kind = re.sub(r"^\d+|\d+$", "", ev["name"])
        r = ev.get("pid")
        if kind in ("B", "I", "W"):
            last_grad[r] = max(last_grad.get(r, 0), ev["ts"] + ev["dur"])
        elif kind == "REDUCE_GRAD":
            first_reduce[r] = min(first_reduce.get(r, float("inf")), ev["ts"])
    # Each measured step is traced on one time axis: compare within the last step only.
    ok = bool(first_reduce) and all(first_reduce[r] >= last_grad.get(r, 0) - 1 for r in first_reduce)
    check(ok, "reductions start after the rank's last backward: " + ", ".join(
        "rank %s %.2f >= %.2f ms" % (r, first_reduce[r] / 1e3, last_grad.get(r, 0) / 1e3)
        for r in sorted(first_reduce)))
pi, mi = p["iteration_time_ms"], m["iteration_time_ms"]
err = (pi - mi) / mi
check(abs(err) <= tol, f"iteration: predicted {pi:.2f} ms, measured {mi:.2f} ms, error {100 * err:+.2f}% (tolerance {100 * tol:.0f}%)")
for g in ("pp", "dp"):
    x, y = p["comm"]["by_group"][g], m["comm"]["by_group"][g]
    check(x == y and (g != "pp" or x > 0), f"bytes {g}: predicted {x} measured {y}")
print("PASS" if not bad else f"FAIL: {len(bad)} checks")
# 3: only wall-clock checks missed (the iteration time, the median oversleep: retry_wall_clock
# measures again), 1: anything else.
timing = ("iteration:", "median oversleep")
sys.exit(0 if not bad else 3 if all(w.startswith(timing) for w in bad) else 1)
PY
}
retry_wall_clock 5 measure
