#!/usr/bin/env bash
# param_server_test.sh PIPETWIN JOB NP BACKEND MPIEXEC: a job with
# `cluster.dp_reduction: parameter-server` (NP = workers + servers).
#  - Bytes: every worker's and every server's bytes sent per step, measured, equal the
#    prediction exactly; each worker pushes exactly its parameters' bytes (float32: its
#    memory_bytes.params), and the servers receive what the workers push, in all.
#  - cpu: five steps train exactly like the ring: the losses of every step (each on the
#    parameters the servers sent back) agree within 1e-6 relative (the servers sum the pushes
#    and step the same Adam or SGD over their shards).
#  - mpirun with the workers' count only is refused, naming the count it needs.
set -eu
bin=$1 job=$2 np=$3 backend=$4 mpiexec=$5
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/steps: 1, warmup: 0/steps: 5, warmup: 0/' "$job" > "$dir/ps.yaml"
sed 's/dp_reduction: parameter-server/dp_reduction: ring/' "$dir/ps.yaml" > "$dir/ring.yaml"
"$bin" simulate "$dir/ps.yaml" --report "$dir/predicted.json" >/dev/null
"$mpiexec" --oversubscribe -np "$np" "$bin" run "$dir/ps.yaml" --backend "$backend" \
  --report "$dir/measured.json" >/dev/null
workers=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['ranks']))" "$dir/predicted.json")
if [ "$backend" = cpu ]; then
  "$mpiexec" --oversubscribe -np "$workers" "$bin" run "$dir/ring.yaml" --backend cpu \
    --report "$dir/ring.json" >/dev/null
fi
set +e
"$mpiexec" --oversubscribe -np "$workers" "$bin" run "$dir/ps.yaml" --backend "$backend" \
  >"$dir/wrong.out" 2>&1
rc=$?
set -e
python3 - "$dir" "$backend" "$np" "$rc" <<'PY'
import json, os, sys
d, backend, np, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = json.load(open(os.path.join(d, "predicted.json")))
m = json.load(open(os.path.join(d, "measured.json")))
bad = 0
def check(what, ok):
    global bad
    print(("ok   " if ok else "FAIL ") + what)
    bad += not ok
check(f"{len(m['ranks'])} worker rows, predicted {len(p['ranks'])}", len(p["ranks"]) == len(m["ranks"]))
for a, b in zip(p["ranks"], m["ranks"]):
    check(f"rank {a['rank']} bytes sent: predicted {a['comm_bytes_sent']} measured {b['comm_bytes_sent']}",
          a["comm_bytes_sent"] == b["comm_bytes_sent"])
for g in ("pp", "dp", "tp"):
    x, y = p["comm"]["by_group"][g], m["comm"]["by_group"][g]
    check(f"bytes {g}: predicted {x} measured {y}", x == y)
ps, ms = p.get("parameter_servers", []), m.get("parameter_servers", [])
check(f"{len(ms)} server rows, predicted {len(ps)}", len(ps) == len(ms) > 0)
for a, b in zip(ps, ms):
    check(f"server {a['server']} (rank {b['rank']}) sent {b['bytes_sent']} received {b['bytes_received']}, "
          f"predicted {a['bytes_sent']} / {a['bytes_received']}",
          a == b and b["rank"] == len(m["ranks"]) + b["server"])
# Independent truth: a worker pushes its parameters once (float32), and the servers take in
# exactly what the workers push.
if backend == "cpu":
    pushed = sum(r["memory_bytes"]["params"] for r in m["ranks"])
    check(f"workers push their parameters' bytes: {pushed} == dp bytes {m['comm']['by_group']['dp']}",
          pushed == m["comm"]["by_group"]["dp"])
check(f"servers receive what the workers push: {sum(s['bytes_received'] for s in ms)}",
      sum(s["bytes_received"] for s in ms) == m["comm"]["by_group"]["dp"])
if backend == "cpu":
    r = json.load(open(os.path.join(d, "ring.json")))
    a, b = r["losses"], m["losses"]
    worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    print("ring losses:            ", " ".join(f"{x:.7f}" for x in a))
    print("parameter-server losses:", " ".join(f"{x:.7f}" for x in b))
    check(f"5 steps, worst relative difference {worst:.2e} <= 1e-6",
          len(a) == len(b) == 5 and worst <= 1e-6)
wrong = open(os.path.join(d, "wrong.out")).read()
said = [l for l in wrong.splitlines() if l.startswith("pipetwin:")]
check(f"mpirun -np {len(m['ranks'])} refused with exit 2 naming -np {np}: {said[0] if said else wrong}",
      rc == 2 and "parameter servers" in wrong and f"mpirun -np {np}" in wrong)
print("PASS" if bad == 0 else f"FAIL: {bad}")
sys.exit(1 if bad else 0)
PY
