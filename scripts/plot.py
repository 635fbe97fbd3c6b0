#!/usr/bin/env python3
"""Plots of predicted against measured, from `pipetwin compare` or `pipetwin validate` output.

usage: plot.py DIR [--tutorial]

DIR is either one comparison (predicted.json, measured.json and, optionally,
predicted.trace.json and measured.trace.json, as `pipetwin compare --out DIR` leaves them)
or a validation folder (summary.csv and one such sub-folder per entry, as `pipetwin validate`
leaves them). Writes into DIR:
  timeline-<entry>.png  each rank's compute stream, predicted above measured, same time axis
  iteration_time.png    iteration time per entry, predicted against measured
  memory.png            peak memory per rank by category, predicted against measured
With --tutorial, iteration_time.png is drawn as the classic experiment: step time against
the configuration (one device; two devices without pipelining; 2, 4, 8 microbatches).
Needs python3-matplotlib (scripts/deps.sh). Agg backend: no display needed.
"""
import csv
import json
import os
import re
import sys

try:
    import matplotlib
except ImportError:  # exit 3: pipetwin says what to install
    print("%s: needs python3-matplotlib (scripts/deps.sh installs it)" % sys.argv[0],
          file=sys.stderr)
    sys.exit(3)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

KIND_COLOURS = {
    "F": "#4C72B0",
    "B": "#DD8452",
    "I": "#C44E52",
    "W": "#55A868",
    "OPT": "#8172B3",
}
KIND_NAMES = {
    "F": "forward (F)",
    "B": "backward (B)",
    "I": "input gradient (I)",
    "W": "weight gradient (W)",
    "OPT": "optimizer step",
}
MEM_CATEGORIES = ["params", "grads", "optimizer", "activations", "comm_buffers"]
MEM_COLOURS = ["#4C72B0", "#55A868", "#8172B3", "#DD8452", "#937860"]
ACTION = re.compile(r"^(\d+)([A-Z_]+?)(\d*)$")
MIB = 1024.0 * 1024.0


def load_json(path):
    with open(path) as f:
        return json.load(f)


def compute_events(trace_path):
    """{rank: [(start_ms, dur_ms, kind, microbatch)]} of the compute stream (tid 0)."""
    data = load_json(trace_path)
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = {}
    for e in events:
        if e.get("ph") != "X" or e.get("tid") != 0:
            continue
        m = ACTION.match(e.get("name", ""))
        if not m:
            continue
        out.setdefault(e["pid"], []).append(
            (e["ts"] / 1000.0, e["dur"] / 1000.0, m.group(2), m.group(3)))
    return out


def entry_title(label, report):
    return "%s — %s, pp %d, %d microbatches" % (
        label, report.get("schedule", "?"), report.get("pp", 0), report.get("microbatches", 0))


def plot_timeline(entry_dir, label, out_path):
    pt = os.path.join(entry_dir, "predicted.trace.json")
    mt = os.path.join(entry_dir, "measured.trace.json")
    if not (os.path.exists(pt) and os.path.exists(mt)):
        return False
    pred, meas = compute_events(pt), compute_events(mt)
    preport = load_json(os.path.join(entry_dir, "predicted.json"))
    mreport = load_json(os.path.join(entry_dir, "measured.json"))
    ranks = sorted(set(pred) | set(meas))
    rows = []  # (label, events, predicted?)
    for r in ranks:
        rows.append(("rank %d predicted" % r, pred.get(r, []), True))
        rows.append(("rank %d measured" % r, meas.get(r, []), False))
    end = max([s + d for evs in list(pred.values()) + list(meas.values()) for s, d, _, _ in evs]
              + [1e-9])
    fig, ax = plt.subplots(figsize=(12, 0.75 * len(rows) + 1.9))
    kinds_seen = set()
    for i, (_, evs, is_pred) in enumerate(rows):
        y = len(rows) - 1 - i
        for s, d, kind, mb in evs:
            kinds_seen.add(kind)
            ax.barh(y, d, left=s, height=0.72, color=KIND_COLOURS.get(kind, "#999999"),
                    edgecolor="white", linewidth=0.4, alpha=0.8 if is_pred else 1.0,
                    hatch="//" if is_pred else None)
            if mb and d > end / 70:
                ax.text(s + d / 2, y, mb, ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in reversed(rows)])
    for k in range(1, len(ranks)):
        ax.axhline(2 * k - 0.5, color="black", linewidth=0.6)
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel("time from the start of the step (ms)")
    ax.set_title("Compute stream per rank, predicted (hatched) above measured (solid)\n"
                 + entry_title(label, preport)
                 + ": iteration %.1f ms predicted, %.1f ms measured"
                 % (preport["iteration_time_ms"], mreport["iteration_time_ms"]), fontsize=10)
    handles = [Patch(color=KIND_COLOURS[k], label=KIND_NAMES[k])
               for k in KIND_COLOURS if k in kinds_seen]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1), frameon=False,
              fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=130)
    plt.close(fig)
    return True


def plot_iteration(entries, out_path, tutorial):
    labels = [e["label"] for e in entries]
    pred = [e["predicted_ms"] for e in entries]
    meas = [e["measured_ms"] for e in entries]
    lo = [e["measured_ms"] - e["min_ms"] for e in entries]
    hi = [e["max_ms"] - e["measured_ms"] for e in entries]
    # With a jitter profile the prediction is the median of played steps: their spread too.
    plo = [max(0.0, e["predicted_ms"] - e.get("pred_min_ms", e["predicted_ms"])) for e in entries]
    phi = [max(0.0, e.get("pred_max_ms", e["predicted_ms"]) - e["predicted_ms"]) for e in entries]
    spread = any(v > 0 for v in plo + phi)
    x = range(len(entries))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(6.5, 1.05 * len(entries) + 2.5), 4.8))
    ax.bar([i - width / 2 for i in x], pred, width, yerr=[plo, phi] if spread else None,
           capsize=3, label="predicted (simulate --profile%s)" %
           ("; bar: min–max of the played steps" if spread else ""), color="#4C72B0")
    ax.bar([i + width / 2 for i in x], meas, width, yerr=[lo, hi], capsize=3,
           label="measured (run: median step; bar: min–max)", color="#DD8452")
    top = max([p + h for p, h in zip(pred, phi)] + [m + h for m, h in zip(meas, hi)] + [1e-9])
    for i, e in enumerate(entries):
        ax.text(i, max(pred[i] + phi[i], meas[i] + hi[i]) + top * 0.015, "%+.1f%%" % e["error_pct"],
                ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, top * 1.32)  # headroom for the labels and the legend
    ax.set_xlim(-0.7, len(entries) - 0.3)
    ax.set_xticks(list(x))
    rotate = len(entries) > 5 or max(len(s) for s in labels) > 12
    ax.set_xticklabels(labels, rotation=30 if rotate else 0, ha="right" if rotate else "center",
                       fontsize=8 if rotate else 9)
    ax.set_ylabel("iteration time (ms)")
    if tutorial:
        ax.set_title("The classic experiment: one device, two devices without pipelining,\n"
                     "then pipelined with more microbatches (same global batch); "
                     "label: prediction error")
    else:
        ax.set_title("Iteration time per schedule, predicted against measured\n"
                     "(label: prediction error)")
    ax.legend(loc="upper left", ncol=1 if spread else 2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out_path, dpi=130)
    plt.close(fig)


def with_predicted_spread(entry):
    """Adds pred_min_ms / pred_max_ms from predicted.json's jitter key, where there is one."""
    path = os.path.join(entry["dir"], "predicted.json")
    if os.path.exists(path):
        j = load_json(path).get("jitter")
        if isinstance(j, dict) and "min_ms" in j and "max_ms" in j:
            entry["pred_min_ms"], entry["pred_max_ms"] = j["min_ms"], j["max_ms"]
    return entry


def plot_memory(entries, out_path):
    groups = []  # (x label, predicted rank dict, measured rank dict)
    for e in entries:
        p = load_json(os.path.join(e["dir"], "predicted.json"))
        m = load_json(os.path.join(e["dir"], "measured.json"))
        per = max(1, len(m["ranks"]) // max(1, len(p["ranks"])))
        for w, mr in enumerate(m["ranks"]):
            pr = p["ranks"][w // per]
            prefix = e["label"] + " " if len(entries) > 1 else ""
            groups.append(("%srank %d" % (prefix, mr["rank"]), pr, mr))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(8.5, 0.8 * len(groups) + 4.0), 5.2))
    for i, (_, pr, mr) in enumerate(groups):
        for off, r, hatch in ((-width / 2, pr, "//"), (width / 2, mr, None)):
            bottom = 0.0
            for c, colour in zip(MEM_CATEGORIES, MEM_COLOURS):
                v = r.get("memory_bytes", {}).get(c, 0) / MIB
                ax.bar(i + off, v, width, bottom=bottom, color=colour, hatch=hatch,
                       edgecolor="white", linewidth=0.4)
                bottom += v
    ax.set_xticks(range(len(groups)))
    rotate = len(groups) > 6
    ax.set_xticklabels([g[0] for g in groups], rotation=35 if rotate else 0,
                       ha="right" if rotate else "center", fontsize=8)
    ax.set_ylabel("memory at the peak (MiB)")
    ax.set_title("Memory per rank at its peak, by category:\n"
                 "predicted (hatched, left bar) against measured (solid, right bar)")
    handles = [Patch(color=c, label=n.replace("_", " ")) for n, c in
               zip(MEM_CATEGORIES, MEM_COLOURS)]
    handles += [Patch(facecolor="white", edgecolor="black", hatch="//", label="predicted"),
                Patch(facecolor="white", edgecolor="black", label="measured")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(out_path, dpi=130)
    plt.close(fig)


def single_entry(d):
    p = load_json(os.path.join(d, "predicted.json"))
    m = load_json(os.path.join(d, "measured.json"))
    steps = m.get("measured_steps_ms") or [m["iteration_time_ms"]]
    pm, mm = p["iteration_time_ms"], m["iteration_time_ms"]
    return with_predicted_spread(
        {"label": p.get("schedule", "job"), "dir": d, "predicted_ms": pm, "measured_ms": mm,
         "min_ms": min(steps), "max_ms": max(steps),
         "error_pct": 100.0 * (pm - mm) / mm if mm else 0.0})


def summary_entries(d):
    out = []
    with open(os.path.join(d, "summary.csv")) as f:
        for row in csv.DictReader(f):
            sub = os.path.join(d, row["label"])
            if float(row["measured_ms"] or 0) <= 0 or not os.path.exists(
                    os.path.join(sub, "measured.json")):
                continue
            out.append(with_predicted_spread({"label": row["label"], "dir": sub,
                        "predicted_ms": float(row["predicted_ms"]),
                        "measured_ms": float(row["measured_ms"]),
                        "min_ms": float(row["measured_min_ms"]),
                        "max_ms": float(row["measured_max_ms"]),
                        "error_pct": float(row["error_pct"])}))
    return out


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    tutorial = "--tutorial" in argv
    if len(args) != 1 or not os.path.isdir(args[0]):
        print(__doc__, file=sys.stderr)
        return 2
    d = args[0]
    if os.path.exists(os.path.join(d, "predicted.json")):
        entries = [single_entry(d)]
    elif os.path.exists(os.path.join(d, "summary.csv")):
        entries = summary_entries(d)
    else:
        print("plot.py: %s has neither predicted.json nor summary.csv" % d, file=sys.stderr)
        return 2
    if not entries:
        print("plot.py: nothing measured in %s" % d, file=sys.stderr)
        return 1
    made = []
    for e in entries:
        name = "timeline.png" if e["dir"] == d else "timeline-%s.png" % e["label"]
        if plot_timeline(e["dir"], e["label"], os.path.join(d, name)):
            made.append(name)
    plot_iteration(entries, os.path.join(d, "iteration_time.png"), tutorial)
    plot_memory(entries, os.path.join(d, "memory.png"))
    made += ["iteration_time.png", "memory.png"]
    print("plots in %s: %s" % (d, ", ".join(made)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
