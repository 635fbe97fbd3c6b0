#!/usr/bin/env python3
"""How sharded data-parallel runs' errors grow with the nodes, beside the ring latency of their
collectives.

  scripts/fsdp_scale.py build/default/apps/pipetwin [PREFIX ...]

For every run of examples/published/ under ZeRO-2 or 3 whose path starts with a PREFIX (default
`mosaicml2023/h100-`), predicts it (`pipetwin simulate`) and prints the nodes its data-parallel
group spans (Megatron's rank order: tp innermost, then cp, then dp), the suite's error (as
scripts/published.py computes it) and L, the ring latency of its ZeRO collectives as a share of
the predicted step: the collectives a step issues times one ring's latency over the group,
(nodes - 1) a_inter + (n - nodes) a_intra with the presets' 5 and 2 us (models/README.md,
"Communication"). The count, per unit (a decoder layer; a weight matrix, 4 a layer, with
DeepSpeed's module units): ZeRO-3 gathers in F and in I and reduce-scatters in W, every
microbatch; ZeRO-2 (counted per layer, as FSDP's SHARD_GRAD_OP) reduce-scatters every
microbatch and gathers once a step. It is a count of the model's structure, not read from its
report. Then, per model (runs whose paths differ only in their GPU count) over 16 nodes or more
(MosaicML's 2024 table, one attention kernel throughout), the error's growth from its fewest
nodes to its most beside L's: equal
growths say the latency reads as if paid in series with the compute, which the model does not
do (it hides it beside the compute). A diagnostic for models/README.md ("Known miss, FSDP over
many nodes"); nothing in the model reads it.
"""
import os
import re
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published  # noqa: E402  (the suite's run reader and error definition)

ALPHA_INTRA_MS, ALPHA_INTER_MS = 2e-3, 5e-3


def ring_latency_ms(dp, nodes):
    return (nodes - 1) * ALPHA_INTER_MS + (dp - nodes) * ALPHA_INTRA_MS


def collectives_per_step(job):
    par, tr, model = job["parallel"], job.get("training") or {}, job["model"]
    layers = model["layers"] // par.get("pp", 1)
    microbatches = tr["global_batch"] // (tr["micro_batch"] * par["dp"])
    if par["zero"] == 3:
        units = layers * (1 if tr.get("zero3_unit", "module") == "layer" else 4)
        return 3 * units * microbatches
    return layers * microbatches + layers  # ZeRO-2 counted per layer, as FSDP's SHARD_GRAD_OP


def dp_nodes(job):
    par, cl = job["parallel"], job["cluster"]
    per_node = max(1, cl.get("gpus_per_node", 8) // (par.get("tp", 1) * par.get("cp", 1)))
    return max(1, -(-par["dp"] // per_node))


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    pipetwin, prefixes = argv[1], tuple(argv[2:]) or ("mosaicml2023/h100-",)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for p, rel in published.job_paths(prefixes):
            with open(p) as f:
                job = yaml.safe_load(f)
            if job["parallel"].get("zero", 0) < 2 or "layers" not in job["model"]:
                continue
            run = published.read_run(p)
            rep = published.simulate(pipetwin, p, tmp)
            meta = run["meta"]
            err = published.error_pct(meta["metric"], published.METRICS[meta["metric"]][1](rep),
                                      meta["value"])
            nodes = dp_nodes(job)
            lat = (100.0 * collectives_per_step(job) * ring_latency_ms(job["parallel"]["dp"], nodes)
                   / rep["iteration_time_ms"])
            recompute = (job.get("training") or {}).get("recompute", "none")
            rows.append((rel, recompute, nodes, err, lat))
    print("| run | recompute | DP nodes | error | ring latency, share of the step |")
    print("|---|---|--:|--:|--:|")
    for rel, recompute, nodes, err, lat in rows:
        print("| `%s` | %s | %d | %+.1f%% | %.1f%% |" % (rel, recompute, nodes, err, lat))
    models = {}
    for row in rows:
        if row[2] < 16:
            continue
        models.setdefault(re.sub(r"-\d+gpu\.yaml$", "", row[0]), []).append(row)
    print()
    print("| model | recompute | nodes | error growth | ring latency growth |")
    print("|---|---|--:|--:|--:|")
    for name, rs in sorted(models.items()):
        if len(rs) < 2:
            continue
        lo, hi = min(rs, key=lambda r: r[2]), max(rs, key=lambda r: r[2])
        if lo[2] == hi[2]:
            continue
        print("| `%s` | %s | %d to %d | %+.1f points | %+.1f points |"
              % (name, hi[1], lo[2], hi[2], hi[3] - lo[3], hi[4] - lo[4]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
