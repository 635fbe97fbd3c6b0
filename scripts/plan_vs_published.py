#!/usr/bin/env python3
"""Would `pipetwin plan` have chosen the layout the vendor ran?

  scripts/plan_vs_published.py build/default/apps/pipetwin > results/plan/vs-published.md

For every Megatron-Core / NeMo run of examples/published/ (NVIDIA's tuned recipes: dgxc2024/,
dgxc2025/, nemo2024/, nemo2025/, hopper2026/, megatron2024/), a plan file is made from the
job: its model, training and cluster, with the search over
  schedule [1f1b, interleaved-1f1b], tp [1, 2, 4, 8], pp [1, 2, 4, 8, 16],
  vpp [2, 3, 4, 5, 6, 8, 12] (each with the vendor's own value added), cp [1, 2] (cp [1] below 8,192 tokens), sp [false, true],
  dp auto,
and the job's own micro-batch, recompute, ZeRO stage and overlap flags. `pipetwin plan --top
1000` simulates every layout that fits; the vendor's layout is the job as written (`pipetwin simulate`; an uneven
`layers_per_stage` kept). Printed per run: the vendor layout's place among the layouts plan
simulated (by tokens/s; "fits: no" where the model refuses it by memory), and how much faster
plan's first layout is predicted than the vendor's. A model that prices the layouts' trade-offs
right should find the vendors' choices at or near the top: a large gap says either that the
vendor left speed behind or that the model misprices what separates the two layouts.
Read-only: nothing in the repository is written but stdout.
"""
import csv as csvmod
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
BASE = os.path.join(ROOT, "examples", "published")
SOURCES = ("dgxc2024", "dgxc2025", "nemo2024", "nemo2025", "hopper2026", "megatron2024")


def layout_key(schedule, tp, pp, vpp, cp, dp):
    if schedule != "interleaved-1f1b":
        vpp = 1
    return (schedule, int(tp), int(pp), int(vpp), int(cp), int(dp))


def fmt(k):
    return "%s tp %d pp %d%s cp %d dp %d" % (
        "1F1B" if k[0] == "1f1b" else "int.", k[1], k[2],
        " vpp %d" % k[3] if k[0] == "interleaved-1f1b" else "", k[4], k[5])


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin = os.path.abspath(argv[1])
    out = ["# Would `pipetwin plan` have chosen the vendor's layout?\n",
           "Made by: `scripts/plan_vs_published.py build/default/apps/pipetwin > "
           "results/plan/vs-published.md`. For each NVIDIA recipe of the accuracy suite, `plan` "
           "searches schedule (1F1B, interleaved), tp, pp, vpp and cp (dp fills the GPUs) with "
           "the job's micro-batch, recompute, ZeRO and overlap; *place* is the vendor layout's "
           "rank among the layouts plan simulated, by predicted tokens/s; *gap* is how much "
           "faster plan's first layout is predicted than the vendor's (its step / the vendor's "
           "step − 1, negative = faster); *published error* is the vendor row's error in "
           "`results/published.md`.\n",
           "| run | vendor layout | fits | place | simulated | plan's first | gap |",
           "|---|---|---|--:|--:|---|--:|"]
    gaps = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(BASE, "*", "*.yaml"))):
            rel = os.path.relpath(path, BASE)
            if not rel.startswith(SOURCES):
                continue
            with open(path) as f:
                job = yaml.safe_load(f)
            par = job["parallel"]
            sched = job.get("schedule", "1f1b")
            if sched not in ("1f1b", "interleaved-1f1b"):
                continue
            vendor = layout_key(sched, par.get("tp", 1), par.get("pp", 1), par.get("vpp", 1),
                                par.get("cp", 1), par.get("dp", 1))
            rep = os.path.join(tmp, "sim.json")
            subprocess.run([pipetwin, "simulate", path, "--report", rep], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(rep) as f:
                sim = json.load(f)
            vendor_ms = sim["iteration_time_ms"]
            vendor_fits = sim["memory"]["fits"]
            model = dict(job["model"])
            model.pop("layers_per_stage", None)
            seq = model.get("seq_len")
            plan = {k: v for k, v in job.items() if k not in ("schedule", "parallel", "model")}
            plan["model"] = model
            plan["schedule"] = sched
            plan["parallel"] = dict(par)
            plan["search"] = {"schedule": ["1f1b", "interleaved-1f1b"],
                              "tp": sorted({1, 2, 4, 8, vendor[1]}),
                              "pp": sorted({1, 2, 4, 8, 16, vendor[2]}),
                              "vpp": sorted({2, 3, 4, 5, 6, 8, 12} | ({vendor[3]} - {1})),
                              "cp": [1, 2] if (seq is None or seq >= 8192) else [1],
                              "sp": [False, True], "dp": "auto"}
            pf = os.path.join(tmp, "plan.yaml")
            with open(pf, "w") as f:
                yaml.safe_dump(plan, f)
            csv = os.path.join(tmp, "all.csv")
            r = subprocess.run([pipetwin, "plan", pf, "--csv", csv, "--top", "1000"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                out.append("| `%s` | plan failed: %s | | | | | |"
                           % (rel, r.stderr.strip().splitlines()[-1] if r.stderr else r.returncode))
                continue
            with open(csv) as f:
                rows = [x for x in csvmod.DictReader(f) if float(x["iteration_time_ms"]) > 0]
            rows.sort(key=lambda x: -float(x["tokens_per_s"]))
            keys = [layout_key(x["schedule"], x["tp"], x["pp"], x["vpp"], x["cp"], x["dp"])
                    for x in rows]
            if not rows:
                out.append("| `%s` | no layout fits | | | 0 | | |" % rel)
                continue
            place = next((i + 1 for i, k in enumerate(keys) if k == vendor), None)
            first = rows[0]
            first_ms = float(first["iteration_time_ms"])
            gap = 100.0 * (first_ms / vendor_ms - 1)
            gaps.append(gap)
            out.append("| `%s` | %s | %s | %s | %d | %s | %+.1f%% |" % (
                rel, fmt(vendor), "yes" if vendor_fits else "**no**",
                place if place else ("not simulated" if vendor_fits else "—"), len(rows),
                fmt(keys[0]), gap))
    if gaps:
        gaps_sorted = sorted(gaps)
        out.append("\n%d runs: plan's first layout predicted %.1f%% faster than the vendor's at "
                   "the median, %.1f%% at most; within 2%% on %d, within 5%% on %d."
                   % (len(gaps), -gaps_sorted[len(gaps) // 2], -gaps_sorted[0],
                      sum(1 for g in gaps if g >= -2), sum(1 for g in gaps if g >= -5)))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
