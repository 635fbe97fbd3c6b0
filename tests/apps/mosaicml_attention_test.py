#!/usr/bin/env python3
"""mosaicml_attention_test.py PIPETWIN SOURCE_DIR: the attention efficiencies that MosaicML's
jobs state (examples/published/mosaicml2023/, `cluster.compute`) are the ones
scripts/attention_sweep.py gives, to two decimals, for the device and kernel of each job: for
llm-foundry's Triton kernel, derived from the tables' sequence sweeps; for flash-attn (the 2024
table's `--attn_impl flash` runs), FlashAttention-2 as measured on an H100. With the derived
ones each swept model's slope of time per token against the sequence (what the derivation
matches) is predicted within 5%, and every swept run without activation checkpointing within 6%
(none of them in the suite; the checkpointed ones carry the model's separate pessimism about
MosaicML's checkpointed runs, models/README.md), where the device preset's attention misses the
longest sequences by more than 50%.

A change to the model that moves the derived slowdown fails here until the jobs state the
new values (and results/models/mosaicml-attention.md is regenerated)."""
import glob
import os
import re
import subprocess
import sys

import yaml

SUMMARY = re.compile(r"^\| (\S+) \| (triton|flash-attn-2) \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+) \| "
                     r"([0-9.]+) \|$", re.M)
SWEEP_ROW = re.compile(r"^\| \d+b \| (none|full) \| (\d+) \|.*\| ([+-][0-9.]+)% \| [0-9.]+ \| "
                       r"([+-][0-9.]+)% \|$", re.M)
SLOPE_ROW = re.compile(r"^\| (\d+b) \| ([0-9.e+-]+) \| [0-9.e+-]+ \| ([0-9.e+-]+) \|$", re.M)


def main(argv):
    pipetwin, src = argv[1], argv[2]
    out = subprocess.run([sys.executable, os.path.join(src, "scripts", "attention_sweep.py"),
                          pipetwin], check=True, capture_output=True, text=True).stdout
    derived = {(d, k): (float(fwd), float(bwd)) for d, k, fwd, bwd in SUMMARY.findall(out)}
    bad = 0
    if set(derived) != {("a100-sxm-80gb", "triton"), ("h100-sxm-80gb", "triton"),
                        ("h100-sxm-80gb", "flash-attn-2")}:
        print("FAIL: the sweep derived %s" % sorted(derived))
        return 1
    rows = SWEEP_ROW.findall(out)
    if len(rows) != 42:
        print("FAIL: %d sweep rows, want 42" % len(rows))
        return 1
    for recompute, seq, at_preset, at_derived in rows:
        # 6%: MPT-3B on A100 at seq 512, where the attention is least, reads -5.9% once the
        # compute beside hidden collectives is charged (models/README.md, "Compute beside
        # hidden collectives"); -4.2% before.
        if recompute == "none" and abs(float(at_derived)) > 6:
            print("FAIL: a sweep row at seq %s reads %s%% with the derived attention" %
                  (seq, at_derived))
            bad = 1
    slopes = SLOPE_ROW.findall(out)
    if len(slopes) != 8:
        print("FAIL: %d swept models' slopes, want 8" % len(slopes))
        return 1
    for model, published, derived_slope in slopes:
        ratio = float(derived_slope) / float(published)
        print("%s %s slope predicted / published %.3f" %
              ("ok  " if abs(ratio - 1) <= 0.05 else "FAIL", model, ratio))
        bad |= abs(ratio - 1) > 0.05
    worst_preset = max(float(p) for _, s, p, _ in rows if s == "32768")
    if worst_preset < 50:
        print("FAIL: at seq 32768 the preset reads only %+.1f%%: the sweep no longer shows the "
              "slow attention" % worst_preset)
        bad = 1
    stated = 0
    for path in sorted(glob.glob(os.path.join(src, "examples", "published", "mosaicml2023",
                                              "*.yaml"))):
        with open(path) as f:
            text = f.read()
        cluster = yaml.safe_load(text)["cluster"]
        compute = cluster.get("compute")
        if not compute:
            continue
        stated += 1
        kernel = "flash-attn-2" if "--attn_impl flash" in text else "triton"
        want = derived[(cluster["device"], kernel)]
        got = (compute["attention_forward_efficiency"], compute["attention_backward_efficiency"])
        ok = all(abs(w - g) <= 0.0051 for w, g in zip(want, got))  # g: w to two decimals
        print("%s %s (%s) states %s, the script gives %.3f, %.3f" %
              ("ok  " if ok else "FAIL", os.path.basename(path), kernel, got, *want))
        bad |= not ok
    if stated != 36:
        print("FAIL: %d MosaicML jobs state the attention, want all 36" % stated)
        bad = 1
    print("PASS" if not bad else "FAIL")
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
