#!/usr/bin/env python3
"""Fit one device's GEMM constants end to end: gemm_efficiency, or fp8_gemm_factor.

  scripts/fit_gemm_efficiency.py build/default/apps/pipetwin h100-sxm-80gb \\
      > results/models/h100-gemm-fit.md
  scripts/fit_gemm_efficiency.py build/default/apps/pipetwin h100-sxm-80gb fp8 \\
      > results/models/h100-fp8-fit.md

Without `fp8`: reads every job of examples/published/ whose device is DEVICE, whose precision
is not fp8 and whose `# published:` line says `split: fit`, predicts each with
cluster.compute.gemm_efficiency on a grid of 0.01 from 0.40 to 0.90, and picks the value with
the least sum of squared relative errors. With `fp8`: the same over the device's fp8 fit rows,
for cluster.compute.fp8_gemm_factor (the FP8 GEMMs' efficiency relative to bf16's) on a grid of
0.01 from 0.60 to 1.00, gemm_efficiency left at the preset's value. Prints the grid's best, the
fit rows' errors at it and every test row of the same precision at it and at the preset's
current value. The preset takes the printed value by hand (models/cluster.cc);
models/README.md says which device's constants were fitted and on what.
"""
import glob
import os
import sys
import tempfile


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import published  # noqa: E402


def error(pipetwin, path, run, key, value, tmp):
    return published.error_with_compute(pipetwin, run, {} if value is None else {key: value}, tmp)


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "fp8"):
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin, device = argv[1], argv[2]
    fp8 = len(argv) == 4
    key, lo, hi = ("fp8_gemm_factor", 60, 100) if fp8 else ("gemm_efficiency", 40, 90)
    root = os.path.normpath(os.path.join(HERE, ".."))
    runs = []
    for path in sorted(glob.glob(os.path.join(root, "examples", "published", "*", "*.yaml"))):
        r = published.read_run(path)
        if r["device"] == device and (r["precision"] == "fp8") == fp8:
            runs.append((os.path.relpath(path, os.path.join(root, "examples", "published")),
                         path, r))
    fit = [x for x in runs if x[2]["meta"]["split"] == "fit"]
    test = [x for x in runs if x[2]["meta"]["split"] == "test"]
    if not fit:
        print("no %sfit rows for %s" % ("fp8 " if fp8 else "", device), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        grid = []
        for i in range(lo, hi + 1):
            v = i / 100.0
            errs = [error(pipetwin, p, r, key, v, tmp) for _, p, r in fit]
            grid.append((sum(x * x for x in errs), v, errs))
        ss, best, errs = min(grid)
        what = "the FP8 GEMMs' efficiency relative to bf16's" if fp8 else \
            "the large-GEMM efficiency"
        out = ["# %s: %s, fitted end to end\n" % (device, what),
               "Made by: `scripts/fit_gemm_efficiency.py build/default/apps/pipetwin %s%s`. "
               "Least squares of the relative error over the device's %s*fit* rows, grid 0.01: "
               "**%s = %.2f** (RMS %.1f%%).\n" % (device, " fp8" if fp8 else "",
                                                 "fp8 " if fp8 else "non-fp8 ", key, best,
                                                 (ss / len(errs)) ** 0.5),
               "| row | split | error at %.2f | error at the preset's value |" % best,
               "|---|---|--:|--:|"]
        for (rel, p, r), x in zip(fit, errs):
            out.append("| `%s` | fit | %+.1f%% | %+.1f%% |"
                       % (rel, x, error(pipetwin, p, r, key, None, tmp)))
        held = []
        for rel, p, r in test:
            x = error(pipetwin, p, r, key, best, tmp)
            held.append(abs(x))
            out.append("| `%s` | test | %+.1f%% | %+.1f%% |"
                       % (rel, x, error(pipetwin, p, r, key, None, tmp)))
        if held:
            out.append("\nHeld-out rows at %.2f: mean absolute error %.1f%% (max %.1f%%) over "
                       "%d." % (best, sum(held) / len(held), max(held), len(held)))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
