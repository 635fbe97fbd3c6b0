#!/usr/bin/env bash
# loss_test.sh PIPETWIN JOB MPIEXEC: trains 50 steps; the mean loss of the last 5 steps must be
# below 0.6 × the first step's.
set -eu
bin=$1 job=$2 mpiexec=$3
report=$(mktemp)
"$mpiexec" --oversubscribe -np 2 "$bin" run "$job" --backend cpu --report "$report"
python3 - "$report" <<'PY'
import json, sys
losses = json.load(open(sys.argv[1]))["losses"]
first, last5 = losses[0], sum(losses[-5:]) / 5
print(f"loss: first step {first:.4f}, mean of the last 5 steps {last5:.4f}, ratio {last5 / first:.3f}")
sys.exit(0 if last5 < 0.6 * first else 1)
PY
