#!/usr/bin/env python3
"""The accuracy suite: every published run in examples/published/, predicted and published.

Each job file there is a published training run, with its source, every layout assumption
and one machine-readable line:

  # published: {metric: M, value: V, split: fit|test, source: "..."}

where M is what the source reports per GPU: `hardware_tflops_per_gpu` (recomputation
counted), `model_tflops_per_gpu` or `mfu` (model FLOPs, recomputation not counted), or
`tokens_per_s` (the whole job's, for sources whose FLOP formulas differ from ours). `fit`
rows are those a device constant was fitted on, or a model default chosen on
(models/README.md says which); `test` rows were never used to fit or choose. The prediction is `pipetwin simulate`'s report, the same metric from the
same FLOP formula (Narayanan et al. 2021, Eq. 3). Writes Markdown (results/published.md):

  scripts/published.py build/default/apps/pipetwin > results/published.md

--without KEY[,KEY...] predicts each job with those `training:` keys (or `training.overlap:`
keys) removed, so that they take their defaults: what a job file written without them, as
someone else's would be, gets. `--without tp_dgrad_reduce,pipeline_engine,cross_entropy,zero3_unit,pp_scatter_gather`
strips the keys pipetwin added beyond the issue's overlap flags that its jobs use (the FSDP
jobs then read as DeepSpeed's stage 3, the default). --only PREFIX[,PREFIX...] keeps the runs
whose path under examples/published/ starts with one of them (e.g. `korthikanti2022/`).
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

METRICS = {
    "hardware_tflops_per_gpu": ("hardware TFLOP/s per GPU", lambda r: r["hardware_flops"]["tflops_per_device"]),
    "model_tflops_per_gpu": ("model TFLOP/s per GPU", lambda r: r["throughput"]["tflops_per_device"]),
    "mfu": ("MFU", lambda r: r["throughput"]["mfu"]),
    "tokens_per_s": ("tokens/s, whole job", lambda r: r["throughput"]["tokens_per_s"]),
    "iteration_time_s": ("s per iteration", lambda r: r["iteration_time_ms"] / 1000.0),
}
# Metrics where more is slower: their error is the throughput's, published / predicted - 1,
# so that + means optimistic on every row.
TIMES = {"iteration_time_s"}
# The suite's job files: examples/published/SOURCE/RUN.yaml.
BASE = os.path.join(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")),
                    "examples", "published")


def job_paths(prefixes=()):
    """(path, name) of every run of the suite in name order, name its path under
    examples/published/; with `prefixes`, only those whose name starts with one of them."""
    out = []
    for path in sorted(glob.glob(os.path.join(BASE, "*", "*.yaml"))):
        name = os.path.relpath(path, BASE)
        if not prefixes or name.startswith(tuple(prefixes)):
            out.append((path, name))
    return out


def error_pct(metric, predicted, published):
    """The suite's error in percent: predicted / published - 1, on the throughput for TIMES."""
    ratio = predicted / float(published)
    return 100.0 * ((1.0 / ratio if metric in TIMES else ratio) - 1)


def read_run(path):
    text = open(path).read()
    m = re.search(r"^# published: (\{.*\})\s*$", text, re.M)
    if not m:
        raise SystemExit("%s: no '# published: {...}' line" % path)
    meta = yaml.safe_load(m.group(1))
    for key in ("metric", "value", "split", "source"):
        if key not in meta:
            raise SystemExit("%s: published: has no %s" % (path, key))
    if meta["metric"] not in METRICS:
        raise SystemExit("%s: published.metric: %r is not one of %s"
                         % (path, meta["metric"], ", ".join(METRICS)))
    if meta["split"] not in ("fit", "test"):
        raise SystemExit("%s: published.split: must be fit or test" % path)
    job = yaml.safe_load(text)
    return {"path": path, "meta": meta, "device": job["cluster"]["device"],
            "precision": (job.get("training") or {}).get("precision", "bf16"),
            "gpus": job["parallel"].get("pp", 1) * job["parallel"].get("dp", 1)
            * job["parallel"].get("tp", 1) * job["parallel"].get("cp", 1)}


def strip_keys(path, keys, tmp):
    """A copy of the job at `path` without the `training:` / `training.overlap:` keys `keys`."""
    with open(path) as f:
        job = yaml.safe_load(f)
    training = job.get("training") or {}
    for k in keys:
        training.pop(k, None)
        if isinstance(training.get("overlap"), dict):
            training["overlap"].pop(k, None)
    out = os.path.join(tmp, "stripped.yaml")
    with open(out, "w") as f:
        yaml.safe_dump(job, f)
    return out


def simulate_with_notes(pipetwin, path, tmp):
    """`pipetwin simulate path`: its report (the JSON) and its notes (the text after "note: " of
    each such line it prints)."""
    rep = os.path.join(tmp, "report.json")
    out = subprocess.run([pipetwin, "simulate", path, "--report", rep], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    with open(rep) as f:
        return json.load(f), [l[len("note: "):] for l in out.splitlines() if l.startswith("note: ")]


def simulate(pipetwin, path, tmp):
    return simulate_with_notes(pipetwin, path, tmp)[0]


def error_with_compute(pipetwin, run, compute, tmp):
    """The suite's error (percent) for `run` (read_run's) predicted with `cluster.compute:`
    keys overridden by the dict `compute` (empty: the job as written)."""
    with open(run["path"]) as f:
        job = yaml.safe_load(f)
    if compute:
        job.setdefault("cluster", {}).setdefault("compute", {}).update(compute)
    path = os.path.join(tmp, "job.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(job, f)
    metric = run["meta"]["metric"]
    return error_pct(metric, METRICS[metric][1](simulate(pipetwin, path, tmp)), run["meta"]["value"])


def main(argv):
    without, only = [], []
    args = argv[2:]
    while len(args) >= 2 and args[0] in ("--without", "--only"):
        (without if args[0] == "--without" else only).extend(k for k in args[1].split(",") if k)
        args = args[2:]
    if len(argv) < 2 or args:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin = argv[1]
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    runs = [read_run(p) for p, _ in job_paths(only)]
    with tempfile.TemporaryDirectory() as tmp:
        for r in runs:
            path = strip_keys(r["path"], without, tmp) if without else r["path"]
            rep = simulate(pipetwin, path, tmp)
            r["predicted"] = METRICS[r["meta"]["metric"]][1](rep)
            r["error"] = error_pct(r["meta"]["metric"], r["predicted"], r["meta"]["value"])
            r["fits"] = rep.get("memory", {}).get("fits", True)

    out = ["# Accuracy suite: published runs, predicted against published\n",
           "Made by: `scripts/published.py build/default/apps/pipetwin%s` "
           % ("".join(" --%s %s" % (flag, ",".join(keys))
                      for flag, keys in (("without", without), ("only", only)) if keys)
              or " > results/published.md") +
           "(runs: `examples/published/`, one job file per run, with its source, the table "
           "and row, and every layout assumption in its header).\n",
           "Error = predicted / published − 1, on the metric the source reports (for an "
           "iteration time, on the throughput it implies: published / predicted − 1), so that "
           "+ is optimistic on every row. *fit* rows "
           "are those the device's fitted constant was fitted on, or a default chosen on "
           "(`models/README.md` says which); *test* rows were never used for either.\n",
           *(["Predicted with these keys removed from every job (their defaults apply): %s.\n"
              % ", ".join("`%s`" % k for k in without)] if without else []),
           "| run | source | GPUs | metric | published | predicted | error | split | fits |",
           "|---|---|--:|---|--:|--:|--:|---|---|"]
    for r in runs:
        meta = r["meta"]
        fmt = ("%.3f" if meta["metric"] == "mfu" else "%.2f" if meta["metric"] in TIMES else "%.1f")
        out.append("| `%s` | %s | %d | %s | %s | %s | %+.1f%% | %s | %s |" % (
            os.path.relpath(r["path"], os.path.join(root, "examples", "published")),
            meta["source"], r["gpus"], METRICS[meta["metric"]][0], fmt % float(meta["value"]),
            fmt % r["predicted"], r["error"], meta["split"], "yes" if r["fits"] else "**no**"))
    out.append("")
    out.append("| device | split | runs | mean abs error | max abs error |")
    out.append("|---|---|--:|--:|--:|")
    for dev in sorted({r["device"] for r in runs}):
        for split in ("test", "fit", "all"):
            sel = [abs(r["error"]) for r in runs
                   if r["device"] == dev and (split == "all" or r["meta"]["split"] == split)]
            if sel:
                out.append("| %s | %s | %d | %.1f%% | %.1f%% |"
                           % (dev, split, len(sel), sum(sel) / len(sel), max(sel)))
    # Source by source (a folder of examples/published/): the signed mean shows a bias that the
    # absolute mean hides.
    out.append("")
    out.append("| source | device | runs | signed mean error | mean abs error | max abs error |")
    out.append("|---|---|--:|--:|--:|--:|")
    groups = {}
    for r in runs:
        folder = os.path.relpath(r["path"], os.path.join(root, "examples", "published"))
        groups.setdefault((folder.split(os.sep)[0], r["device"]), []).append(r["error"])
    for (folder, dev), errs in sorted(groups.items()):
        out.append("| %s | %s | %d | %+.1f%% | %.1f%% | %.1f%% |"
                   % (folder, dev, len(errs), sum(errs) / len(errs),
                      sum(abs(e) for e in errs) / len(errs), max(abs(e) for e in errs)))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
