#!/usr/bin/env python3
"""What charging the attention by its sequence length would do to the accuracy suite.

  scripts/attention_length_whatif.py build/default/apps/pipetwin

The H100 and H200 attention presets are one efficiency each (models/cluster.cc), the mean of
bench/gpu_kernels.py's fractions at s = 2,048, 4,096 and 8,192. The measured fractions rise with
s, as a fixed cost per block of 128 queries (loading Q, writing O, the softmax's rescaling)
amortised over the s / 128 key blocks it meets would make them: 1 / f = 1 / e_inf + c / s. This
script fits e_inf and c by least squares on 1 / f against 1 / s over the runs of 2026-11-28
(results/models/h100-kernels-2.json, h100-attention.json, -2.json; H200's alike), prints them,
then predicts every H100 and H200 job of examples/published/ that does not state its own
attention (`cluster.compute`) with cluster.compute's attention efficiencies set to that curve
at the job's sequence (over cp under the ring, whole under `cp_comm: all_gather`), and prints
the mean absolute error per device and split against results/published.md. A diagnostic for
models/README.md ("Attention core"); nothing in the model reads it.
"""
import glob
import json
import os
import re
import statistics
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import published  # noqa: E402  (the suite's run reader, simulate and error)

ROOT = os.path.normpath(os.path.join(HERE, ".."))
RUNS = {"h100-sxm-80gb": ("h100-kernels-2.json", "h100-attention.json", "h100-attention-2.json"),
        "h200-sxm-141gb": ("h200-kernels-3.json", "h200-attention.json", "h200-attention-2.json")}
# Sequence lengths of the presets the suite's jobs name without model.seq_len
# (models/model.cc).
PRESET_SEQ = (("llama2", 4096), ("llama3", 8192), ("nemotron", 4096), ("gpt3", 2048),
              ("gpt-", 2048))


def line(xs, ys):
    """Least squares y = a + c x; returns (a, c)."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    c = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - c * mx, c


def curves():
    out = {}
    for device, files in RUNS.items():
        xs, fwd, bwd = [], [], []
        for name in files:
            with open(os.path.join(ROOT, "results", "models", name)) as fh:
                for r in json.load(fh)["attention"]:
                    xs.append(1.0 / r["seq"])
                    fwd.append(1.0 / r["forward_fraction"])
                    bwd.append(1.0 / r["backward_fraction"])
        out[device] = (line(xs, fwd), line(xs, bwd))
    return out


def seq_of(job):
    model = job.get("model") or {}
    if "seq_len" in model:
        return model["seq_len"]
    for prefix, s in PRESET_SEQ:
        if model.get("preset", "").startswith(prefix):
            return s
    raise SystemExit("no sequence length known for preset %r" % model.get("preset"))


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin = argv[1]
    fits = curves()
    for device, ((af, cf), (ab, cb)) in fits.items():
        print("%s: forward e_inf %.3f, c %.0f tokens; backward e_inf %.3f, c %.0f tokens; at "
              "s = 2,048 / 4,096 / 8,192: forward %s, backward %s"
              % (device, 1 / af, cf, 1 / ab, cb,
                 " / ".join("%.3f" % (1 / (af + cf / s)) for s in (2048, 4096, 8192)),
                 " / ".join("%.3f" % (1 / (ab + cb / s)) for s in (2048, 4096, 8192))))
    base = os.path.join(ROOT, "examples", "published")
    current = {}
    with open(os.path.join(ROOT, "results", "published.md")) as fh:
        for text in fh:
            m = re.match(r"\| `([^`]+)` \|.*\| ([+-][0-9.]+)% \| (test|fit) \|", text)
            if m:
                current[m.group(1)] = (float(m.group(2)), m.group(3))
    whatif, device_of = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(base, "*", "*.yaml"))):
            run = published.read_run(path)
            key = os.path.relpath(path, base)
            device_of[key] = run["device"]
            if run["device"] not in fits:
                continue
            with open(path) as fh:
                job = yaml.safe_load(fh)
            compute = dict((job.get("cluster") or {}).get("compute") or {})
            if "attention_forward_efficiency" in compute:
                continue  # the job states the kernel it ran
            if (job.get("training") or {}).get("flash_attention") is False:
                continue
            s = seq_of(job)
            par = job.get("parallel") or {}
            if par.get("cp", 1) > 1 and par.get("cp_comm", "p2p") != "all_gather":
                s /= par["cp"]
            (af, cf), (ab, cb) = fits[run["device"]]
            compute["attention_forward_efficiency"] = round(1 / (af + cf / s), 4)
            compute["attention_backward_efficiency"] = round(1 / (ab + cb / s), 4)
            job["cluster"]["compute"] = compute
            p = os.path.join(tmp, "job.yaml")
            with open(p, "w") as fh:
                yaml.safe_dump(job, fh)
            rep = published.simulate(pipetwin, p, tmp)
            predicted = published.METRICS[run["meta"]["metric"]][1](rep)
            whatif[key] = published.error_pct(run["meta"]["metric"], predicted,
                                              run["meta"]["value"])
    print("\n| device | split | runs | mean abs error now (max) | by sequence length (max) | "
          "rows changed |")
    print("|---|---|--:|--:|--:|--:|")
    for device in fits:
        for split in ("test", "fit"):
            keys = [k for k, (_, s) in current.items() if s == split and device_of.get(k) == device]
            if not keys:
                continue
            now = [abs(current[k][0]) for k in keys]
            new = [abs(whatif.get(k, current[k][0])) for k in keys]
            print("| %s | %s | %d | %.2f%% (%.1f%%) | %.2f%% (%.1f%%) | %d |"
                  % (device, split, len(keys), statistics.mean(now), max(now),
                     statistics.mean(new), max(new), sum(1 for k in keys if k in whatif)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
