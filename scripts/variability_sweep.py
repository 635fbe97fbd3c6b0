#!/usr/bin/env python3
"""What a default per-rank variability would do to the accuracy suite (models/README.md,
"Per-rank variability"): for each cv, every job of examples/published/ gets
`cluster.variability: {distribution: D, cv: CV}` (`{distribution: none}` at 0, in place of the
GPU presets' default), each device's gemm_efficiency is refitted on
its bf16 fit rows (grid 0.01, least squares of the relative error, as
scripts/fit_gemm_efficiency.py does) and H100's fp8_gemm_factor on its FP8 fit rows; then it
prints, per device, the test rows' mean and max absolute error (all, and without MosaicML's),
the fit rows' RMS, and the slope of the signed error (without MosaicML's) per doubling of GPUs.

  scripts/variability_sweep.py build/default/apps/pipetwin normal 0,0.01,0.02,0.03
  scripts/variability_sweep.py build/default/apps/pipetwin slow_fraction 0:1,0.0005:1.1,0.001:1.1

slow_fraction takes FRACTION:SLOWDOWN pairs (a share of the ranks that many times slower; 0:1 is
none) in place of the cv. Two processes; a minute or so per value.
"""
import glob
import math
import os
import sys
import tempfile
from multiprocessing import Pool

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import published  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, ".."))
RUNS = [published.read_run(p)
        for p in sorted(glob.glob(os.path.join(ROOT, "examples", "published", "*", "*.yaml")))]
BY_PATH = {r["path"]: r for r in RUNS}
BIN = None


def init(binary):
    global BIN
    BIN = binary


def error(args):
    path, dist, cv, e, f8 = args
    with open(path) as f:
        job = yaml.safe_load(f)
    cluster = job.setdefault("cluster", {})
    # Every job gets the value swept, none included (the GPU presets' default would apply).
    if dist == "slow_fraction":
        fraction, slowdown = cv
        cluster["variability"] = ({"distribution": dist, "fraction": fraction,
                                   "slowdown": slowdown} if fraction > 0
                                  else {"distribution": "none"})
    else:
        cluster["variability"] = ({"distribution": dist, "cv": cv} if cv > 0
                                  else {"distribution": "none"})
    compute = cluster.setdefault("compute", {})
    if e is not None:
        compute["gemm_efficiency"] = e
    if f8 is not None:
        compute["fp8_gemm_factor"] = f8
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "job.yaml")
        with open(p, "w") as f:
            yaml.safe_dump(job, f)
        rep = published.simulate(BIN, p, tmp)
    meta = BY_PATH[path]["meta"]
    return published.error_pct(meta["metric"], published.METRICS[meta["metric"]][1](rep),
                               meta["value"])


def best(pool, paths, grid, make):
    scores = [(sum(x * x for x in pool.map(error, [make(p, v) for p in paths])), v) for v in grid]
    return min(scores)[1]


def summary(errs, dev):
    sel = [(r, x) for r, x in zip(RUNS, errs) if r["device"].startswith(dev)]
    test = [abs(x) for r, x in sel if r["meta"]["split"] == "test"]
    other = [abs(x) for r, x in sel if r["meta"]["split"] == "test" and "mosaicml" not in r["path"]]
    fit = [x for r, x in sel if r["meta"]["split"] == "fit"]
    pts = [(math.log2(r["gpus"]), x) for r, x in sel if "mosaicml" not in r["path"]]
    mx = sum(a for a, _ in pts) / len(pts)
    my = sum(b for _, b in pts) / len(pts)
    slope = (sum((a - mx) * (b - my) for a, b in pts) / sum((a - mx) ** 2 for a, _ in pts))
    return ("%s: test %.2f%% (max %.1f%%, %d); without MosaicML %.2f%% (max %.1f%%, %d); "
            "fit RMS %.2f%%; slope %+.2f points per doubling of GPUs" % (
                dev, sum(test) / len(test), max(test), len(test), sum(other) / len(other),
                max(other), len(other), math.sqrt(sum(x * x for x in fit) / len(fit)), slope))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    dist = argv[2] if len(argv) > 2 else "normal"
    if dist == "slow_fraction":
        cvs = [tuple(float(y) for y in x.split(":")) for x in argv[3].split(",")]
    else:
        cvs = [float(x) for x in argv[3].split(",")] if len(argv) > 3 else [0.0, 0.01, 0.02]
    with Pool(2, initializer=init, initargs=(argv[1],)) as pool:
        for cv in cvs:
            e = {}
            for dev, grid in (("a100", range(60, 81)), ("h100", range(60, 81))):
                fit = [r["path"] for r in RUNS if r["device"].startswith(dev)
                       and r["meta"]["split"] == "fit" and r["precision"] != "fp8"]
                e[dev] = best(pool, fit, [g / 100 for g in grid],
                              lambda p, v: (p, dist, cv, v, None))
            fp8 = [r["path"] for r in RUNS if r["device"].startswith("h100")
                   and r["meta"]["split"] == "fit" and r["precision"] == "fp8"]
            f8 = best(pool, fp8, [g / 100 for g in range(80, 101)],
                      lambda p, v: (p, dist, cv, e["h100"], v))
            errs = pool.map(error, [(r["path"], dist, cv,
                                     e["a100"] if r["device"].startswith("a100") else e["h100"],
                                     f8) for r in RUNS])
            what = ("fraction %g at %gx" % cv) if dist == "slow_fraction" else "cv %.3f" % cv
            print("%s %s: gemm_efficiency A100 %.2f, H100 %.2f; fp8_gemm_factor %.2f"
                  % (dist, what, e["a100"], e["h100"], f8))
            for dev in ("a100", "h100"):
                print("  " + summary(errs, dev))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
