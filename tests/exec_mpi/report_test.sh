#!/usr/bin/env bash
# report_test.sh PIPETWIN JOB NP MPIEXEC: the measured report (run) and the predicted one
# (simulate) of the same job come from one builder, so they have the same keys with the same
# meaning: iteration_time_ms is the makespan of the median step under optimizer_sync and its
# longest rank span without; every rank row carries the in-flight and pending-W peaks, equal
# on both sides (they follow from the program).
set -eu
bin=$1 job=$2 np=$3 mpiexec=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" simulate "$job" --report "$dir/predicted.json" >/dev/null
"$mpiexec" --oversubscribe -np "$np" "$bin" run "$job" --backend cpu --report "$dir/measured.json" >/dev/null
python3 - "$dir/predicted.json" "$dir/measured.json" <<'PY'
import json, statistics, sys
p, m = (json.load(open(f)) for f in sys.argv[1:3])
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)
# Same keys at the top (measured-only and predicted-only sections apart) and in every row.
side_only = {"measured_steps_ms", "losses", "backend", "reference_max_relative_error",
             "breakdown", "profile", "jitter"}
check(set(p) - side_only == set(m) - side_only, f"top-level keys {sorted(set(p) ^ set(m))}")
for a, b in zip(p["ranks"], m["ranks"]):
    check(set(a) == set(b), f"rank {a['rank']} keys")
    for k in ("peak_inflight_microbatches", "peak_pending_weight_grads", "pp_rank"):
        check(a[k] == b[k], f"rank {a['rank']} {k}: predicted {a[k]} measured {b[k]}")
# From the program: on 2 ranks ZB-H2 holds 2(p - r) - 1 microbatches (3, 1), 1F1B p - r (2, 1).
want = {"zb-h2": [3, 1], "1f1b": [2, 1]}.get(m["schedule"])
if want:
    check([r["peak_inflight_microbatches"] for r in m["ranks"]] == want, f"in-flight {want}")
sync = m["optimizer_sync"]
longest = max(r["span_ms"] for r in m["ranks"])
expected = m["makespan_ms"] if sync else longest
check(abs(m["iteration_time_ms"] - expected) < 1e-6,
      f"measured iteration {m['iteration_time_ms']:.6f} ms = {'makespan' if sync else 'longest span'} {expected:.6f} ms")
steps = sorted(m["measured_steps_ms"])
check(abs(steps[len(steps) // 2] - m["iteration_time_ms"]) < 1e-6,
      "the reported step is the median of the measured steps")
plongest = max(r["span_ms"] for r in p["ranks"])
check(abs(p["iteration_time_ms"] - (p["makespan_ms"] if sync else plongest)) < 1e-9,
      "predicted iteration by the same definition")
print("PASS" if not bad else f"FAIL: {len(bad)} checks")
sys.exit(1 if bad else 0)
PY
