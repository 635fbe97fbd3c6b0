#!/usr/bin/env python3
"""The attention speed MosaicML's published runs realised, from their own sequence sweeps.

  scripts/attention_sweep.py build/default/apps/pipetwin

MosaicML's llm-foundry benchmark tables (scripts/train/benchmarking/README.md, tables 'H100
80GB BF16' of commit b2a43a147 and 'A100 80GB with 1600 Gbps node-node interconnect (RoCE)')
run MPT models on 8 GPUs at sequence lengths 512 to 65,536 with about the same tokens per
microbatch for each model. Per token, the GEMMs cost the same at every length; the attention
grows linearly with it. So the slope of (1 / published tokens/s per GPU) against the sequence
length measures how fast the attention ran in that stack, with nothing else of the model in
it: without activation checkpointing (MPT-1B and 3B) the slope is its forward plus its
backward, with it (MPT-7B and 13B) twice its forward plus its backward, so the two together
separate the forward from the backward. Those runs used llm-foundry's Triton flash attention
(`attn_impl: triton`, submit_benchmarks.py's default; the sweep does not set it).

This script predicts every such row (the suite's own MosaicML jobs as templates; sequence 2048
left out: those rows are in the suite) with the device's attention efficiencies divided by
f_fwd (forward) and f_bwd (backward), finds per device the pair at which the predicted slopes
equal the published ones (each slope is linear in both; least squares over the four models,
on relative residuals), and prints the rows at (1, 1) and at that pair, and the attention
efficiencies it gives. It also prints FlashAttention-2's efficiencies on H100 as measured on
one (results/models/h100-dropout-3.json), which the 2024 table's runs with `--attn_impl flash`
(flash-attn 2.4.2) ran. examples/published/mosaicml2023/ states them (`cluster.compute`);
models/README.md, "MosaicML's attention".
"""
import copy
import json
import math
import os
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import overlap_regression  # noqa: E402  (its least-squares line)
import published  # noqa: E402  (the suite's simulate)

ROOT = os.path.normpath(os.path.join(HERE, ".."))
JOBS = os.path.join(ROOT, "examples", "published", "mosaicml2023")

# (model, sequence, micro-batch, gradient accumulation, published tokens/s per GPU): the rows of
# the two tables at 8 GPUs, sequence 2048 left out; MPT-1B and 3B without activation
# checkpointing, MPT-7B and 13B with it (as the tables state).
SWEEP = {
    "h100-sxm-80gb": [
        ("1b", 512, 56, 4, 52275), ("1b", 1024, 18, 4, 48910), ("1b", 4096, 7, 4, 38535),
        ("1b", 8192, 3, 4, 29157), ("1b", 16384, 2, 4, 19649), ("1b", 32768, 1, 4, 12025),
        ("3b", 512, 40, 6, 27965), ("3b", 1024, 20, 6, 27046), ("3b", 4096, 5, 6, 20964),
        ("3b", 8192, 3, 6, 16578), ("3b", 16384, 1, 6, 11152),
        ("7b", 1024, 64, 2, 10203), ("7b", 4096, 16, 2, 8611), ("7b", 8192, 8, 2, 6935),
        ("7b", 32768, 2, 2, 3318), ("7b", 65536, 1, 2, 1956),
        ("13b", 1024, 40, 3, 5502), ("13b", 4096, 10, 3, 4717), ("13b", 16384, 3, 3, 2985),
        ("13b", 32768, 1, 3, 1976),
    ],
    "a100-sxm-80gb": [
        ("1b", 512, 56, 4, 23148), ("1b", 1024, 18, 4, 22112), ("1b", 4096, 7, 4, 17807),
        ("1b", 8192, 3, 4, 13814), ("1b", 16384, 2, 4, 9956), ("1b", 32768, 1, 4, 6275),
        ("3b", 512, 40, 6, 12127), ("3b", 1024, 20, 6, 11580), ("3b", 4096, 5, 6, 9457),
        ("3b", 8192, 3, 6, 7695), ("3b", 16384, 1, 6, 5529),
        ("7b", 1024, 64, 2, 4357), ("7b", 4096, 16, 2, 3684), ("7b", 8192, 8, 2, 3206),
        ("7b", 16384, 4, 2, 2453), ("7b", 32768, 2, 2, 1672), ("7b", 65536, 1, 2, 1013),
        ("13b", 1024, 40, 3, 2330), ("13b", 4096, 10, 3, 2060), ("13b", 8192, 5, 3, 1795),
        ("13b", 16384, 3, 3, 1431), ("13b", 32768, 1, 3, 1016),
    ],
}
# The suite's jobs whose model and training settings the sweep's rows share, and whether the
# sweep's rows of that model checkpoint activations (recompute: full).
TEMPLATE = {"1b": ("h100-mpt-1b-8gpu.yaml", "none"), "3b": ("a100-mpt-3b-8gpu.yaml", "none"),
            "7b": ("h100-mpt-7b-8gpu.yaml", "full"), "13b": ("h100-mpt-13b-8gpu.yaml", "full")}
# The device presets' attention efficiencies (models/cluster.cc), forward and backward.
BASE = {"h100-sxm-80gb": (0.59, 0.37), "a100-sxm-80gb": (0.6, 0.45)}
PEAK_H100 = 989  # dense bf16 TFLOP/s, as bench/gpu_kernels.py was run
GPUS = 8


def job_for(device, row, f):
    """`row` as a job; f = (f_fwd, f_bwd) divides the preset's attention efficiencies (None:
    the preset as it is)."""
    model, seq, mb, accum, _ = row
    template, recompute = TEMPLATE[model]
    with open(os.path.join(JOBS, template)) as fh:
        job = copy.deepcopy(yaml.safe_load(fh))
    job["parallel"]["dp"] = GPUS
    job["model"]["seq_len"] = seq
    job["training"]["micro_batch"] = mb
    job["training"]["global_batch"] = mb * accum * GPUS
    job["training"]["recompute"] = recompute
    job["cluster"] = {"device": device, "gpus_per_node": GPUS, "nodes": 1}
    if f is not None:
        fwd, bwd = BASE[device]
        job["cluster"]["compute"] = {"attention_forward_efficiency": fwd / f[0],
                                     "attention_backward_efficiency": bwd / f[1]}
    return job


def predict(pipetwin, device, row, f, tmp):
    """Predicted tokens/s per GPU of `row` (f as in job_for)."""
    path = os.path.join(tmp, "job.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(job_for(device, row, f), fh)
    return published.simulate(pipetwin, path, tmp)["throughput"]["tokens_per_s"] / GPUS


def slopes(rows, tps):
    """Per model, the least-squares slope of seconds per token against the sequence length."""
    groups = {}
    for row, t in zip(rows, tps):
        groups.setdefault(row[0], []).append((row[1], 1.0 / t))
    return {model: overlap_regression.fit(pts)[0] for model, pts in groups.items()}


def fit(pub, s11, s21, s12):
    """(f_fwd, f_bwd) minimising the relative misfit of the models' slopes, each predicted as
    s11 + (f_fwd - 1) a + (f_bwd - 1) b."""
    saa = sab = sbb = sar = sbr = 0.0
    for m in pub:
        a, b, r = ((s21[m] - s11[m]) / pub[m], (s12[m] - s11[m]) / pub[m],
                   (pub[m] - s11[m]) / pub[m])
        saa, sab, sbb, sar, sbr = saa + a * a, sab + a * b, sbb + b * b, sar + a * r, sbr + b * r
    det = saa * sbb - sab * sab
    return 1 + (sar * sbb - sbr * sab) / det, 1 + (sbr * saa - sar * sab) / det


def flash_attention_2_on_h100():
    """FlashAttention-2 on H100 as measured (bench/gpu_kernels.py --only dropout on one H100,
    PyTorch 2.11's SDPA flash backend, p = 0): the executed causal FLOPs over its forward and
    backward times, as bench/gpu_kernels.py's attention() counts them, in the run whose backward
    adds into no .grad (results/models/h100-dropout-3.json; the two earlier runs carried that
    pass). Prints the table; returns the mean forward and backward fractions."""
    models = os.path.join(ROOT, "results", "models")
    with open(os.path.join(models, "h100-dropout-3.json")) as fh:
        rows = [r for r in json.load(fh)["attention_dropout"] if r["backend"] == "flash"]
    print("## h100-sxm-80gb, FlashAttention-2 (flash-attn 2.4.2 in MosaicML's 2024 table)\n")
    print("| seq | batch | forward ms | backward ms | forward fraction | backward fraction |")
    print("|--:|--:|--:|--:|--:|--:|")
    fwd, bwd = [], []
    for r in rows:
        s, b = r["seq"], r["batch"]
        blocks = math.ceil(s / 128)
        flops = 4.0 * b * s * s * r["heads"] * r["head_dim"] * (blocks + 1) / (2 * blocks)
        fwd.append(flops / r["forward_s_p0"] / 1e12 / PEAK_H100)
        bwd.append(2 * flops / r["backward_s_p0"] / 1e12 / PEAK_H100)
        print("| %d | %d | %.3f | %.3f | %.3f | %.3f |" % (s, b, 1e3 * r["forward_s_p0"],
                                                        1e3 * r["backward_s_p0"], fwd[-1],
                                                        bwd[-1]))
    f_mean, b_mean = sum(fwd) / len(fwd), sum(bwd) / len(bwd)
    print("\nMean: forward %.3f, backward %.3f of the peak.\n" % (f_mean, b_mean))
    return f_mean, b_mean


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin = argv[1]
    print("# The attention speed of MosaicML's 2023 runs, from their sequence sweeps\n")
    print("Made by: `scripts/attention_sweep.py build/default/apps/pipetwin` (the method and "
          "the source are in its docstring). f_fwd, f_bwd: how many times slower than the "
          "device preset's attention efficiencies the published slopes of time per token "
          "against the sequence say the attention's forward and backward ran. Error: "
          "predicted / published tokens/s - 1.\n")
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for device, rows in SWEEP.items():
            # BASE must be the preset's: (1, 1) predicts what the preset predicts.
            if predict(pipetwin, device, rows[0], (1.0, 1.0), tmp) != \
                    predict(pipetwin, device, rows[0], None, tmp):
                print("BASE[%r] is not the preset's attention efficiency (models/cluster.cc)"
                      % device, file=sys.stderr)
                return 1
            pub = slopes(rows, [r[4] for r in rows])
            p11 = [predict(pipetwin, device, r, (1.0, 1.0), tmp) for r in rows]
            s11 = slopes(rows, p11)
            s21 = slopes(rows, [predict(pipetwin, device, r, (2.0, 1.0), tmp) for r in rows])
            s12 = slopes(rows, [predict(pipetwin, device, r, (1.0, 2.0), tmp) for r in rows])
            f = fit(pub, s11, s21, s12)
            pf = [predict(pipetwin, device, r, f, tmp) for r in rows]
            sf = slopes(rows, pf)
            print(f"## {device}\n")
            print("| model | recompute | seq | micro-batch | accumulation | published tokens/s/GPU "
                  "| predicted, preset | error | predicted, f = (%.2f, %.2f) | error |" % f)
            print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
            for r, x, y in zip(rows, p11, pf):
                print("| %s | %s | %d | %d | %d | %d | %.0f | %+.1f%% | %.0f | %+.1f%% |"
                      % (r[0], TEMPLATE[r[0]][1], r[1], r[2], r[3], r[4], x,
                         100 * (x / r[4] - 1), y, 100 * (y / r[4] - 1)))
            print()
            print("| model | published slope (s per token per position) | predicted, preset | "
                  "predicted, f = (%.2f, %.2f) |" % f)
            print("|---|--:|--:|--:|")
            for m in pub:
                print("| %s | %.3g | %.3g | %.3g |" % (m, pub[m], s11[m], sf[m]))
            print()
            fwd, bwd = BASE[device]
            summary.append((device, "triton", f, fwd / f[0], bwd / f[1]))
    fwd, bwd = flash_attention_2_on_h100()
    base = BASE["h100-sxm-80gb"]
    summary.append(("h100-sxm-80gb", "flash-attn-2", (base[0] / fwd, base[1] / bwd), fwd, bwd))
    print("| device | kernel | f_fwd | f_bwd | attention forward efficiency | "
          "attention backward efficiency |")
    print("|---|---|--:|--:|--:|--:|")
    for device, kernel, f, fwd, bwd in summary:
        print("| %s | %s | %.2f | %.2f | %.3f | %.3f |" % (device, kernel, f[0], f[1], fwd, bwd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
