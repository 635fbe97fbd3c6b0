#!/usr/bin/env bash
# memory_test.sh PIPETWIN JOB NP MPIEXEC: the simulator's predicted memory per rank (with
# `cluster.device: cpu`, the CPU executor's own inventory) must equal what the executor
# measures, byte for byte, in every category and in total; so must the pipeline,
# data-parallel, tensor-parallel and context-parallel bytes sent.
set -eu
bin=$1 job=$2 np=$3 mpiexec=$4
dir=$(mktemp -d)
"$bin" simulate "$job" --report "$dir/predicted.json" >/dev/null
"$mpiexec" --oversubscribe -np "$np" "$bin" run "$job" --backend cpu --report "$dir/measured.json" >/dev/null
python3 - "$dir/predicted.json" "$dir/measured.json" <<'PY'
import json, sys
p, m = (json.load(open(f)) for f in sys.argv[1:3])
bad = 0
assert len(p["ranks"]) == len(m["ranks"]), "rank counts differ"
for a, b in zip(p["ranks"], m["ranks"]):
    for k in ("params", "grads", "optimizer", "activations", "comm_buffers"):
        x, y = a["memory_bytes"][k], b["memory_bytes"][k]
        print(f"rank {a['rank']} {k:13s} predicted {x:10d} measured {y:10d}" + ("" if x == y else "  MISMATCH"))
        bad += x != y
    x, y = a["comm_bytes_sent"], b["comm_bytes_sent"]
    print(f"rank {a['rank']} {'bytes sent':13s} predicted {x:10d} measured {y:10d}" + ("" if x == y else "  MISMATCH"))
    bad += x != y
    x, y = a["peak_memory_bytes"], b["peak_memory_bytes"]
    print(f"rank {a['rank']} {'peak':13s} predicted {x:10d} measured {y:10d}" + ("" if x == y else "  MISMATCH"))
    bad += x != y
for g in ("pp", "dp", "tp", "cp"):
    x, y = p["comm"]["by_group"][g], m["comm"]["by_group"][g]
    print(f"bytes {g:10s} predicted {x:10d} measured {y:10d}" + ("" if x == y else "  MISMATCH"))
    bad += x != y
print("PASS" if bad == 0 else f"FAIL: {bad} mismatches")
sys.exit(1 if bad else 0)
PY
