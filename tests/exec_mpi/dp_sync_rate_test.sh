#!/usr/bin/env bash
# dp_sync_rate_test.sh PIPETWIN JOB NP MPIEXEC [TOLERANCE]: the simulator's prediction of an async run
# with a straggler on the sleep backend against the measurement: every worker's step rate
# within ±TOLERANCE (default 0.25, generous: a shared 2-core CI machine; results/dp-sync/ has the
# ±10% runs; 0.40 under the sanitizers), the job's samples/s within it too, and the straggler's rate a third of the others' (closed form:
# its step is 3x theirs and nobody waits). Staleness max within 2 of the prediction.
set -eu
bin=$1 job=$2 np=$3 mpiexec=$4 tol=${5:-0.25}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" simulate "$job" --report "$dir/p.json" >/dev/null
"$mpiexec" --oversubscribe -np "$np" "$bin" run "$job" --backend sleep --report "$dir/m.json" >/dev/null
python3 - "$dir/p.json" "$dir/m.json" "$tol" <<'PY'
import json, sys
p, m = (json.load(open(f))["dp_sync"] for f in sys.argv[1:3])
tol = float(sys.argv[3])
bad = 0
def check(what, ok):
    global bad
    print(("ok   " if ok else "FAIL ") + what)
    bad += not ok
for w, (a, b) in enumerate(zip(p["worker_steps_per_s"], m["worker_steps_per_s"])):
    check(f"worker {w}: predicted {a:.2f} steps/s, measured {b:.2f} ({100 * (a / b - 1):+.1f}%)",
          abs(a / b - 1) <= tol)
a, b = p["samples_per_s"], m["samples_per_s"]
check(f"samples/s predicted {a:.1f} measured {b:.1f} ({100 * (a / b - 1):+.1f}%)", abs(a / b - 1) <= tol)
r = m["worker_steps_per_s"]
ratio = r[3] / (sum(r[:3]) / 3)
check(f"the 3x worker runs at {ratio:.2f} of the others' rate (1/3 = 0.33)", 0.25 <= ratio <= 0.42)
check(f"staleness max predicted {p['staleness_max']} measured {m['staleness_max']}",
      abs(p["staleness_max"] - m["staleness_max"]) <= 2)
print("PASS" if bad == 0 else f"FAIL: {bad}")
sys.exit(1 if bad else 0)
PY
