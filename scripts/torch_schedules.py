#!/usr/bin/env python3
"""torch_schedules.py — dump torch.distributed.pipelining's own schedule orders as CSV.

Builds torch's schedule classes on mock stages (no process group, no model: only the
attributes the schedule constructors read) and writes, per schedule, pp and m:
  OUT/<name>-p<pp>-m<m>.compute_only.csv   torch's compute-only order (idle cells kept)
  OUT/<name>-p<pp>-m<m>.compute_comms.csv  torch's own lowering (_PipelineScheduleRuntime)
<name> is pipetwin's generator name. Single-stage schedules (gpipe, 1f1b) have their
compute-only order from _get_pipeline_order(); their compute_comms is that order lowered by
_PipelineScheduleRuntime._prepare_schedule_with_comms, as torch lowers any loaded CSV.

  python3 scripts/torch_schedules.py OUT_DIR [--pp 2 4] [--m 4 8]
"""
import argparse
import csv
import os
import sys

import torch
from torch.distributed.pipelining import schedules as S


class MockStage:
    """The attributes torch's schedule constructors read from a stage."""

    def __init__(self, stage_index, num_stages, group_rank, group_size):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_rank = group_rank
        self.group_size = group_size
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self.submod = torch.nn.Identity()
        self.stage_index_to_group_rank = {}


def loop_stages(pp, chunks):
    return [MockStage(c * pp, pp * chunks, 0, pp) for c in range(chunks)]


def v_stages(pp):
    return [MockStage(0, 2 * pp, 0, pp), MockStage(2 * pp - 1, 2 * pp, 0, pp)]


def write_rows(path, order):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for rank in sorted(order):
            w.writerow(["" if a is None else str(a) for a in order[rank]])


def lowered(stages, m, order):
    rt = S._PipelineScheduleRuntime(stages=stages, n_microbatches=m, loss_fn=lambda x, y: x)
    rt._prepare_schedule_with_comms(order)
    return rt.pipeline_order_with_comms


def build(name, pp, m):
    """(compute_only order, compute_comms order) as torch builds them, or None if refused."""
    loss = lambda x, y: x  # noqa: E731 — any loss makes the schedules include backward
    if name in ("gpipe", "1f1b"):
        cls = S.ScheduleGPipe if name == "gpipe" else S.Schedule1F1B
        sched = cls(MockStage(0, pp, 0, pp), n_microbatches=m, loss_fn=loss)
        order = sched._get_pipeline_order()
        # torch 2.15's single-stage orders carry REDUCE_GRAD cells; its lowering wants compute only.
        compute = {r: [x for x in acts if x is None or x.is_compute_op] for r, acts in order.items()}
        try:
            return order, lowered([MockStage(0, pp, 0, pp)], m, compute)
        except Exception as e:  # torch's own printed order does not lower (Schedule1F1B)
            print(f"{name} pp {pp} m {m}: torch cannot lower its own order: {e}", file=sys.stderr)
            return order, None
    if name == "interleaved-1f1b":
        sched = S.ScheduleInterleaved1F1B(loop_stages(pp, 2), n_microbatches=m, loss_fn=loss)
    elif name == "zb-h1":
        sched = S.ScheduleInterleavedZeroBubble(loop_stages(pp, 1), n_microbatches=m, loss_fn=loss)
    elif name == "zbv":
        sched = S.ScheduleZBVZeroBubble(v_stages(pp), n_microbatches=m, loss_fn=loss)
    elif name == "dualpipev":
        sched = S.ScheduleDualPipeV(v_stages(pp), n_microbatches=m, loss_fn=loss)
    else:
        raise ValueError(name)
    return sched.pipeline_order, sched.pipeline_order_with_comms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--pp", type=int, nargs="+", default=[2, 4])
    p.add_argument("--m", type=int, nargs="+", default=[4, 8])
    p.add_argument(
        "--schedules",
        nargs="+",
        default=["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipev"],
    )
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.schedules:
        for pp in a.pp:
            for m in a.m:
                try:
                    only, comms = build(name, pp, m)
                except Exception as e:  # torch refuses the shape (e.g. DualPipeV m < 2pp)
                    print(f"{name} pp {pp} m {m}: torch refuses: {e}", file=sys.stderr)
                    continue
                base = os.path.join(a.out, f"{name}-p{pp}-m{m}")
                write_rows(base + ".compute_only.csv", only)
                if comms is not None:
                    write_rows(base + ".compute_comms.csv", comms)
                print(f"{base}.{{compute_only,compute_comms}}.csv")


if __name__ == "__main__":
    main()
