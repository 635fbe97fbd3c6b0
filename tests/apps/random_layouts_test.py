#!/usr/bin/env python3
"""Random layouts: `simulate` and `plan` either answer, with a report that holds together, or
refuse with exit status 2 and a message that names the job file.

Jobs are drawn from a fixed seed over every schedule, device and layout key the job file
offers (custom shapes with grouped-query attention, uneven splits with empty first and last
stages, ZeRO 0 to 3, every overlap flag, fp8, CP's four exchanges, stragglers, fabric, rank
orders), so many are valid and some are not. A report must have a positive, finite step; an
MFU in (0, 1); a breakdown whose parts are >= 0 and sum to the step; no negative memory and
a peak between the parameters and the sum of the per-category peaks; and, for every fourth
GPU job, faster kernels (every efficiency at 1) must not predict a longer step; no A100 job
moved to an H100 may either; and for another fourth of the GPU jobs more recompute
(none -> selective -> full) must not raise a rank's peak. No run may crash, exit otherwise or
take a minute. (The sweep found a negative I on a stage holding only the embedding, "internal
error: simulated time ran backwards", and an attention that got slower as the GEMMs got
faster; full recompute peaking above selective; small models slower on an H100.)

  random_layouts_test.py PIPETWIN [CASES] [SEED]
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

SCHEDULES = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"]
DEVICES = ["a100-sxm-80gb", "a100-sxm-40gb", "h100-sxm-80gb", "h200-sxm-141gb", "cpu"]
FP8_DEVICES = ["h100-sxm-80gb", "h200-sxm-141gb"]


def simulate_job(rng):
    c = rng.choice
    pp, tp, cp, dp = c([1, 2, 3, 4, 8]), c([1, 2, 4]), c([1, 1, 2]), c([1, 2, 3, 16])
    schedule = c(SCHEDULES)
    vpp = c([2, 3]) if schedule == "interleaved-1f1b" else 1
    stages = pp * (2 if schedule in ("zbv", "dualpipev") else vpp)
    heads, head_dim = c([4, 8, 16, 32]), c([16, 64, 128])
    layers = stages * c([1, 2, 3])
    model = {"layers": layers, "hidden": heads * head_dim, "heads": heads,
             "kv_heads": c([heads, max(tp, heads // 4)]),
             "vocab": c([1000, 32000, 50257, 128256]), "seq_len": c([128, 1024, 4096, 8192]),
             "mlp": c(["gelu", "swiglu"]), "norm": c(["layernorm", "rmsnorm"]),
             "position": c(["learned", "rope"]), "tied_embeddings": c([True, False]),
             "bias": c([True, False]), "dropout": c([True, False])}
    if stages >= 2 and rng.random() < 0.3:  # empty first and/or last stage
        split = [layers // stages] * stages
        if rng.random() < 0.5:
            split[1] += split[0]
            split[0] = 0
        if rng.random() < 0.5:
            split[-2] += split[-1]
            split[-1] = 0
        model["layers_per_stage"] = split
    par = {"pp": pp, "tp": tp, "cp": cp, "dp": dp, "zero": c([0, 1, 2, 3])}
    if vpp > 1:
        par["vpp"] = vpp
    if tp > 1 and rng.random() < 0.6:
        par["sp"] = True
    if cp > 1:
        par["cp_comm"] = c(["p2p", "all_gather", "a2a", "a2a+p2p"])
        if par["cp_comm"] == "a2a+p2p":
            par["cp_a2a"] = 2
    micro_batch = c([1, 2])
    precision = c(["bf16", "fp8", "fp16", "fp32"])
    training = {"global_batch": c([1, 2, 4, 8]) * pp * micro_batch * dp,
                "micro_batch": micro_batch, "precision": precision,
                "optimizer": c(["adam", "sgd", "sgd-momentum"]),
                "recompute": c(["none", "selective", "full"]),
                "flash_attention": c([True, False]),
                "overlap": {"tp_comm": rng.random() < 0.3, "grad_reduce": rng.random() < 0.5,
                            "param_gather": rng.random() < 0.4}}
    if rng.random() < 0.3:
        training["overlap"]["tp_dgrad_reduce"] = c([True, False])
    if par["zero"] == 3:
        training.update(zero3_unit=c(["module", "layer"]), zero3_prefetch=c([0, 1, 2]),
                        zero3_nics=c(["auto", "rank", "node"]))
    if rng.random() < 0.3:
        training["grad_reduce_dtype"] = c(["fp32", "bf16"])
    if rng.random() < 0.2:
        training["grad_bucket_mb"] = c([1, 25, 1000])
    if rng.random() < 0.2:
        training["pipeline_engine"] = c(["megatron", "deepspeed"])
    if rng.random() < 0.2:
        training["cross_entropy"] = c(["fused", "unfused"])
    if precision in ("bf16", "fp8") and rng.random() < 0.2:
        training["master_weights"] = c(["fp32", "remainders"])
    if precision == "fp8" and rng.random() < 0.2:
        training["fp8_params"] = True
    gpus_per_node = c([1, 4, 8, 16])
    cluster = {"device": c(FP8_DEVICES if precision == "fp8" else DEVICES),
               "gpus_per_node": gpus_per_node}
    if rng.random() < 0.3:
        cluster["nics_per_node"] = c([1, 2, gpus_per_node])
    if rng.random() < 0.3:
        cluster["variability"] = c([
            {"distribution": "lognormal", "cv": 0.1}, {"distribution": "normal", "cv": 0.2},
            {"distribution": "slow_fraction", "fraction": 0.1, "slowdown": 3},
            {"distribution": "none"}])
    if rng.random() < 0.2:
        cluster["fabric"] = {"block_nodes": c([1, 2, 32]), "oversubscription": c([1, 2, 4])}
    if rng.random() < 0.2:
        cluster["rank_order"] = c(["tp-cp-dp-pp", "pp-dp-cp-tp", "dp-tp-pp-cp"])
    if rng.random() < 0.2:
        cluster["dp_reduction"] = c(["auto", "ring", "tree"])
    if rng.random() < 0.1:
        cluster["compute"] = {"comm_hbm_touches": c([0, 16]), "gemm_efficiency": c([0.01, 1.0])}
    if cluster["device"] == "cpu" and rng.random() < 0.8:
        # Mostly what the CPU executor runs, which the cpu device models; else refused (exit 2).
        model.update(kv_heads=heads, mlp="gelu", norm="layernorm", position="learned",
                     tied_embeddings=False, bias=True)  # dropout: either, the executor runs both
        training.update(precision="fp32", grad_reduce_dtype="fp32")
        training.pop("master_weights", None)
        training["overlap"].update(tp_comm=False, param_gather=False)
        training["overlap"].pop("tp_dgrad_reduce", None)
    return {"schedule": schedule, "parallel": par, "model": model, "training": training,
            "cluster": cluster}


def plan_job(rng):
    def some(values):
        return rng.sample(values, rng.randint(1, len(values)))
    device = rng.choice(["a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb"])
    job = {"schedule": "1f1b", "parallel": {"pp": 1},
           "model": {"preset": rng.choice(["tiny", "gpt3-1.3b", "llama3-8b", "gpt3-175b"])},
           "training": {"global_batch": rng.choice([8, 64, 512, 1536]), "micro_batch": 1,
                        "precision": rng.choice(["bf16", "fp8"]) if device != "a100-sxm-80gb"
                        else "bf16"},
           "cluster": {"device": device, "gpus_per_node": rng.choice([4, 8]),
                       "nodes": rng.choice([1, 2, 16, 128])},
           "search": {}}
    s = job["search"]
    for key, values, p in [("schedule", SCHEDULES, 0.7), ("tp", [1, 2, 4, 8], 0.7),
                           ("pp", [1, 2, 3, 4, 8, 16], 0.7), ("cp", [1, 2, 4], 0.4),
                           ("cp_comm", ["p2p", "all_gather", "a2a"], 0.4),
                           ("vpp", [2, 3, 4], 0.4), ("sp", [False, True], 0.4),
                           ("micro_batch", [1, 2, 4], 0.4),
                           ("recompute", ["none", "selective", "full"], 0.4),
                           ("zero", [0, 1, 2, 3], 0.4), ("overlap", [True, False], 0.3)]:
        if rng.random() < p:
            s[key] = some(values)
    return job


def check_report(path, rep):
    bad = []
    step = rep["iteration_time_ms"]
    if not (math.isfinite(step) and step > 0):
        bad.append("iteration_time_ms %r" % step)
    mfu = rep["throughput"]["mfu"]
    if not 0 < mfu < 1:
        bad.append("mfu %r" % mfu)
    b = rep.get("breakdown") or {}
    parts = ["compute_ms", "tp_cp_comm_exposed_ms", "dp_comm_exposed_ms", "pp_comm_and_bubble_ms"]
    for key, v in b.items():
        if isinstance(v, float) and not (math.isfinite(v) and v >= -1e-9):
            bad.append("breakdown.%s %r" % (key, v))
    if b and abs(sum(b[k] for k in parts) - step) > 1e-6 * step + 1e-6:
        bad.append("breakdown parts sum to %r, the step is %r" % (sum(b[k] for k in parts), step))
    for r in rep["ranks"]:
        mem = r["memory_bytes"]
        if any(v < 0 for v in mem.values()):
            bad.append("rank %d memory %r" % (r["rank"], mem))
        if not mem["params"] <= r["peak_memory_bytes"] <= sum(mem.values()):
            bad.append("rank %d peak %d outside [params, sum of the categories] %r"
                       % (r["rank"], r["peak_memory_bytes"], mem))
        if not 0 <= r["bubble_fraction"] <= 1:
            bad.append("rank %d bubble_fraction %r" % (r["rank"], r["bubble_fraction"]))
    return ["%s: %s" % (path, m) for m in bad]


def run(cmd, path):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, ["%s: %s took over 60 s" % (path, cmd[1])]
    if p.returncode == 2:
        if not p.stderr.startswith("pipetwin: " + path):
            return p, ["%s: exit 2 without naming the file: %r" % (path, p.stderr[:200])]
        return p, []
    if p.returncode != 0:
        return p, ["%s: %s exit %d: %s" % (path, cmd[1], p.returncode, p.stderr[-300:])]
    return p, []


def main():
    binary = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 20261129)
    failures, answered, refused = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        for i in range(cases):
            is_plan = i % 5 == 4
            job = plan_job(rng) if is_plan else simulate_job(rng)
            path = os.path.join(tmp, "job%d.yaml" % i)
            with open(path, "w") as f:
                json.dump(job, f)  # JSON is YAML
            cmd = [binary, "plan" if is_plan else "simulate", path, "--report", report]
            p, errs = run(cmd, path)
            if errs:
                failures += errs + ["  job: " + json.dumps(job)]
                continue
            if p.returncode == 2:
                refused += 1
                continue
            answered += 1
            if is_plan:
                continue
            with open(report) as f:
                rep = json.load(f)
            errs = check_report(path, rep)

            def rerun(changed, what):
                """The report of the changed job, or (None, errors)."""
                with open(path, "w") as f:
                    json.dump(changed, f)
                p, errs = run(cmd, path)
                if not errs and p.returncode != 0:
                    errs = ["%s: %s refused: %s" % (path, what, p.stderr[:200])]
                if errs:
                    return None, errs
                with open(report) as f:
                    return json.load(f), []

            gpu = job["cluster"]["device"] != "cpu"
            # Every fourth: faster kernels (GEMMs, attention, memory-bound work at their
            # peak) never predict a longer step.
            if not errs and i % 4 == 0 and gpu:
                fast = json.loads(json.dumps(job))
                fast["cluster"]["compute"] = dict(
                    fast["cluster"].get("compute", {}), gemm_efficiency=1.0,
                    attention_forward_efficiency=1.0, attention_backward_efficiency=1.0,
                    hbm_efficiency=1.0)
                got, errs = rerun(fast, "faster kernels")
                if got and got["iteration_time_ms"] > rep["iteration_time_ms"] * (1 + 1e-9):
                    errs = ["%s: faster kernels predict a longer step, %.6g ms against %.6g"
                            % (path, got["iteration_time_ms"], rep["iteration_time_ms"])]
            # Every A100 job on an H100, whose every datasheet rate is higher, never predicts a
            # longer step.
            if not errs and job["cluster"]["device"].startswith("a100"):
                h100 = json.loads(json.dumps(job))
                h100["cluster"]["device"] = "h100-sxm-80gb"
                got, errs = rerun(h100, "the same job on an H100")
                if got and got["iteration_time_ms"] > rep["iteration_time_ms"] * (1 + 1e-9):
                    errs = ["%s: an H100 predicts a longer step than an A100, %.6g ms against "
                            "%.6g" % (path, got["iteration_time_ms"], rep["iteration_time_ms"])]
            # Every fourth, another: more recompute (none -> selective -> full) never raises a
            # rank's peak memory.
            more = {"none": "selective", "selective": "full"}.get(job["training"]["recompute"])
            if not errs and i % 4 == 2 and more and gpu:
                again = json.loads(json.dumps(job))
                again["training"]["recompute"] = more
                got, errs = rerun(again, "recompute " + more)
                for a, b in zip(rep["ranks"], got["ranks"] if got else []):
                    if b["peak_memory_bytes"] > a["peak_memory_bytes"]:
                        errs = ["%s: recompute %s raises rank %d's peak, %d bytes against %d"
                                % (path, more, a["rank"], b["peak_memory_bytes"],
                                   a["peak_memory_bytes"])]
                        break
            # Every fourth, another: nodes the job leaves idle change nothing.
            if not errs and i % 4 == 1:
                par = job["parallel"]
                world = par["pp"] * par["tp"] * par["cp"] * par["dp"]
                gpn = job["cluster"]["gpus_per_node"]
                idle = json.loads(json.dumps(job))
                idle["cluster"]["nodes"] = 2 * -(-world // gpn)
                got, errs = rerun(idle, "twice the nodes")
                if got and got["iteration_time_ms"] != rep["iteration_time_ms"]:
                    errs = ["%s: idle nodes change the step, %.9g ms against %.9g"
                            % (path, got["iteration_time_ms"], rep["iteration_time_ms"])]
            if errs:
                failures += errs + ["  job: " + json.dumps(job)]
    print("%d jobs: %d answered, %d refused with exit 2" % (cases, answered, refused))
    # A sweep that refuses nearly everything tests nothing.
    if answered < cases // 2:
        failures.append("only %d of %d jobs were valid: the generator has drifted from the "
                        "job file's rules" % (answered, cases))
    if failures:
        print("\n".join(failures))
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
