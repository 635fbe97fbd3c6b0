#!/usr/bin/env python3
"""The data-parallel synchronisation experiment (issue 15), predicted against measured.

usage: dp_sync_experiment.py PIPETWIN OUT_DIR

1. Ring against parameter servers (1, 2, 4), step time against workers (2, 4, 8, 16), on the
   sleep backend (pp 1: each worker is one rank; N servers are N more ranks). The prediction's
   reduction time is the alpha-beta formula of models/comm.h on the `cpu` device's links
   (5 GB/s, 2 us): ring 2(n-1)a + 2(n-1)/n S/B, servers 2a + 2 max(1, n/k) S/B, S the
   gradient bytes (the report's memory_bytes.grads), given to both sides as costs.dp_reduce_ms.
2. sync, async, stale (s = 1, 4) with one straggler (world rank 3 of 4 workers) at 1.5x and
   3x on the sleep backend: the workers' throughput (samples/s) and the staleness, predicted
   and measured.
3. The same modes on the CPU backend with the tiny model (2 workers, rank 1 the straggler):
   the loss after a fixed number of steps and after a fixed wall time.
Writes OUT_DIR/*.json (every report), summary.csv, sync-modes.csv, loss.csv, README.md and
the plots step_time_vs_workers.png, throughput.png, loss.png. Needs python3-matplotlib.
The environment's PIPETWIN_MPIRUN (default "mpirun --oversubscribe") starts the ranks.
"""
import csv
import json
import os
import shlex
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BIN, OUT = sys.argv[1], sys.argv[2]
MPIRUN = shlex.split(os.environ.get("PIPETWIN_MPIRUN", "mpirun --oversubscribe"))
LINK_BYTES_PER_S, LINK_LATENCY_S = 5e9, 2e-6  # the `cpu` device (models/cluster.cc)
os.makedirs(OUT, exist_ok=True)

SLEEP_COSTS = "{forward_ms: 2, backward_input_ms: 2, backward_weight_ms: 2, optimizer_ms: 1, p2p_ms: 0.05, dp_reduce_ms: %.4f}"
SLEEP_MODEL = "{preset: tiny, layers: 2, hidden: 128, ffn_hidden: 512, heads: 4, vocab: 128, seq_len: 16}"


def write_job(name, text):
    path = os.path.join(OUT, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def simulate(job, name):
    rep = os.path.join(OUT, name + ".predicted.json")
    subprocess.run([BIN, "simulate", job, "--report", rep], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(rep))


def run(job, name, np, backend):
    rep = os.path.join(OUT, name + ".measured.json")
    subprocess.run(MPIRUN + ["-np", str(np), BIN, "run", job, "--backend", backend,
                             "--report", rep], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(rep))


def reduce_ms(grad_bytes, n, servers):
    a, b = LINK_LATENCY_S, LINK_BYTES_PER_S
    if servers == 0:
        return 1e3 * (2 * (n - 1) * a + 2 * (n - 1) / n * grad_bytes / b)
    return 1e3 * (2 * a + 2 * max(1.0, n / servers) * grad_bytes / b)


def sleep_job(workers, servers, extra_training="", extra_exec="", opt_sync=True, steps=10,
              dp_ms=0.0):
    red = ("{device: cpu, dp_reduction: parameter-server, parameter_servers: %d}" % servers
           if servers else "{device: cpu, dp_reduction: ring}")
    return (f"schedule: gpipe\nmicrobatches: 4\noptimizer_sync: {str(opt_sync).lower()}\n"
            f"parallel: {{pp: 1, vpp: 1, dp: {workers}, tp: 1}}\n"
            f"costs: {SLEEP_COSTS % dp_ms}\nmodel: {SLEEP_MODEL}\n"
            f"training: {{micro_batch: 1, optimizer: adam, precision: fp32{extra_training}}}\n"
            f"cluster: {red}\n"
            f"execution: {{steps: {steps}, warmup: 2, timeout_s: 120{extra_exec}}}\n")


# The gradient bytes of the sleep jobs' model (one stage): from a prediction.
probe = simulate(write_job("probe", sleep_job(2, 0)), "probe")
GRAD_BYTES = probe["ranks"][0]["memory_bytes"]["grads"]

# 1. Ring against parameter servers.
rows = []
for servers in (0, 1, 2, 4):
    for workers in (2, 4, 8, 16):
        name = f"scale-{'ring' if servers == 0 else f'ps{servers}'}-w{workers}"
        ms = reduce_ms(GRAD_BYTES, workers, servers)
        job = write_job(name, sleep_job(workers, servers, dp_ms=ms))
        p, m = simulate(job, name), run(job, name, workers + servers, "sleep")
        rows.append({"reduction": "ring" if servers == 0 else f"{servers} servers",
                     "workers": workers, "predicted_reduce_ms": round(ms, 3),
                     "predicted_ms": p["iteration_time_ms"], "measured_ms": m["iteration_time_ms"],
                     "error_pct": 100 * (p["iteration_time_ms"] / m["iteration_time_ms"] - 1)})
        print(name, rows[-1], flush=True)
with open(os.path.join(OUT, "summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)

fig, ax = plt.subplots(figsize=(7, 4.5))
for i, red in enumerate(["ring", "1 servers", "2 servers", "4 servers"]):
    r = [x for x in rows if x["reduction"] == red]
    colour = f"C{i}"
    label = red.replace("1 servers", "1 server")
    ax.plot([x["workers"] for x in r], [x["measured_ms"] for x in r], "o-", color=colour,
            label=f"{label}, measured")
    ax.plot([x["workers"] for x in r], [x["predicted_ms"] for x in r], "x--", color=colour,
            label=f"{label}, predicted")
ax.set_xscale("log", base=2)
ax.set_xticks([2, 4, 8, 16])
ax.set_xticklabels(["2", "4", "8", "16"])
ax.set_xlabel("data-parallel workers")
ax.set_ylabel("iteration time (ms)")
ax.set_title("Ring all-reduce against parameter servers (sleep backend, %.1f MB of gradients)"
             % (GRAD_BYTES / 1e6), fontsize=10)
ax.legend(fontsize=7, ncol=2)
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "step_time_vs_workers.png"), dpi=120)
plt.close(fig)

# 2. Sync modes with a straggler, sleep backend: 4 workers, 1 server, world rank 3 slow.
MODES = [("sync", ""), ("async", ", dp_sync: async"), ("stale 1", ", dp_sync: stale, staleness: 1"),
         ("stale 4", ", dp_sync: stale, staleness: 4")]
modes = []
for slow in (1.5, 3.0):
    for label, tr in MODES:
        name = f"mode-{label.replace(' ', '')}-x{slow}"
        extra = tr if tr else ", dp_sync: sync"
        job = write_job(name, sleep_job(4, 1, extra_training=extra, opt_sync=False, steps=30,
                                        extra_exec=f", stragglers: [{{rank: 3, slowdown: {slow}}}]",
                                        dp_ms=reduce_ms(GRAD_BYTES, 4, 1)))
        p, m = simulate(job, name)["dp_sync"], run(job, name, 5, "sleep")["dp_sync"]
        modes.append({"slowdown": slow, "mode": label,
                      "predicted_samples_per_s": p["samples_per_s"],
                      "measured_samples_per_s": m["samples_per_s"],
                      "error_pct": 100 * (p["samples_per_s"] / m["samples_per_s"] - 1),
                      "predicted_staleness_mean": p["staleness_mean"],
                      "measured_staleness_mean": m["staleness_mean"],
                      "predicted_staleness_max": p["staleness_max"],
                      "measured_staleness_max": m["staleness_max"]})
        print(name, modes[-1], flush=True)
with open(os.path.join(OUT, "sync-modes.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(modes[0].keys()))
    w.writeheader()
    w.writerows(modes)

fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, slow in zip(axes, (1.5, 3.0)):
    r = [x for x in modes if x["slowdown"] == slow]
    xs = range(len(r))
    ax.bar([x - 0.2 for x in xs], [x["predicted_samples_per_s"] for x in r], 0.4,
           label="predicted", color="#4C72B0")
    ax.bar([x + 0.2 for x in xs], [x["measured_samples_per_s"] for x in r], 0.4,
           label="measured", color="#DD8452")
    for x, row in zip(xs, r):
        ax.text(x, row["measured_samples_per_s"], "stale %.2f/%d" % (
            row["measured_staleness_mean"], row["measured_staleness_max"]),
            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([x["mode"] for x in r])
    ax.set_title(f"one worker of 4 at {slow}x (sleep backend)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
axes[0].set_ylabel("samples/s (all workers)")
axes[0].legend(fontsize=8)
fig.suptitle("Throughput by synchronisation mode; labels: measured staleness mean/max", fontsize=10)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "throughput.png"), dpi=120)
plt.close(fig)

# 3. CPU backend, tiny model: 2 workers, 1 server, world rank 1 the straggler.
CPU_STEPS = 40
loss_rows, curves = [], {}
for slow in (1.5, 3.0):
    for label, tr in MODES:
        name = f"cpu-{label.replace(' ', '')}-x{slow}"
        extra = tr if tr else ", dp_sync: sync"
        job = write_job(name, (
            "schedule: gpipe\nmicrobatches: 2\noptimizer_sync: false\n"
            "parallel: {pp: 1, vpp: 1, dp: 2, tp: 1}\nmodel: {preset: tiny, seq_len: 16}\n"
            f"training: {{micro_batch: 2, optimizer: adam, precision: fp32{extra}}}\n"
            "cluster: {device: cpu, dp_reduction: parameter-server, parameter_servers: 1}\n"
            f"execution: {{steps: {CPU_STEPS}, warmup: 0, timeout_s: 300, learning_rate: 0.003, "
            f"stragglers: [{{rank: 1, slowdown: {slow}}}]}}\n"))
        m = run(job, name, 3, "cpu")
        d = m["dp_sync"]
        interval_s = 1.0 / d["steps_per_s"]  # the workers' mean step interval
        curves[(slow, label)] = (m["losses"], interval_s)
        loss_rows.append({"slowdown": slow, "mode": label, "steps_per_s": d["steps_per_s"],
                          "staleness_mean": d["staleness_mean"], "staleness_max": d["staleness_max"],
                          "loss_first": m["losses"][0], "loss_after_steps": m["losses"][-1]})
        print(name, loss_rows[-1], flush=True)
# The fixed wall time: the time the slowest mode took for all its steps at this slowdown.
for slow in (1.5, 3.0):
    budget = min(len(c[0]) * c[1] for (s, _), c in curves.items() if s == slow)
    for row in loss_rows:
        if row["slowdown"] != slow:
            continue
        losses, dt = curves[(slow, row["mode"])]
        k = max(1, min(len(losses), int(budget / dt)))
        row["wall_time_s"] = budget
        row["steps_in_wall_time"] = k
        row["loss_after_wall_time"] = losses[k - 1]
with open(os.path.join(OUT, "loss.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(loss_rows[0].keys()))
    w.writeheader()
    w.writerows(loss_rows)

fig, axes = plt.subplots(2, 2, figsize=(10, 7))
for col, slow in enumerate((1.5, 3.0)):
    for i, (label, _) in enumerate(MODES):
        losses, dt = curves[(slow, label)]
        steps = list(range(1, len(losses) + 1))
        axes[0][col].plot(steps, losses, color=f"C{i}", label=label)
        axes[1][col].plot([k * dt for k in steps], losses, color=f"C{i}", label=label)
    axes[0][col].set_title(f"tiny model, CPU backend, one worker of 2 at {slow}x", fontsize=10)
    axes[0][col].set_xlabel("step")
    axes[1][col].set_xlabel("wall time (s): step x the workers' mean step interval")
    for r in (0, 1):
        axes[r][col].set_ylabel("loss (mean over the workers' step)")
        axes[r][col].grid(alpha=0.3)
        axes[r][col].legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "loss.png"), dpi=120)
plt.close(fig)
print("written to", OUT)
