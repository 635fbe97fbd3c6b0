#!/usr/bin/env python3
"""Better hardware never predicts a slower step, and a bigger batch never a lower throughput.

Each schedule's per-rank order is fixed, so a step can only get shorter when an action or a
transfer gets shorter. This test takes every fourth job of the accuracy suite
(examples/published/, every model, layout and framework key the suite uses) and checks, on
`pipetwin simulate`'s iteration time:
  * faster links (both links 4x the fastest preset's bandwidth, a quarter of the latency),
  * faster GEMMs (cluster.compute.gemm_efficiency 0.95),
each give a step no longer than the job's own; and twice the global batch gives no fewer
tokens per second (more microbatches spread the same fill and drain).

  monotonicity_test.py PIPETWIN REPO_ROOT
"""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # PyYAML is not a build dependency: say so, do not fail
    print("SKIP: PyYAML is not installed")
    sys.exit(77)

# Above every preset's (NVLink 450 GB/s, NIC 50 GB/s): a job's own values are never higher.
FAST_LINKS = {"intra_node": {"bandwidth_gb_s": 1800, "latency_us": 0.5},
              "inter_node": {"bandwidth_gb_s": 200, "latency_us": 1.25}}


def iteration_ms(pipetwin, doc, tmp, tag):
    path = os.path.join(tmp, tag + ".yaml")
    report = os.path.join(tmp, tag + ".json")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    r = subprocess.run([pipetwin, "simulate", path, "--report", report, "--per-pipeline-rank"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"{tag}: exit {r.returncode}: {r.stderr.strip()}")
    with open(report) as f:
        return json.load(f)["iteration_time_ms"]


def main(argv):
    pipetwin, root = argv[1], argv[2]
    jobs = sorted(glob.glob(os.path.join(root, "examples", "published", "*", "*.yaml")))[::4]
    failures, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in jobs:
            name = os.path.relpath(path, os.path.join(root, "examples", "published"))
            with open(path) as f:
                job = yaml.safe_load(f)
            cluster = job.setdefault("cluster", {})
            if "intra_node" in cluster or "inter_node" in cluster:
                continue  # its own links: "faster" would need their values
            base = iteration_ms(pipetwin, job, tmp, "base")

            fast = copy.deepcopy(job)
            fast["cluster"].update(copy.deepcopy(FAST_LINKS))
            t = iteration_ms(pipetwin, fast, tmp, "links")
            if t > base * (1 + 1e-9):
                failures.append(f"{name}: faster links {base:.3f} -> {t:.3f} ms")

            gemm = copy.deepcopy(job)
            gemm["cluster"].setdefault("compute", {})["gemm_efficiency"] = 0.95
            t = iteration_ms(pipetwin, gemm, tmp, "gemm")
            if t > base * (1 + 1e-9):
                failures.append(f"{name}: faster GEMMs {base:.3f} -> {t:.3f} ms")

            big = copy.deepcopy(job)
            big["training"]["global_batch"] *= 2
            t = iteration_ms(pipetwin, big, tmp, "batch")
            if 2 * base / t < 1 - 1e-9:
                failures.append(f"{name}: twice the batch, tokens/s x {2 * base / t:.4f}")
            checked += 1
    for f in failures:
        print("FAIL", f)
    if failures:
        return 1
    if checked < 30:
        print(f"FAIL: only {checked} jobs checked")
        return 1
    print(f"PASS: {checked} jobs, 3 checks each")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
