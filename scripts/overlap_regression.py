#!/usr/bin/env python3
"""How a set of published runs' errors follow the communication the model hides.

  scripts/overlap_regression.py build/default/apps/pipetwin [PREFIX ...]

For every run of examples/published/ whose path starts with a PREFIX (default
`mosaicml2023/`), predicts it (`pipetwin simulate`), and takes x = the share of the step that
data-parallel collectives run hidden under compute in the prediction
(`breakdown.dp_comm_overlapped_ms` / `iteration_time_ms`, in %) and y = the suite's error (as
scripts/published.py computes it). Prints every row and, per device and per recompute
(full / none), the least-squares line y = slope * x + intercept with its R^2: a slope near 0
says the hidden time is hidden; near 1, that it is paid in full. A diagnostic for
models/README.md ("Known miss"); nothing in the model reads it.
"""
import os
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published  # noqa: E402  (the suite's run reader and error definition)


def fit(points):
    """Least squares y = m x + c over (x, y) pairs; returns m, c, R^2."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    m = sxy / sxx if sxx > 0 else 0.0
    c = my - m * mx
    ss_res = sum((y - (m * x + c)) ** 2 for x, y in points)
    ss_tot = sum((y - my) ** 2 for _, y in points)
    return m, c, (1 - ss_res / ss_tot) if ss_tot > 0 else 1.0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin, prefixes = argv[1], tuple(argv[2:]) or ("mosaicml2023/",)
    groups = {}
    print("| run | recompute | hidden DP share x | error y |")
    print("|---|---|--:|--:|")
    with tempfile.TemporaryDirectory() as tmp:
        for p, name in published.job_paths(prefixes):
            run = published.read_run(p)
            rep = published.simulate(pipetwin, p, tmp)
            meta = run["meta"]
            y = published.error_pct(meta["metric"], published.METRICS[meta["metric"]][1](rep),
                                    meta["value"])
            x = 100.0 * rep["breakdown"]["dp_comm_overlapped_ms"] / rep["iteration_time_ms"]
            with open(p) as f:
                recompute = (yaml.safe_load(f).get("training") or {}).get("recompute", "none")
            groups.setdefault((run["device"], recompute), []).append((x, y))
            print("| `%s` | %s | %.1f%% | %+.1f%% |" % (name, recompute, x, y))
    print()
    print("| device | recompute | runs | slope | intercept | R^2 |")
    print("|---|---|--:|--:|--:|--:|")
    for (device, recompute), pts in sorted(groups.items()):
        if len(pts) < 2:
            continue
        m, c, r2 = fit(pts)
        print("| %s | %s | %d | %.2f | %+.1f%% | %.2f |" % (device, recompute, len(pts), m, c, r2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
