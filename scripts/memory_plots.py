#!/usr/bin/env python3
"""Memory plots of issue 14 (results/memory/): predicted against measured on the CPU backend.

usage: memory_plots.py PIPETWIN OUT_DIR   (from the repository root)

  rank_memory.png   peak memory of every pipeline rank, by category, predicted (`simulate`,
                    cluster.device: cpu) next to measured (`run --backend cpu`, the executor's
                    allocation accounting), for 1F1B, ZB-H2 and interleaved 1F1B at pp 2 and
                    pp 4: the pipeline's memory imbalance (under 1F1B rank 0 holds p
                    microbatches in flight, the last rank one).
  recompute.png     peak memory (the largest rank's) against iteration time for recompute
                    none, selective and full, predicted and measured, for 1F1B and ZB-H2 at
                    pp 2: `pipetwin validate` (calibrated predictions) on the job files of the
                    validation sets pp2, recompute-selective and recompute-full, in one session.
  rank_memory.md, recompute.md   the numbers of the two plots.

The runs for rank_memory.png use one step (memory does not depend on timing) with mpirun
(PIPETWIN_MPIRUN, default "mpirun --oversubscribe"); pp 4 oversubscribes a 2-core machine, which
changes no byte. Needs python3-matplotlib (scripts/deps.sh).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

MEM_CATEGORIES = ["params", "grads", "optimizer", "activations", "comm_buffers"]
MEM_COLOURS = ["#4C72B0", "#55A868", "#8172B3", "#DD8452", "#937860"]
MIB = 1024.0 * 1024.0
SCHEDULES = [("1f1b", 1), ("zb-h2", 1), ("interleaved-1f1b", 2)]
MODES = ["none", "selective", "full"]
MODE_SETS = {"none": "pp2", "selective": "recompute-selective", "full": "recompute-full"}
MODE_MARKERS = {"none": "o", "selective": "s", "full": "^"}

# 8 layers (interleaved at pp 4 needs 8 chunks); activations dominate, as in a long sequence.
JOB = """schedule: {schedule}
microbatches: 8
parallel: {{pp: {pp}, vpp: {vpp}, dp: 1, tp: 1}}
model: {{preset: tiny, layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 128, seq_len: 128}}
training: {{micro_batch: 1, optimizer: adam, precision: fp32}}
cluster: {{device: cpu}}
execution: {{steps: 1, warmup: 0, timeout_s: 300}}
"""


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def reports(pipetwin, mpirun, tmp, schedule, pp, vpp):
    job = os.path.join(tmp, f"{schedule}-pp{pp}.yaml")
    with open(job, "w") as f:
        f.write(JOB.format(schedule=schedule, pp=pp, vpp=vpp))
    pred, meas = job + ".predicted.json", job + ".measured.json"
    run([pipetwin, "simulate", job, "--report", pred])
    run(shlex.split(mpirun) + ["-np", str(pp), pipetwin, "run", job, "--backend", "cpu",
                               "--report", meas])
    with open(pred) as f, open(meas) as g:
        return json.load(f), json.load(g)


def stacked(ax, x, mem, width, hatch):
    bottom = 0.0
    for cat, colour in zip(MEM_CATEGORIES, MEM_COLOURS):
        v = mem[cat] / MIB
        ax.bar(x, v, width, bottom=bottom, color=colour, hatch=hatch, edgecolor="white",
               linewidth=0.5)
        bottom += v


def rank_memory(pipetwin, mpirun, out):
    cases = [(s, vpp, pp) for pp in (2, 4) for s, vpp in SCHEDULES]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharey="row")
    lines = ["| schedule | pp | rank | predicted peak (bytes) | measured peak (bytes) | "
             "activations predicted | activations measured |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    mismatches = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (schedule, vpp, pp) in enumerate(cases):
            p, m = reports(pipetwin, mpirun, tmp, schedule, pp, vpp)
            ax = axes[i // 3][i % 3]
            for r, (a, b) in enumerate(zip(p["ranks"], m["ranks"])):
                stacked(ax, r - 0.2, a["memory_bytes"], 0.38, None)
                stacked(ax, r + 0.2, b["memory_bytes"], 0.38, "//")
                for x, rep in ((r - 0.2, a), (r + 0.2, b)):  # the peak of the sum
                    ax.hlines(rep["peak_memory_bytes"] / MIB, x - 0.19, x + 0.19, colors="black",
                              linewidth=1.5)
                same = a["memory_bytes"] == b["memory_bytes"] and \
                    a["peak_memory_bytes"] == b["peak_memory_bytes"]
                mismatches += not same
                lines.append(
                    f"| {schedule} | {pp} | {r} | {a['peak_memory_bytes']} | "
                    f"{b['peak_memory_bytes']} | {a['memory_bytes']['activations']} | "
                    f"{b['memory_bytes']['activations']} |")
            ax.set_title(f"{schedule}, pp {pp}" + (f", vpp {vpp}" if vpp > 1 else ""))
            ax.set_xticks(range(pp))
            ax.set_xticklabels([f"rank {r}" for r in range(pp)])
            if i % 3 == 0:
                ax.set_ylabel("MiB: each category's peak, stacked")
            ax.grid(axis="y", alpha=0.3)
    handles = [Patch(color=c, label=n) for n, c in zip(MEM_CATEGORIES, MEM_COLOURS)]
    handles += [Patch(facecolor="white", edgecolor="black", label="left: predicted"),
                Patch(facecolor="white", edgecolor="black", hatch="//",
                      label="right: measured"),
                plt.Line2D([], [], color="black", linewidth=1.5, label="peak of the total")]
    fig.legend(handles=handles, loc="lower center", ncol=8, fontsize=9)
    fig.suptitle("Memory per pipeline rank on the CPU backend: predicted (simulate) against "
                 "measured (run), 8 microbatches, 8 layers\nunder 1F1B rank 0 holds p "
                 "microbatches' activations, the last rank one")
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    fig.savefig(os.path.join(out, "rank_memory.png"), dpi=110)
    plt.close(fig)
    with open(os.path.join(out, "rank_memory.md"), "w") as f:
        f.write("# Memory per pipeline rank, predicted against measured\n\n"
                "Made by `scripts/memory_plots.py` (the job: see its `JOB`). Peak: the "
                "largest sum of the categories over the step; per category, each one's own "
                "peak, as the executor's accountant measures them.\n\n")
        f.write("\n".join(lines) + "\n\n")
        f.write("All equal, byte for byte.\n" if mismatches == 0 else
                f"{mismatches} ranks differ.\n")
    return mismatches


def recompute(pipetwin, out, schedules):
    """Validate the pp 2 job under recompute none, selective and full (the validation sets'
    job files), one session, so the three modes meet the same machine."""
    jobs = {mode: f"examples/validate/{MODE_SETS[mode]}.yaml" for mode in MODES}
    rows = {}  # (schedule, mode) -> (pred_ms, meas_ms, pred_peak, meas_peak)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([pipetwin, "validate", *jobs.values(), "--schedules", ",".join(schedules),
                        "--no-plots", "--out", tmp], check=True)
        with open(os.path.join(tmp, "summary.md")) as f:
            summary = f.read().replace(tmp, "(a temporary folder)")
        for mode in MODES:
            for schedule in schedules:
                d = os.path.join(tmp, f"{MODE_SETS[mode]}-{schedule}")
                with open(os.path.join(d, "predicted.json")) as f, \
                        open(os.path.join(d, "measured.json")) as g:
                    p, m = json.load(f), json.load(g)
                rows[(schedule, mode)] = (
                    p["iteration_time_ms"], m["iteration_time_ms"],
                    max(r["peak_memory_bytes"] for r in p["ranks"]),
                    max(r["peak_memory_bytes"] for r in m["ranks"]))
    with open(os.path.join(out, "recompute.md"), "w") as f:
        f.write("# Recompute none, selective, full: peak memory and iteration time\n\n"
                "Made by `scripts/memory_plots.py` (`pipetwin validate` on "
                + ", ".join(f"`{j}`" for j in jobs.values()) + ").\n\n"
                "| schedule | recompute | predicted ms | measured ms | predicted peak (bytes) "
                "| measured peak (bytes) |\n|---|---|--:|--:|--:|--:|\n")
        for (schedule, mode), (pt, mt, pm, mm) in sorted(rows.items()):
            f.write(f"| {schedule} | {mode} | {pt:.2f} | {mt:.2f} | {pm} | {mm} |\n")
        f.write("\nThe validation summary of that session:\n\n" + summary)
    fig, ax = plt.subplots(figsize=(9, 6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, s in enumerate(schedules):
        c = colours[i % len(colours)]
        pts = [(mode, rows[(s, mode)]) for mode in MODES if (s, mode) in rows]
        ax.plot([v[1] for _, v in pts], [v[3] / MIB for _, v in pts], "-", color=c, alpha=0.5)
        for mode, (pt, mt, pm, mm) in pts:
            ax.plot(mt, mm / MIB, MODE_MARKERS[mode], color=c, markersize=8)
            ax.plot(pt, pm / MIB, MODE_MARKERS[mode], color=c, markersize=8,
                    markerfacecolor="none")
        ax.annotate(s, (pts[0][1][1], pts[0][1][3] / MIB), textcoords="offset points",
                    xytext=(6, 4), fontsize=8, color=c)
    handles = [plt.Line2D([], [], marker=MODE_MARKERS[m], linestyle="", color="black",
                          label=f"recompute {m}") for m in MODES]
    handles += [plt.Line2D([], [], marker="o", linestyle="", color="black", label="measured"),
                plt.Line2D([], [], marker="o", linestyle="", color="black",
                           markerfacecolor="none", label="predicted (calibrated)")]
    ax.legend(handles=handles, fontsize=9)
    ax.set_xlabel("iteration time (ms)")
    ax.set_ylabel("peak memory of the largest rank (MiB)")
    ax.set_title("Recompute trades memory for time: pp 2, 8 microbatches, CPU backend\n"
                 "(the job of examples/validate/pp2.yaml under each setting)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "recompute.png"), dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pipetwin, out = sys.argv[1], sys.argv[2]
    mpirun = os.environ.get("PIPETWIN_MPIRUN", "mpirun --oversubscribe")
    os.environ["PIPETWIN_MPIRUN"] = mpirun
    os.makedirs(out, exist_ok=True)
    bad = rank_memory(pipetwin, mpirun, out)
    recompute(pipetwin, out, ["1f1b", "zb-h2"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
