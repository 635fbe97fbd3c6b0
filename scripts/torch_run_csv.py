#!/usr/bin/env python3
"""torch_run_csv.py — run a schedule CSV on torch's pipelining runtime and check gradients.

Started once per pipeline rank (torchrun, gloo, CPU). The model is a stack of S = pp·chunks
small blocks (Linear + tanh, fixed seed); stage s is block s, placed as the schedule says
("loop": stage s on rank s mod pp; "v": rank r holds stages r and 2pp − 1 − r). One step runs
either
  --csv FILE --format compute_comms|compute_only   torch's _PipelineScheduleRuntime._load_csv
  --csv FILE --multi                               torch's PipelineScheduleMulti._load_csv
                                                   (compute_only, step-aligned idle cells:
                                                   sends and receives matched by step)
  --torch NAME                                     torch's own schedule class
and every rank compares its stages' gradients with a single-process reference (the whole
model on the whole batch, the loss a mean over microbatches as torch's scale_grads makes it).
Rank 0 prints one line: `max_rel_err=<x> ok=<0|1>`, and exits 1 when the error exceeds 1e-6.

  torchrun --nproc-per-node 2 scripts/torch_run_csv.py --pp 2 --chunks 2 --placement v \\
      --microbatches 8 --csv zbv.csv --format compute_comms
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

D = 16  # features
MB = 2  # samples per microbatch


def blocks(num_stages):
    torch.manual_seed(1234)
    return [
        torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.Tanh()).double()
        for _ in range(num_stages)
    ]


def data(m):
    g = torch.Generator().manual_seed(99)
    x = torch.randn(m * MB, D, generator=g, dtype=torch.float64)
    y = torch.randn(m * MB, D, generator=g, dtype=torch.float64)
    return x, y


def loss_fn(out, target):
    return torch.nn.functional.mse_loss(out, target)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pp", type=int, required=True)
    p.add_argument("--chunks", type=int, default=1)
    p.add_argument("--placement", choices=["loop", "v"], default="loop")
    p.add_argument("--microbatches", type=int, required=True)
    p.add_argument("--csv")
    p.add_argument("--format", default="compute_comms")
    p.add_argument("--multi", action="store_true")
    p.add_argument("--torch", dest="torch_name")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    pp = a.pp
    num_stages = pp * a.chunks
    if a.placement == "v":
        mine = [rank, 2 * pp - 1 - rank]
    else:
        mine = [c * pp + rank for c in range(a.chunks)]

    model = blocks(num_stages)
    x, y = data(a.microbatches)

    # Reference: the whole model, the whole batch, one process.
    ref = blocks(num_stages)
    out = x
    for b in ref:
        out = b(out)
    loss_fn(out, y).backward()

    stages = [
        PipelineStage(model[s], s, num_stages, torch.device("cpu"))
        for s in mine
    ]
    if a.torch_name:
        cls = {
            "gpipe": S.ScheduleGPipe,
            "1f1b": S.Schedule1F1B,
            "interleaved-1f1b": S.ScheduleInterleaved1F1B,
            "zb-h1": S.ScheduleInterleavedZeroBubble,
            "zbv": S.ScheduleZBVZeroBubble,
            "dualpipev": S.ScheduleDualPipeV,
        }[a.torch_name]
        single = a.torch_name in ("gpipe", "1f1b")
        sched = cls(stages[0] if single else stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
    elif a.multi:
        sched = S.PipelineScheduleMulti(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
        sched._load_csv(a.csv, format="compute_only")
    else:
        sched = S._PipelineScheduleRuntime(stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
        sched._load_csv(a.csv, format=a.format)

    kwargs = {}
    if 0 in mine:
        kwargs_args = (x,)
    else:
        kwargs_args = ()
    if num_stages - 1 in mine:
        kwargs["target"] = y
    dist.barrier()  # gloo connects its pairs lazily; the first p2p may otherwise find none
    sched.step(*kwargs_args, **kwargs)

    err = 0.0
    for s in mine:
        for pm, pr in zip(model[s].parameters(), ref[s].parameters()):
            if pm.grad is None:
                err = float("inf")
                continue
            e = (pm.grad - pr.grad).abs().max().item() / max(pr.grad.abs().max().item(), 1e-300)
            err = max(err, e)
    t = torch.tensor([err], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    ok = t.item() <= 1e-6
    if rank == 0:
        print(f"max_rel_err={t.item():.3g} ok={int(ok)}", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
