#!/usr/bin/env bash
# dp_sync_test.sh PIPETWIN: training.dp_sync and parameter servers on the command line. Bad
# combinations exit 2 naming the key; a good one reports the dp_sync and parameter_servers
# sections. Async and stale are protocols of parameter servers: they need
# cluster.dp_reduction: parameter-server, dp >= 2, zero: 0 and optimizer_sync: false.
set -u
bin=$1
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

head='schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 1, dp: 4}\ncosts: {forward_ms: 1, dp_reduce_ms: 0.5}\n'
ps='cluster: {dp_reduction: parameter-server, parameter_servers: 2}\n'
expect 2 "training.dp_sync: must be one of sync, async, stale" -- simulate \
  "$(job bad.yaml "${head}optimizer_sync: false\n${ps}training: {dp_sync: hogwild}\n")"
expect 2 "training.staleness: must be an integer in \[0, " -- simulate \
  "$(job neg.yaml "${head}optimizer_sync: false\n${ps}training: {dp_sync: stale, staleness: -1}\n")"
expect 2 "training.staleness: required with dp_sync: stale" -- simulate \
  "$(job nos.yaml "${head}optimizer_sync: false\n${ps}training: {dp_sync: stale}\n")"
expect 2 "training.staleness: only with dp_sync: stale" -- simulate \
  "$(job s-async.yaml "${head}optimizer_sync: false\n${ps}training: {dp_sync: async, staleness: 2}\n")"
expect 2 "training.dp_sync: dp_sync: async with ZeRO \(parallel.zero: 1\)" -- simulate \
  "$(job zero.yaml 'schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 1, dp: 4, zero: 1}\ncosts: {forward_ms: 1}\noptimizer_sync: false\n'"${ps}"'training: {dp_sync: async}\n')"
expect 2 "training.dp_sync: dp_sync: stale needs cluster.dp_reduction: parameter-server" -- simulate \
  "$(job ring.yaml "${head}optimizer_sync: false\ntraining: {dp_sync: stale, staleness: 1}\n")"
expect 2 "training.dp_sync: dp_sync: async needs optimizer_sync: false" -- simulate \
  "$(job osync.yaml "${head}${ps}training: {dp_sync: async}\n")"
expect 2 "training.dp_sync: dp_sync: async needs data parallelism: parallel.dp >= 2" -- simulate \
  "$(job dp1.yaml "schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 2, dp: 1}\ncosts: {forward_ms: 1}\noptimizer_sync: false\n${ps}training: {dp_sync: async}\n")"
# What simulate plays is bounded before anything runs: workers x (warm-up + steps) at most
# 2^22 (4096 x 1025 is 4,198,400), and with variability at most 2^20 plays (4096 x 257).
big='schedule: 1f1b\nmicrobatches: 4\nparallel: {pp: 1, dp: 4096}\ncosts: {forward_ms: 1}\noptimizer_sync: false\n'"${ps}"'training: {dp_sync: async}\n'
expect 2 "execution.steps: 1025 steps x 4096 workers \(dp\) = 4198400; with parameter servers.*at most 4194304" -- simulate \
  "$(job wsteps.yaml "${big}execution: {warmup: 24, steps: 1001}\n")"
expect 2 "execution.steps: 1052672 plays x [0-9]+ schedule actions.*at most 1048576 plays" -- simulate \
  "$(job plays.yaml "${big}execution: {warmup: 24, steps: 233, stragglers: {variability: {distribution: normal, cv: 0.1}}}\n")"
good=$(job good.yaml "${head}optimizer_sync: false\nmodel: {preset: tiny, layers: 2, seq_len: 16}\ncluster: {device: cpu, dp_reduction: parameter-server, parameter_servers: 2}\ntraining: {dp_sync: stale, staleness: 1, precision: fp32}\n")
expect 0 "iteration" -- simulate "$good" --report "$dir/r.json"
if ! python3 - "$dir/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d, s = r["dp_sync"], r["parameter_servers"]
# 4 equal workers, no stragglers: every worker runs at the sync pace, nothing is stale.
ok = (d["mode"] == "stale" and d["staleness_bound"] == 1 and len(d["worker_steps_per_s"]) == 4
      and d["staleness_max"] == 0 and [x["rank"] for x in s] == [4, 5])
print("ok: dp_sync and parameter_servers sections" if ok else f"FAIL: {d} {s}")
sys.exit(0 if ok else 1)
PY
then
  fail=1
fi
exit $fail
