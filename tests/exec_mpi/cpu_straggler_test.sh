#!/usr/bin/env bash
# cpu_straggler_test.sh PIPETWIN JOB MPIEXEC: execution.stragglers on the CPU backend
# (exec/straggler_backend.h): world rank 1 at 3x computes its program at least 2 times as
# long as rank 0 computes the same program (without the straggler the ratio is 1; no upper
# bound: on a loaded machine, load average 11 on 2 cores, a normal-priority process that waits
# gets its core back milliseconds late and the ratio was measured at 12; and not 3 either:
# other work inflates rank 0's actions too, and 1.42 was once seen at a load average of 5), and the loss equals the run without stragglers (a slow rank
# computes the same numbers).
# Where only the ratio misses, the slow run is measured again after a 10 s pause, up to five
# times in all: a fresh clone's CI under ASan read 1.82 on 2026-11-28, run serially on 2 cores.
# A straggler that is not applied reads about 1 every time; the losses must match every time.
set -eu
bin=$1 job=$2 mpiexec=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/steps: 1, warmup: 0, timeout_s: 120}/steps: 3, warmup: 1, timeout_s: 120}/' "$job" > "$dir/plain.yaml"
sed 's/timeout_s: 120}/timeout_s: 120, stragglers: [{rank: 1, slowdown: 3}]}/' "$dir/plain.yaml" > "$dir/slow.yaml"
"$mpiexec" --oversubscribe -np 2 "$bin" run "$dir/plain.yaml" --backend cpu --report "$dir/plain.json" >/dev/null
. "$(dirname "$0")/retry_wall_clock.sh"
measure() {
  "$mpiexec" --oversubscribe -np 2 "$bin" run "$dir/slow.yaml" --backend cpu --report "$dir/slow.json" >/dev/null || return 1
  python3 - "$dir/plain.json" "$dir/slow.json" <<'PY'
import json, sys
plain, slow = (json.load(open(f)) for f in sys.argv[1:3])
busy = [r["compute_busy_ms"] for r in slow["ranks"]]
ratio = busy[1] / busy[0]
print(f"busy ms rank 0 {busy[0]:.2f}, rank 1 {busy[1]:.2f}: ratio {ratio:.2f} (nominal 3, at least 2)")
print("losses", plain["losses"], slow["losses"])
if plain["losses"] != slow["losses"]:
    print("FAIL: the losses differ")
    sys.exit(1)
print("PASS" if ratio >= 2 else "FAIL: the ratio")
# 3: only the wall-clock ratio missed (measured again), 0: every check held.
sys.exit(0 if ratio >= 2 else 3)
PY
}
retry_wall_clock 5 measure
