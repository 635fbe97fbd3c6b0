#!/usr/bin/env python3
"""pipetwin against Calculon on the accuracy suite's runs that Calculon can express.

For each job in examples/published/ this writes Calculon's three inputs (application,
execution, system) from the job, runs Calculon's `llm` command (a checkout of
github.com/calculon-ai/calculon, run with the python that runs this script, which needs numpy,
pandas and pyyaml: a venv will do)
and puts its iteration time beside pipetwin's. Calculon's prediction of the published metric
is pipetwin's prediction scaled by pipetwin's time over Calculon's (every metric of the suite
is a fixed amount of work over the step time), so both are judged on the same FLOP count.

Calculon cannot express: ZeRO-3 / FSDP, context parallelism, grouped-query attention, gated
MLPs (SwiGLU), DeepSpeed's pipeline engine (it is modelled as Megatron's); those rows are
listed as skipped with the reason. Mapping: bf16 runs as Calculon's float16 (same peak),
recompute full / selective / none as full / attn_only / none, sp as rs_ag (with its
seq_par_ag_redo under selective recompute, as Calculon's own validation does), tp_comm overlap
as `ring`, grad_reduce overlap as data_par_overlap, ZeRO-1 as optimizer_sharding; TP on the
node's network, PP and DP on the second tier unless the whole job fits in a node. Calculon's
own A100 and H100 system files are used as they are (no constant of either tool is tuned).

  scripts/calculon_comparison.py build/default/apps/pipetwin /path/to/calculon \
      > results/calculon-comparison.md
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import published  # noqa: E402  (the suite's reader and metrics)

SYSTEMS = {"a100-sxm-80gb": "a100_80g.json", "h100-sxm-80gb": "h100_80g_nvl8.json"}


def presets(pipetwin):
    out = subprocess.run([pipetwin, "presets"], check=True, capture_output=True, text=True).stdout
    table = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) < 9 or not f[1].isdigit():
            break
        table[f[0]] = {"layers": int(f[1]), "hidden": int(f[2]), "ffn_hidden": int(f[3]),
                       "heads": int(f[4]), "kv_heads": int(f[5]), "seq_len": int(f[7])}
    return table


def calculon_inputs(job, table):
    """(application, execution, system file) or a reason it cannot be expressed."""
    m = dict(job.get("model", {}))
    name = m.get("preset", "")
    if name.startswith("llama"):
        return "gated MLP and grouped-query attention (Llama)"
    base = dict(table[name])
    if "hidden" in m and "ffn_hidden" not in m:  # GPT presets: ffn = 4h
        base["ffn_hidden"] = 4 * int(m["hidden"])
    if "heads" in m and "kv_heads" not in m:
        base["kv_heads"] = int(m["heads"])
    base.update({k: m[k] for k in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads",
                                   "seq_len") if k in m})
    if base["kv_heads"] != base["heads"]:
        return "grouped-query attention"
    if m.get("activation") not in (None, "gelu"):
        return "activation %s" % m["activation"]
    par = job.get("parallel", {})
    t = job.get("training", {})
    tp, pp, dp = int(par.get("tp", 1)), int(par.get("pp", 1)), int(par.get("dp", 1))
    if int(par.get("cp", 1)) > 1:
        return "context parallelism"
    if int(par.get("zero", 0)) >= 2:
        return "ZeRO-%d" % int(par["zero"])
    if "layers_per_stage" in m:
        return "uneven stages"
    device = job.get("cluster", {}).get("device")
    if device not in SYSTEMS:
        return "device %s" % device
    sp = bool(par.get("sp", False))
    recompute = {"full": "full", "selective": "attn_only"}.get(t.get("recompute", "none"), "none")
    overlap = t.get("overlap", {}) or {}
    app = {"hidden": base["hidden"], "feedforward": base["ffn_hidden"],
           "seq_size": base["seq_len"], "attn_heads": base["heads"],
           "attn_size": base["hidden"] // base["heads"], "num_blocks": base["layers"]}
    exe = {"num_procs": tp * pp * dp, "tensor_par": tp, "pipeline_par": pp, "data_par": dp,
           "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1,
           "batch_size": int(t["global_batch"]), "microbatch_size": int(t.get("micro_batch", 1)),
           "datatype": "float16", "fused_activation": False, "attention_type": "multihead",
           "activation_recompute": recompute,
           "pipeline_interleaving": int(par.get("vpp", 1)),
           "optimizer_sharding": int(par.get("zero", 0)) == 1,
           "tensor_par_comm_type": "rs_ag" if sp and tp > 1 else "ar",
           "tensor_par_overlap": "ring" if overlap.get("tp_comm") and tp > 1 else "none",
           "seq_par_ag_redo": sp and tp > 1 and recompute == "attn_only",
           "data_par_overlap": bool(overlap.get("grad_reduce", False)),
           "weight_offload": False, "activations_offload": False, "optimizer_offload": False,
           "training": True}
    if tp * pp * dp <= 8:  # one node: everything on NVLink
        exe.update(pipeline_par_net=0, data_par_net=0)
    return app, exe, SYSTEMS[device]


def run_calculon(calculon, app, exe, system, tmp):
    paths = {}
    for name, obj in (("app", app), ("exe", exe)):
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(obj, f)
    stats = os.path.join(tmp, "stats.json")
    env = dict(os.environ, PYTHONPATH=calculon)
    p = subprocess.run([sys.executable, os.path.join(calculon, "bin", "calculon"), "llm",
                        paths["app"], paths["exe"], os.path.join(calculon, "systems", system),
                        stats], env=env, capture_output=True, text=True)
    if p.returncode != 0 or not os.path.exists(stats):
        lines = (p.stderr or p.stdout).strip().splitlines()
        return None, (lines[-1] if lines else "failed")[:90]
    with open(stats) as f:
        return json.load(f)["total_time"], None


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin, calculon = argv[1], os.path.abspath(argv[2])
    root = os.path.normpath(os.path.join(HERE, ".."))
    table = presets(pipetwin)
    rows, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(root, "examples", "published", "*", "*.yaml"))):
            r = published.read_run(path)
            rel = os.path.relpath(path, os.path.join(root, "examples", "published"))
            with open(path) as f:
                job = yaml.safe_load(f)
            got = calculon_inputs(job, table)
            if isinstance(got, str):
                skipped.append((rel, got))
                continue
            rep = published.simulate(pipetwin, path, tmp)
            metric = r["meta"]["metric"]
            ours = published.METRICS[metric][1](rep)
            ours_s = rep["iteration_time_ms"] / 1000.0
            calc_s, why = run_calculon(calculon, *got, tmp)
            if calc_s is None:
                skipped.append((rel, "Calculon refused: " + why))
                continue
            theirs = calc_s if metric in published.TIMES else ours * ours_s / calc_s
            value = r["meta"]["value"]

            def err(x):
                return published.error_pct(metric, x, value)

            rows.append({"rel": rel, "device": r["device"], "split": r["meta"]["split"],
                         "ours_s": ours_s, "calc_s": calc_s, "ours": err(ours),
                         "calc": err(theirs)})
    rev = subprocess.run(["git", "-C", calculon, "log", "-1", "--format=%h, %cs"],
                         capture_output=True, text=True).stdout.strip() or "commit unknown"
    out = ["# pipetwin against Calculon on the accuracy suite\n",
           "Made by: `scripts/calculon_comparison.py build/default/apps/pipetwin CALCULON_DIR "
           "> results/calculon-comparison.md` (Calculon: github.com/calculon-ai/calculon at " + rev +
           ", its own A100 and H100 system files; the mapping of each job is in the script's "
           "docstring). Error = the published metric as each tool predicts it, against the "
           "published value (+: optimistic), as in `results/published.md`.\n",
           "| run | split | pipetwin s/step | Calculon s/step | pipetwin error | Calculon error |",
           "|---|---|--:|--:|--:|--:|"]
    for x in rows:
        out.append("| `%s` | %s | %.2f | %.2f | %+.1f%% | %+.1f%% |" % (
            x["rel"], x["split"], x["ours_s"], x["calc_s"], x["ours"], x["calc"]))
    out += ["", "| device | runs (test) | pipetwin mean abs (max) | Calculon mean abs (max) |",
            "|---|--:|--:|--:|"]
    for dev in sorted({x["device"] for x in rows}):
        sel = [x for x in rows if x["device"] == dev and x["split"] == "test"]
        if not sel:
            continue
        o = [abs(x["ours"]) for x in sel]
        c = [abs(x["calc"]) for x in sel]
        out.append("| %s | %d | %.1f%% (%.1f%%) | %.1f%% (%.1f%%) |" % (
            dev, len(sel), sum(o) / len(o), max(o), sum(c) / len(c), max(c)))
    out += ["", "Not expressible in Calculon (or refused by it):", ""]
    out += ["- `%s`: %s" % s for s in skipped]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
