#!/usr/bin/env python3
"""published_bounds_test.py PIPETWIN SOURCE_DIR: the accuracy suite (scripts/published.py) stays
where results/published.md says it stands, source by source, against the published figures:

  Megatron-LM on A100 (Narayanan et al. 2021 Tables 1 and 2, Korthikanti et al. 2022, MegaScale's
  Megatron-LM baseline of 2024) and BLOOM and Megatron-Turing NLG (Megatron-DeepSpeed,
  BigScience 2022 and Smith et al. 2022): every row within 10%, but Table 1's rows 3 and 4
  (7.5B and 18.4B, the pessimistic pair: models/README.md) within 12%;
  DeepSpeed ZeRO-3 (Table 2) and FSDP on A100 (MosaicML, torchtitan's FSDP2), NVIDIA's 2025 NeMo H100 recipes
  its 2024 release (dgxc-benchmarking, BF16 and FP8) NeMo 24.07's FP8 performance table and
  the Nemotron-4 reports (Megatron-Core at DP 96 to 288, its 15B row on 768 GPUs reads -10%
  once its untied output layer is counted): every row within 15%, but dgxc 24.11's GPT-3 175B
  FP8 runs (FIT rows of the FP8 factor, its most optimistic: models/README.md, FP8) within 20%;
  Llama 3 on H100: within 20%; Megatron-Core's 2024 H100 weak-scaling table within 10%;
  MosaicML's H100 runs with the attention they ran (models/README.md, "MosaicML's attention")
  within 20%; the known miss (models/README.md): Llama 3's 131,072-token row (Table 4, row 3,
  context parallel 16) within 35%. On H200: MLPerf Training's Llama 3.1 405B runs (Nebius, v5.0)
  within 10%, its Llama 3.1 8B run (HPE, v5.1; one microbatch a step, full-iteration CUDA
  graphs: a known miss) within 30%, Google's A3 Ultra recipe (one sample log line) within 20%.
  Added 2026-11-27 after the model was fixed, held out: MLPerf Training's GPT-3 175B on H100
  (v3.1 to v4.1, 256 to 11,616 GPUs) and NeMo's performance tables of 25.09 and 26.02 (Llama 3
  70B and 3.1 405B, FP8) within 15%; MLPerf v5.1's Llama 3.1 8B on H100 (Cisco; one microbatch
  a step, the known miss of models/README.md) within 25% at tp 1 and 55% at tp 2; MLPerf v3.0's
  GPT-3 175B on H100 (TransformerEngine 0.8, the first FP8 stack; +13.6% to +15.0%) within 20%.
  Added the same day, later, held out (hopper2026/, a100more2026/): dgxc 24.11.1's Llama 3.1 70B,
  NeMo 25.09 and 25.11's Llama 3 70B, 3.1 405B and 8B (Megatron FSDP), MLPerf v3.1's GPT-3 175B
  at 6,144 and 10,240 H100s within 15% (MLPerf v3.0's 768-GPU run within 20%, as above);
  Megatron-LM's GPT-3 175B on 1,024 A100s within 10%; MosaicML's A100 40GB FSDP rows within 15%,
  but MPT-70B on 64 GPUs (micro-batch 2, one microbatch a step: +36%) within 40%; GLM-130B on 768
  A100 40GB (DeepSpeed's pipeline engine; +16% and +21%, a miss: models/README.md) within 25%.
  Since the compute beside hidden collectives is charged (models/README.md, "Compute beside
  hidden collectives", 2026-11-28), MPT-30B on 8 A100s (checkpointed, -13.8% to -17.6%) within 20%.

Defaults are checked too: with `tp_dgrad_reduce` or `zero3_unit` stripped (scripts/published.py
--without), the rows that state the default must not move and the others must.

A change to the model that moves a row out of its bound fails here; widen a bound only with a
reason in models/README.md."""
import os
import re
import subprocess
import sys


ROW = re.compile(r"^\| `([^`]+)` \|.*\| ([+-][0-9.]+)% \| (?:fit|test) \| (yes|\*\*no\*\*) \|$",
                 re.M)


def suite(pipetwin, src, without=None, only=None):
    """scripts/published.py's rows as (path, error in %, fits), with `without` keys stripped,
    of the runs under the `only` prefixes (all when None)."""
    cmd = [sys.executable, os.path.join(src, "scripts", "published.py"), pipetwin]
    if without:
        cmd += ["--without", without]
    if only:
        cmd += ["--only", only]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [(p, float(e), fits) for p, e, fits in ROW.findall(out)]


def main(argv):
    pipetwin, src = argv[1], argv[2]
    rows = suite(pipetwin, src)
    if len(rows) < 40:
        print("FAIL: only %d rows in the suite's table" % len(rows))
        return 1
    bad = 0
    for path, e, fits in rows:
        if path.startswith("mosaicml2023/h100"):
            ok, want = abs(e) <= 20, "within 20%"
        elif path.startswith("megatron2024/"):
            ok, want = abs(e) <= 10, "within 10%"
        elif path.startswith("mlperf2025/03-"):
            ok, want = abs(e) <= 30, "within 30% (a known miss: one microbatch a step)"
        elif path.startswith("mlperf2025b/01-"):
            ok, want = abs(e) <= 25, "within 25% (a known miss: one microbatch a step)"
        elif path.startswith("mlperf2025b/02-"):
            ok, want = abs(e) <= 55, "within 55% (a known miss: one microbatch a step, tp 2)"
        elif path.startswith(("mlperf2025b/", "nemo2025/")):
            ok, want = abs(e) <= 15, "within 15%"
        elif path.startswith("hopper2026/10-"):
            ok, want = abs(e) <= 20, "within 20% (MLPerf v3.0's first FP8 stack, TE 0.8)"
        elif path.startswith("hopper2026/"):
            ok, want = abs(e) <= 15, "within 15%"
        elif path.startswith("a100more2026/06-"):
            ok, want = abs(e) <= 40, "within 40% (one microbatch a step under FSDP, 40 GB)"
        elif path.startswith(("a100more2026/02-", "a100more2026/03-")):
            ok, want = abs(e) <= 25, "within 25% (GLM-130B, a miss)"
        elif path.startswith("a100more2026/0") and "mpt" in path:
            ok, want = abs(e) <= 15, "within 15%"
        elif path.startswith("mlperf2023/"):
            ok, want = abs(e) <= 20, "within 20% (MLPerf v3.0's first FP8 stack, TE 0.8)"
        elif path.startswith("gpurecipes2024/"):
            ok, want = abs(e) <= 20, "within 20% (one sample log line)"
        elif path.startswith("llama3-2024/") and "cp16" in path:
            ok, want = abs(e) <= 35, "within 35% (a known miss)"
        elif path.startswith("llama3-2024/"):
            ok, want = abs(e) <= 20, "within 20%"
        elif path.startswith(("dgxc2024/15-gpt3-175b", "dgxc2024/16-gpt3-175b")):
            ok, want = abs(e) <= 20, "within 20% (the FP8 fit's most optimistic)"
        elif path.startswith(("narayanan2021/03-", "narayanan2021/04-")):
            ok, want = abs(e) <= 12, "within 12% (the pessimistic pair)"
        elif path.startswith("mosaicml2023/a100-mpt-30b-8gpu"):
            ok, want = abs(e) <= 20, "within 20% (checkpointed FSDP on A100, the most pessimistic)"
        elif path.startswith("narayanan2021/t2-0") and "zero3" in path or \
                path.startswith(("mosaicml2023/a100", "torchtitan2024/")) or path.startswith(("dgxc2025/", "dgxc2024/", "nemo2024/", "nvidia2024/")):
            ok, want = abs(e) <= 15, "within 15%"
        else:
            ok, want = abs(e) <= 10, "within 10%"
        print("%s %-45s %+6.1f%%  %s" % ("ok  " if ok else "FAIL", path, e, want))
        bad |= not ok
    # --without: a key removed takes its default (on with sequence parallelism, off without).
    # Korthikanti et al.'s jobs state tp_dgrad_reduce: true: their selective + SP rows (01-04)
    # keep it by default, so do not move; their full-recompute baselines, without SP (05-08),
    # lose the hidden reductions. Narayanan et al.'s state false, the default without SP, so
    # they do not move.
    rows2 = dict((p, e) for p, e, _ in
                 suite(pipetwin, src, "tp_dgrad_reduce", "korthikanti2022/,narayanan2021/"))
    for path, e, _ in rows:
        e2 = rows2.get(path)
        full = "full-recompute" in path
        if path.startswith("korthikanti2022/") and full and not (e2 is not None and e2 < e - 0.5):
            print("FAIL --without tp_dgrad_reduce: %s %+.1f%% -> %s" % (path, e, e2))
            bad = 1
        if path.startswith("korthikanti2022/") and not full and e2 != e:
            print("FAIL --without tp_dgrad_reduce: %s %+.1f%% -> %s" % (path, e, e2))
            bad = 1
        if path.startswith("narayanan2021/") and e2 != e:
            print("FAIL --without tp_dgrad_reduce: %s %+.1f%% -> %s" % (path, e, e2))
            bad = 1
    # --without zero3_unit: a job that says only `zero: 3` is DeepSpeed's stage 3 (module
    # units, the default), so Table 2's ZeRO-3 rows, which state module, do not move.
    rows3 = dict((p, e) for p, e, _ in suite(pipetwin, src, "zero3_unit", "narayanan2021/t2-0"))
    for path, e, _ in rows:
        if "zero3" in path and rows3.get(path) != e:
            print("FAIL --without zero3_unit: %s %+.1f%% -> %s" % (path, e, rows3.get(path)))
            bad = 1
    print("PASS" if not bad else "FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
