#!/usr/bin/env python3
"""torch_gpt_pipeline.py — the CPU backend's GPT on torch's own pipeline runtime, timed.

Started once per pipeline rank (torchrun, gloo, CPU, one thread per rank). The model is the
one pipetwin's CPU backend runs (exec/model/params.cc): token and position embeddings, pre-LN
blocks (LayerNorm, QKV, causal attention, projection, LayerNorm, fc1, tanh GeLU, fc2, with
residuals), a final LayerNorm and an output layer without bias, cross-entropy over the
vocabulary; float32, Adam. Blocks are split evenly over the pipeline ranks, the embeddings on
the first stage and the head on the last. Attention is what a PyTorch user writes:
`scaled_dot_product_attention(is_causal=True)`.

Runs --warmup steps, then --steps timed steps (each: zero_grad, schedule.step, optimizer.step,
a barrier), and rank 0 prints one line: `median_step_ms=<x> steps=<a,b,...>`.

  torchrun --nproc-per-node 2 scripts/torch_gpt_pipeline.py --schedule 1f1b --layers 8 \\
      --hidden 512 --ffn 2048 --heads 8 --vocab 256 --seq 256 --micro-batch 2 --microbatches 8
"""
import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S


class Block(nn.Module):
    def __init__(self, h, f, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, f)
        self.fc2 = nn.Linear(f, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Stage(nn.Module):
    def __init__(self, a, blocks, first, last):
        super().__init__()
        self.first, self.last = first, last
        if first:
            self.tok = nn.Embedding(a.vocab, a.hidden)
            self.pos = nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden, a.ffn, a.heads) for _ in range(blocks))
        if last:
            self.ln = nn.LayerNorm(a.hidden)
            self.out = nn.Linear(a.hidden, a.vocab, bias=False)

    def forward(self, x):
        if self.first:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for b in self.blocks:
            x = b(x)
        if self.last:
            x = self.out(self.ln(x))
        return x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
    for k in ("layers", "hidden", "ffn", "heads", "vocab", "seq", "micro-batch", "microbatches"):
        p.add_argument("--" + k, type=int, required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, pp = dist.get_rank(), dist.get_world_size()
    if a.layers % pp:
        sys.exit("layers must divide evenly over the pipeline ranks")
    torch.manual_seed(1234 + rank)
    stage_mod = Stage(a, a.layers // pp, rank == 0, rank == pp - 1)
    stage = PipelineStage(stage_mod, rank, pp, torch.device("cpu"))

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    cls = S.Schedule1F1B if a.schedule == "1f1b" else S.ScheduleGPipe
    sched = cls(stage, n_microbatches=a.microbatches, loss_fn=loss_fn)
    opt = torch.optim.Adam(stage_mod.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(7)
    batch = a.micro_batch * a.microbatches
    tokens = torch.randint(0, a.vocab, (batch, a.seq), generator=g)
    target = torch.randint(0, a.vocab, (batch, a.seq), generator=g)
    dist.barrier()  # gloo connects lazily; keep that out of the first step
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        if rank == 0:
            sched.step(tokens)
        elif rank == pp - 1:
            sched.step(target=target)
        else:
            sched.step()
        opt.step()
        dist.barrier()
        if step >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    if rank == 0:
        print(f"median_step_ms={statistics.median(times):.1f} "
              f"steps={','.join(f'{t:.1f}' for t in times)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
