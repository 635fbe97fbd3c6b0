#!/usr/bin/env bash
# zero1_test.sh PIPETWIN JOB_ZERO0 JOB_ZERO1 NP MPIEXEC: five steps with ZeRO-1 (sharded
# optimizer, parameters all-gathered after each step) must train exactly like ZeRO-0: the
# losses of every step agree to float32 rounding (step 0's gradients are checked separately).
set -eu
bin=$1 job0=$2 job1=$3 np=$4 mpiexec=$5
dir=$(mktemp -d)
for z in 0 1; do
  src=$job0; [ $z = 1 ] && src=$job1
  sed 's/steps: 1, warmup: 0/steps: 5, warmup: 0/' "$src" > "$dir/job$z.yaml"
  "$mpiexec" --oversubscribe -np "$np" "$bin" run "$dir/job$z.yaml" --backend cpu --report "$dir/r$z.json" >/dev/null
done
python3 - "$dir/r0.json" "$dir/r1.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["losses"] for f in sys.argv[1:3])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print("ZeRO-0 losses:", " ".join(f"{x:.6f}" for x in a))
print("ZeRO-1 losses:", " ".join(f"{x:.6f}" for x in b))
print(f"worst relative difference {worst:.2e}")
ok = len(a) == 5 and len(b) == 5 and worst <= 1e-5 and a[-1] < a[0]
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
