#!/usr/bin/env python3
"""Leave one source out: how well the fitted constants generalise to a source they never saw.

  scripts/cross_validate.py build/default/apps/pipetwin > results/models/cross-validation.md

Each device's end-to-end constants (models/README.md, "Constants") are fitted on the *fit* rows
of a few sources: on A100 gemm_efficiency (with the straggler share), on H100 gemm_efficiency
on its bf16 rows and then fp8_gemm_factor on its FP8 rows. For every source S that holds fit
rows of a device, this script refits those constants without S, exactly as
scripts/fit_gemm_efficiency.py does (least squares of the relative error, grid 0.01:
gemm_efficiency 0.40 to 0.90 over the bf16 fit rows, then fp8_gemm_factor 0.60 to 1.00 over the
FP8 fit rows at that gemm_efficiency), and predicts every row of S on that device, fit and test,
with the refitted values. A source with no fit rows is out of sample already: its rows keep the
suite's errors. The result is each device's mean absolute error with every row predicted by
constants fitted without its source.

Not refitted: A100's straggler share (fitted jointly with A100's gemm_efficiency; held at the
preset's value here), and H200's constants (derived from H100's, not fitted on H200 rows).
Two processes; a minute or two.
"""
import glob
import os
import sys
import tempfile
from multiprocessing import Pool


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import published  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, ".."))
BASE = os.path.join(ROOT, "examples", "published")
# The devices whose constants are fitted end to end, and which constants (models/cluster.cc).
FITTED = {"a100-sxm-80gb": ("gemm_efficiency",),
          "h100-sxm-80gb": ("gemm_efficiency", "fp8_gemm_factor")}
E_GRID = [i / 100.0 for i in range(40, 91)]
F_GRID = [i / 100.0 for i in range(60, 101)]
BIN = None


def init(binary):
    global BIN
    BIN = binary


def predict_error(args):
    """The suite's error (percent) for one run with compute constants overridden (None: the
    preset's)."""
    run, e, f = args
    compute = {k: v for k, v in (("gemm_efficiency", e), ("fp8_gemm_factor", f)) if v is not None}
    with tempfile.TemporaryDirectory() as tmp:
        return published.error_with_compute(BIN, run, compute, tmp)


def best(grid, errors, rows):
    """The grid value of least sum of squared errors over `rows` (keys into errors[value]), the
    lower value on a tie, as min() over (sum, value) picks; None without rows."""
    if not rows:
        return None
    return min((sum(errors[v][r] ** 2 for r in rows), v) for v in grid)[1]


def source(run):
    return os.path.relpath(run["path"], BASE).split(os.sep)[0]


def name(run):
    return os.path.relpath(run["path"], BASE)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin = os.path.abspath(argv[1])
    runs = [published.read_run(p) for p in sorted(glob.glob(os.path.join(BASE, "*", "*.yaml")))]
    for r in runs:
        r["source"], r["name"], r["fp8"] = source(r), name(r), r["precision"] == "fp8"
    out = ["# Leave one source out: the fitted constants against sources they never saw\n",
           "Made by: `scripts/cross_validate.py build/default/apps/pipetwin > "
           "results/models/cross-validation.md`. For each source that holds fit rows of a device, "
           "the device's end-to-end constants are refitted without that source (as "
           "`scripts/fit_gemm_efficiency.py` fits them: least squares of the relative error, "
           "grid 0.01; on H100 gemm_efficiency on the bf16 fit rows, then fp8_gemm_factor on the "
           "FP8 fit rows at it) and every row of the source on that device, fit and test, is "
           "predicted with the refitted values. A100's straggler share, fitted with its "
           "gemm_efficiency, stays at the preset's value. Error as in `results/published.md` "
           "(+ is optimistic).\n"]
    summary = []
    with Pool(2, initializer=init, initargs=(pipetwin,)) as pool:
        for device, keys in FITTED.items():
            dev = [r for r in runs if r["device"] == device]
            bf16_fit = [r for r in dev if not r["fp8"] and r["meta"]["split"] == "fit"]
            fp8_fit = [r for r in dev if r["fp8"] and r["meta"]["split"] == "fit"]
            held = sorted({r["source"] for r in bf16_fit + fp8_fit})
            # gemm_efficiency: every bf16 fit row on the whole grid, once.
            jobs = [(r, e, None) for e in E_GRID for r in bf16_fit]
            errs = pool.map(predict_error, jobs)
            e_err = {e: {} for e in E_GRID}
            for (r, e, _), x in zip(jobs, errs):
                e_err[e][r["name"]] = x
            folds = {None: None}
            folds.update({s: s for s in held})
            e_of = {s: best(E_GRID, e_err, [r["name"] for r in bf16_fit if r["source"] != s])
                    for s in folds}
            f_of = {s: None for s in folds}
            if "fp8_gemm_factor" in keys:
                f_err = {}
                todo = sorted({e_of[s] for s in folds})
                jobs = [(r, e, f) for e in todo for f in F_GRID for r in fp8_fit]
                for (r, e, f), x in zip(jobs, pool.map(predict_error, jobs)):
                    f_err.setdefault(e, {}).setdefault(f, {})[r["name"]] = x
                f_of = {s: best(F_GRID, f_err[e_of[s]],
                                [r["name"] for r in fp8_fit if r["source"] != s])
                        for s in folds}
            # Every row of each held-out source, at its fold's values and at the presets'.
            jobs, where = [], []
            for s in held:
                for r in dev:
                    if r["source"] == s:
                        jobs += [(r, e_of[s], f_of[s] if r["fp8"] else None), (r, None, None)]
                        where.append((s, r))
            errs = pool.map(predict_error, jobs)
            loso = {}
            preset = {}
            for i, (s, r) in enumerate(where):
                loso[r["name"]], preset[r["name"]] = errs[2 * i], errs[2 * i + 1]
            rest = [r for r in dev if r["source"] not in held]
            for r, x in zip(rest, pool.map(predict_error, [(r, None, None) for r in rest])):
                loso[r["name"]] = preset[r["name"]] = x

            def fmt(s):
                parts = ["gemm_efficiency %.2f" % e_of[s]]
                if f_of[s] is not None:
                    parts.append("fp8_gemm_factor %.2f" % f_of[s])
                return ", ".join(parts)

            out.append("## %s\n" % device)
            out.append("Fitted on every fit row (%d bf16%s): %s. The presets' values are those "
                       "of `models/cluster.cc`; where this line differs from them the preset "
                       "was fitted with something this script holds fixed (A100's straggler "
                       "share).\n" % (len(bf16_fit), ", %d FP8" % len(fp8_fit) if fp8_fit else "",
                                      fmt(None)))
            out.append("| source held out | fit rows left | refitted | rows | mean abs error, "
                       "preset | mean abs error, source held out | worst row, held out |")
            out.append("|---|--:|---|--:|--:|--:|---|")
            for s in held:
                rows = [r for r in dev if r["source"] == s]
                left = len([r for r in bf16_fit + fp8_fit if r["source"] != s])
                a = sum(abs(preset[r["name"]]) for r in rows) / len(rows)
                b = sum(abs(loso[r["name"]]) for r in rows) / len(rows)
                w = max(rows, key=lambda r: abs(loso[r["name"]]))
                out.append("| %s | %d | %s | %d | %.1f%% | %.1f%% | `%s` %+.1f%% |"
                           % (s, left, fmt(s), len(rows), a, b, w["name"], loso[w["name"]]))
            out.append("")
            out.append("| rows of %s | runs | mean abs error, presets | mean abs error, each "
                       "source held out | max, held out |" % device)
            out.append("|---|--:|--:|--:|--:|")
            for label, pick in (("all", lambda r: True),
                                ("test", lambda r: r["meta"]["split"] == "test"),
                                ("of the sources held out", lambda r: r["source"] in held)):
                rows = [r for r in dev if pick(r)]
                a = sum(abs(preset[r["name"]]) for r in rows) / len(rows)
                b = sum(abs(loso[r["name"]]) for r in rows) / len(rows)
                m = max(abs(loso[r["name"]]) for r in rows)
                out.append("| %s | %d | %.1f%% | %.1f%% | %.1f%% |" % (label, len(rows), a, b, m))
                if label == "all":
                    summary.append((device, len(rows), a, b, m))
            out.append("")
            out.append("<details><summary>Every row of the sources held out</summary>\n")
            out.append("| run | split | preset | held out |")
            out.append("|---|---|--:|--:|")
            for s, r in where:
                out.append("| `%s` | %s | %+.1f%% | %+.1f%% |"
                           % (r["name"], r["meta"]["split"], preset[r["name"]], loso[r["name"]]))
            out.append("\n</details>\n")
    out.append("## Summary\n")
    out.append("| device | runs | mean abs error, presets | every row out of sample | max |")
    out.append("|---|--:|--:|--:|--:|")
    for d, n, a, b, m in summary:
        out.append("| %s | %d | %.1f%% | %.1f%% | %.1f%% |" % (d, n, a, b, m))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
