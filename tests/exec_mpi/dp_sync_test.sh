#!/usr/bin/env bash
# dp_sync_test.sh PIPETWIN JOB NP MPIEXEC: training.dp_sync on the CPU backend.
#  - stale with staleness 0 is sync exactly: the same losses, bit for bit, every step; nothing
#    stale in either.
#  - async trains: its loss falls over the steps; its staleness is reported, never negative.
set -eu
bin=$1 job=$2 np=$3 mpiexec=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/dp_sync: sync/dp_sync: stale, staleness: 0/' "$job" > "$dir/stale0.yaml"
sed 's/dp_sync: sync/dp_sync: async/' "$job" > "$dir/async.yaml"
cp "$job" "$dir/sync.yaml"
for m in sync stale0 async; do
  "$mpiexec" --oversubscribe -np "$np" "$bin" run "$dir/$m.yaml" --backend cpu \
    --report "$dir/$m.json" >/dev/null
done
python3 - "$dir" <<'PY'
import json, os, sys
r = {m: json.load(open(os.path.join(sys.argv[1], m + ".json"))) for m in ("sync", "stale0", "async")}
bad = 0
def check(what, ok):
    global bad
    print(("ok   " if ok else "FAIL ") + what)
    bad += not ok
for m, x in r.items():
    print(f"{m:7s} losses", " ".join(f"{v:.7f}" for v in x["losses"]),
          "| staleness mean", x["dp_sync"]["staleness_mean"], "max", x["dp_sync"]["staleness_max"])
check("stale 0 equals sync bit for bit", r["sync"]["losses"] == r["stale0"]["losses"])
check("nothing stale under sync and stale 0",
      r["sync"]["dp_sync"]["staleness_max"] == 0 and r["stale0"]["dp_sync"]["staleness_max"] == 0)
a = r["async"]
check("async: the loss falls", a["losses"][-1] < a["losses"][0] - 0.05)
check("async: mode and staleness reported",
      a["dp_sync"]["mode"] == "async" and a["dp_sync"]["staleness_bound"] == -1
      and a["dp_sync"]["staleness_max"] >= 0 and len(a["dp_sync"]["worker_steps_per_s"]) == 3)
print("PASS" if bad == 0 else f"FAIL: {bad}")
sys.exit(1 if bad else 0)
PY
