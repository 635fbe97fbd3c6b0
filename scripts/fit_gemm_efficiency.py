#!/usr/bin/env python3
"""Fit one device's large-GEMM efficiency (cluster.compute.gemm_efficiency) to its *fit* rows.

Reads every job of examples/published/ whose device is DEVICE and whose `# published:` line
says `split: fit`, predicts each with gemm_efficiency on a grid of 0.01 from 0.40 to 0.90, and
picks the value with the least sum of squared relative errors (as scripts/megatron_comparison.py
does for A100 on Narayanan et al.'s Table 1). Prints the grid's best, the fit rows' errors at it
and every *test* row of the device at it and at the preset's current value. The preset takes
the printed value by hand (models/cluster.cc); models/README.md says which device's constant
was fitted and on what.

  scripts/fit_gemm_efficiency.py build/default/apps/pipetwin h100-sxm-80gb \
      > results/models/h100-gemm-fit.md
"""
import glob
import os
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import published  # noqa: E402


def error(pipetwin, path, run, e, tmp):
    with open(path) as f:
        job = yaml.safe_load(f)
    if e is not None:
        job.setdefault("cluster", {}).setdefault("compute", {})["gemm_efficiency"] = e
    p = os.path.join(tmp, "job.yaml")
    with open(p, "w") as f:
        yaml.safe_dump(job, f)
    rep = published.simulate(pipetwin, p, tmp)
    metric = run["meta"]["metric"]
    return published.error_pct(metric, published.METRICS[metric][1](rep), run["meta"]["value"])


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin, device = argv[1], argv[2]
    root = os.path.normpath(os.path.join(HERE, ".."))
    runs = []
    for path in sorted(glob.glob(os.path.join(root, "examples", "published", "*", "*.yaml"))):
        r = published.read_run(path)
        if r["device"] == device:
            runs.append((os.path.relpath(path, os.path.join(root, "examples", "published")),
                         path, r))
    fit = [x for x in runs if x[2]["meta"]["split"] == "fit"]
    test = [x for x in runs if x[2]["meta"]["split"] == "test"]
    if not fit:
        print("no fit rows for %s" % device, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        grid = []
        for i in range(40, 91):
            e = i / 100.0
            errs = [error(pipetwin, p, r, e, tmp) for _, p, r in fit]
            grid.append((sum(x * x for x in errs), e, errs))
        ss, best, errs = min(grid)
        out = ["# %s: the large-GEMM efficiency fitted end to end\n" % device,
               "Made by: `scripts/fit_gemm_efficiency.py build/default/apps/pipetwin %s`. "
               "Least squares of the relative error over the device's *fit* rows, grid 0.01: "
               "**gemm_efficiency = %.2f** (RMS %.1f%%).\n" % (device, best,
                                                             (ss / len(errs)) ** 0.5),
               "| row | split | error at %.2f | error at the preset's value |" % best,
               "|---|---|--:|--:|"]
        for (rel, p, r), x in zip(fit, errs):
            out.append("| `%s` | fit | %+.1f%% | %+.1f%% |" % (rel, x, error(pipetwin, p, r,
                                                                              None, tmp)))
        held = []
        for rel, p, r in test:
            x = error(pipetwin, p, r, best, tmp)
            held.append(abs(x))
            out.append("| `%s` | test | %+.1f%% | %+.1f%% |" % (rel, x, error(pipetwin, p, r,
                                                                               None, tmp)))
        if held:
            out.append("\nHeld-out rows at %.2f: mean absolute error %.1f%% (max %.1f%%) over "
                       "%d." % (best, sum(held) / len(held), max(held), len(held)))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
