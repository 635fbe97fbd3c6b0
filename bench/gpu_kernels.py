#!/usr/bin/env python3
"""Kernel microbenchmarks for a GPU's cost-model constants (models/cluster.cc).

Measures, with PyTorch on one GPU, what the cost model's per-device constants stand for:

  * bf16 GEMM throughput over the shapes of transformer layers (tokens x hidden x hidden..4h),
    fitted to the model's form  achieved = e_gemm * mnk / (mnk + mnk_half);
  * causal flash attention (scaled_dot_product_attention, causal) forward and backward,
    as a fraction of peak counting the FLOPs a causal kernel executes ((n+1)/2n of 4bs^2h
    forward, twice that backward, n = s/128 blocks), as models/costs.cc charges them;
  * memory-bound kernels (a copy, an add, LayerNorm) in bytes moved per second, as a fraction
    of the HBM bandwidth.

With --only dropout it measures instead what dropout p = 0.1 costs: causal attention with and
without it on each SDPA backend (cuDNN, FlashAttention-2, memory-efficient, the default), and
Megatron's bias-dropout-add compiled as training runs it against a plain add and a copy.

With --only fp8, FP8 GEMMs (torch._scaled_mm) against bf16 on the same shapes, and one layer
GEMM of each run back to back for 6 s (does the rate sag at the power limit?). With --only
elementwise, LayerNorm, RMSNorm, GeLU, SwiGLU and rotary, forward and backward. With --only
attention, the causal attention alone. With --only head, the last stage's output layer (its
three GEMMs) and Megatron's cross entropy, eager and fused, at the shapes of real layouts.

Prints JSON. Usage (on a machine with a GPU and PyTorch):

  python3 bench/gpu_kernels.py --peak-tflops 989 --hbm-gbs 3350 > h100.json
  python3 bench/gpu_kernels.py --peak-tflops 989 --hbm-gbs 3350 --only dropout > h100-dropout.json
  python3 bench/gpu_kernels.py --peak-tflops 989 --hbm-gbs 3350 --only fp8 > h100-fp8.json
  python3 bench/gpu_kernels.py --peak-tflops 989 --hbm-gbs 3350 --only elementwise > h100-ew.json

It needs no build of pipetwin; the numbers it printed on an H100 are in
results/models/h100-kernels.json (and, --only dropout, h100-dropout.json and h100-dropout-2.json,
the first from an earlier version of the elementwise part at 128 MB a tensor; --only fp8,
h100-fp8.json; --only elementwise, h100-elementwise.json) and
models/README.md says which constants they set. On one H200 (--hbm-gbs 4800):
results/models/h200-kernels.json and h200-kernels-2.json (two runs), h200-fp8.json and
h200-fp8-2.json, and h200-dropout.json (models/README.md, "H200"). On 2026-11-28, with the
backward timed by torch.autograd.grad: H100 h100-kernels-2.json, h100-attention.json and -2,
h100-dropout-3.json, h100-head.json and -2 (their fused cross entropy's backward still timed a
copy of the softmax, since removed: models/README.md, "Known miss"); H200 h200-kernels-3.json,
h200-attention.json and -2, h200-dropout-2.json, h200-head.json.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F


def timed(fn, warmup=5, iters=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    times.sort()
    return times[len(times) // 2]  # median seconds


def grads_of(out, inputs, grad):
    """The backward alone: torch.autograd.grad returns fresh gradients where out.backward()
    would add each into the leaf's .grad from the second call on, an extra memory-bound pass
    (read two tensors, write one, per input) that the timed kernel does not do in training
    (TransformerEngine's attention writes dQ, dK, dV into the QKV GEMM's gradient directly).
    Before 2026-11-27 the timings below used .backward() and carried that pass."""
    return torch.autograd.grad(out, inputs, grad)


def gemms(peak):
    rows = []
    for tokens in (2048, 4096, 8192, 16384):
        for (n, k) in ((4096, 4096), (12288, 4096), (4096, 14336), (14336, 4096),
                       (8192, 8192), (28672, 8192), (8192, 28672), (16384, 16384),
                       (1024, 4096), (4096, 1024), (512, 8192)):
            a = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            s = timed(lambda: a @ b)
            flops = 2.0 * tokens * n * k
            rows.append({"m": tokens, "n": n, "k": k, "seconds": s,
                         "tflops": flops / s / 1e12, "fraction": flops / s / 1e12 / peak})
            del a, b
    # Fit e and mnk_half of  t = 2mnk / (peak e) + 2 mnk_half / (peak e)  (the model's form,
    # which is linear in mnk: t = alpha * mnk + beta) by least squares on the times.
    xs = [r["m"] * r["n"] * r["k"] for r in rows]
    ts = [r["seconds"] for r in rows]
    n = len(xs)
    mx, mt = sum(xs) / n, sum(ts) / n
    alpha = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sum((x - mx) ** 2 for x in xs)
    beta = mt - alpha * mx
    e = 2.0 / (alpha * peak * 1e12)
    fit = {"gemm_efficiency": e, "per_gemm_overhead_us": beta * 1e6,
           "mnk_half": beta / alpha}
    return rows, fit


def fp8_gemms(peak_bf16, peak_fp8):
    """The same transformer shapes in bf16 (a @ b) and in FP8 (torch._scaled_mm, e4m3 inputs
    with per-tensor scales, bf16 output, as TransformerEngine's forward GEMMs), each as a
    fraction of its own peak, and their ratio: what the model's fp8_gemm_factor stands for."""
    rows = []
    one = torch.ones((), device="cuda")
    for tokens in (4096, 8192, 16384):
        for (n, k) in ((4096, 4096), (12288, 4096), (4096, 14336), (14336, 4096),
                       (8192, 8192), (28672, 8192), (8192, 28672), (16384, 16384),
                       (1024, 4096), (4096, 1024)):
            a = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            b = w.t()
            a8 = a.to(torch.float8_e4m3fn)
            b8 = w.to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
            t16 = timed(lambda: a @ b)
            t8 = timed(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                out_dtype=torch.bfloat16))
            flops = 2.0 * tokens * n * k
            f16 = flops / t16 / 1e12 / peak_bf16
            f8 = flops / t8 / 1e12 / peak_fp8
            rows.append({"m": tokens, "n": n, "k": k, "bf16_s": t16, "fp8_s": t8,
                         "bf16_fraction": f16, "fp8_fraction": f8, "ratio": f8 / f16})
            del a, w, b, a8, b8
    return rows


def sustained(peak_bf16, peak_fp8, seconds=6.0):
    """One large layer GEMM (16384 x 28672 x 8192) run back to back for `seconds`, bf16 then
    FP8, timed per window of 50 products: does the rate sag as the power limit bites?"""
    tokens, n, k = 16384, 28672, 8192
    a = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a8, b8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    b = w.t()
    out = {}
    for name, fn, peak in (("bf16", lambda: a @ b, peak_bf16),
                           ("fp8", lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                            out_dtype=torch.bfloat16), peak_fp8)):
        fractions = []
        elapsed = 0.0
        while elapsed < seconds:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(50):
                fn()
            end.record()
            torch.cuda.synchronize()
            sec = start.elapsed_time(end) / 1e3
            elapsed += sec
            fractions.append(50 * 2.0 * tokens * n * k / sec / 1e12 / peak)
        out[name] = {"windows": len(fractions), "first": fractions[0], "last": fractions[-1],
                     "min": min(fractions), "max": max(fractions)}
        time.sleep(2)  # let the clocks recover between the two
    return out


def elementwise(hbm):
    """A layer's memory-bound kernels as the training stacks run them (the norm through PyTorch's
    fused kernel, the others compiled, as Megatron-Core's jit_fuser), forward and forward +
    backward, as fractions of the HBM bandwidth by the bytes the cost model charges: a norm and
    an activation read their input and write their output (2e per element forward), SwiGLU reads
    2f and writes f, rotary reads and writes q; backward moves twice the forward bytes."""
    e, tokens, h = 2, 32768, 8192
    x = torch.randn(tokens, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    bvec = torch.zeros(h, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w

    def swiglu(y):
        a, b = y.chunk(2, dim=-1)
        return F.silu(a) * b

    def gelu(y):
        return F.gelu(y, approximate="tanh")
    heads, d = 64, 128
    q = torch.randn(tokens, heads, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(tokens, device="cuda", dtype=torch.float32)[:, None]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    ang = pos * inv
    cos, sin = ang.cos()[:, None, :].to(torch.bfloat16), ang.sin()[:, None, :].to(torch.bfloat16)

    def rope(q):
        q1, q2 = q[..., ::2], q[..., 1::2]
        return torch.cat((q1 * cos - q2 * sin, q1 * sin + q2 * cos), dim=-1)
    y2 = torch.randn(tokens, 2 * h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    crms, cswiglu, cgelu, crope = (torch.compile(f) for f in (rms, swiglu, gelu, rope))
    n = tokens * h
    cases = {"layernorm": (lambda: F.layer_norm(x, (h,), w, bvec), (x, w, bvec), 2 * e * n),
             "rmsnorm_compiled": (lambda: crms(x, w), (x, w), 2 * e * n),
             "gelu_compiled": (lambda: cgelu(x), (x,), 2 * e * n),
             "swiglu_compiled": (lambda: cswiglu(y2), (y2,), 3 * e * n),
             "rope_compiled": (lambda: crope(q), (q,), 2 * e * tokens * heads * d)}
    rows = []
    for name, (fn, inputs, nbytes) in cases.items():
        out = fn()
        g = torch.randn_like(out)
        tf = timed(fn)

        def fb():
            grads_of(fn(), inputs, g)
        tfb = timed(fb)
        rows.append({"kernel": name, "forward_bytes": nbytes, "forward_s": tf,
                     "forward_fraction": nbytes / tf / 1e9 / hbm,
                     "backward_s": tfb - tf,
                     "backward_fraction": 2 * nbytes / max(tfb - tf, 1e-9) / 1e9 / hbm})
    return rows


def head(peak, hbm, eff=0.85):
    """The last stage's extra work at the shapes of real layouts: the output layer's three GEMMs
    (forward x W^T, dX = dY W, dW = dY^T x; bf16, as TransformerEngine's recipes keep it under
    FP8) and the loss over the logits, Megatron's vocabulary-parallel cross entropy without its
    TP all-reduces, as the eager version runs it (megatron/core/tensor_parallel/cross_entropy.py)
    and as the fused one (megatron/core/fusions/fused_cross_entropy.py: its four jit-fused
    functions, each torch.compile'd here). The loss is reported as the bytes per logit that
    models/costs.cc would have to charge at hbm_efficiency to take the measured time (it
    charges 38 forward / 14 backward unfused, 22 / 6 fused, for bf16 logits)."""
    shapes = (("llama3-70b_tp4", 8192, 8192, 128256 // 4),
              ("llama3.1-405b_tp8", 8192, 16384, 128256 // 8),
              ("llama3-8b_tp1", 8192, 4096, 128256),
              ("gpt3-175b_tp8_v51200", 2048, 12288, 51200 // 8))

    def fused_max(logits):
        lf = logits.float()
        return lf, lf.max(dim=-1)[0]

    def fused_exp_sum(lf, m, target):
        lf = lf - m.unsqueeze(-1)
        pred = lf.gather(1, target.unsqueeze(-1)).squeeze(-1)
        ex = lf.exp()
        return ex, ex.sum(dim=-1), pred

    def fused_loss(ex, s, pred):
        return ex.div(s.unsqueeze(-1)), torch.log(s) - pred

    def fused_grad(softmax, target, g):
        # In place on the saved softmax, as Megatron's calculate_gradients (the timing below
        # restores its input first and subtracts the restore).
        rows = torch.arange(softmax.shape[0], device=softmax.device)
        softmax[rows, target] -= 1.0
        softmax.mul_(g.unsqueeze(-1))
        return softmax.to(torch.bfloat16)
    c_max, c_exp, c_loss, c_grad = (torch.compile(f, dynamic=False) for f in
                                    (fused_max, fused_exp_sum, fused_loss, fused_grad))

    def eager_forward(logits, target):
        lf = logits.float()
        m = lf.max(dim=-1)[0]
        lf.sub_(m.unsqueeze(-1))
        pred = lf.gather(1, target.unsqueeze(-1)).squeeze(-1)
        lf.exp_()
        s = lf.sum(dim=-1)
        lf.div_(s.unsqueeze(-1))
        return lf, torch.log(s) - pred

    def eager_backward(softmax, target, g):
        rows = torch.arange(softmax.shape[0], device=softmax.device)
        softmax[rows, target] -= 1.0
        softmax.mul_(g.unsqueeze(-1))
        return softmax.to(torch.bfloat16)

    rows = []
    for name, t, h, v in shapes:
        x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(v, h, device="cuda", dtype=torch.bfloat16) * 0.02
        dy = torch.randn(t, v, device="cuda", dtype=torch.bfloat16)
        wt = w.t()
        gemm_s = {"forward": timed(lambda: x @ wt), "dgrad": timed(lambda: dy @ w),
                  "wgrad": timed(lambda: dy.t() @ x)}
        fl = 2.0 * t * h * v
        logits = (x @ wt).contiguous()
        target = torch.randint(0, v, (t,), device="cuda")
        g = torch.rand(t, device="cuda", dtype=torch.float32)
        del dy
        torch.cuda.empty_cache()
        ef = timed(lambda: eager_forward(logits, target), warmup=2, iters=7)
        sm, _ = eager_forward(logits, target)
        sm_copy = sm.clone()

        def eb():
            sm.copy_(sm_copy)  # the backward works in place: restore its input (timed apart)
            return eager_backward(sm, target, g)
        restore = timed(lambda: sm.copy_(sm_copy), warmup=2, iters=7)
        eb_s = timed(eb, warmup=2, iters=7) - restore
        del sm, sm_copy
        torch.cuda.empty_cache()

        def ff():
            lf, m = c_max(logits)
            ex, s, pred = c_exp(lf, m, target)
            return c_loss(ex, s, pred)
        ff_s = timed(ff, warmup=3, iters=7)
        softmax, _ = ff()
        saved = softmax.clone()

        def fb():
            softmax.copy_(saved)
            return c_grad(softmax, target, g)
        fb_s = timed(fb, warmup=3, iters=7) - timed(lambda: softmax.copy_(saved), warmup=2,
                                                     iters=7)
        del softmax, saved
        n = float(t) * v
        per_logit = lambda sec: sec * hbm * 1e9 * eff / n
        rows.append({"case": name, "tokens": t, "hidden": h, "vocab_per_rank": v,
                     "gemm_s": gemm_s,
                     "gemm_fraction": {k: fl / s / 1e12 / peak for k, s in gemm_s.items()},
                     "ce_unfused_s": {"forward": ef, "backward": eb_s},
                     "ce_fused_s": {"forward": ff_s, "backward": fb_s},
                     "ce_unfused_bytes_per_logit": {"forward": per_logit(ef),
                                                    "backward": per_logit(eb_s)},
                     "ce_fused_bytes_per_logit": {"forward": per_logit(ff_s),
                                                  "backward": per_logit(fb_s)}})
        del x, w, logits
        torch.cuda.empty_cache()
    return rows


def attention(peak):
    rows = []
    heads, d = 32, 128
    for s in (2048, 4096, 8192):
        b = max(1, 16384 // s)
        q, k, v = (torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        blocks = math.ceil(s / 128)
        causal_share = (blocks + 1) / (2 * blocks)
        fwd_flops = 4.0 * b * s * s * heads * d * causal_share
        tf = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        grad = torch.randn_like(out)

        def fb():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            grads_of(o, (q, k, v), grad)
        tfb = timed(fb)
        tb = max(tfb - tf, 1e-9)
        rows.append({"seq": s, "batch": b, "heads": heads, "head_dim": d,
                     "forward_s": tf, "backward_s": tb,
                     "forward_fraction": fwd_flops / tf / 1e12 / peak,
                     "backward_fraction": 2 * fwd_flops / tb / 1e12 / peak})
        del q, k, v, out, grad
    return rows


def attention_dropout(peak, p=0.1):
    """Causal attention with and without dropout (Megatron's GPT default p = 0.1), per SDPA
    backend that runs it: forward, and forward + backward, and their ratios."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    heads, d = 32, 128
    backends = {"default": None, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION}
    for s in (2048, 4096):
        b = max(1, 16384 // s)
        q, k, v = (torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        grad = torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16)
        for name, be in backends.items():
            row = {"seq": s, "batch": b, "heads": heads, "head_dim": d, "backend": name}
            for dp in (0.0, p):
                def f():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dp)

                def fb():
                    grads_of(f(), (q, k, v), grad)
                try:
                    if be is None:
                        tf, tfb = timed(f), timed(fb)
                    else:
                        with sdpa_kernel([be]):
                            tf, tfb = timed(f), timed(fb)
                except RuntimeError as e:  # backend cannot run this case
                    row["error_p%g" % dp] = str(e).splitlines()[0][:120]
                    continue
                row["forward_s_p%g" % dp] = tf
                row["backward_s_p%g" % dp] = tfb - tf
            if "forward_s_p0" in row and ("forward_s_p%g" % p) in row:
                row["forward_ratio"] = row["forward_s_p%g" % p] / row["forward_s_p0"]
                row["backward_ratio"] = row["backward_s_p%g" % p] / row["backward_s_p0"]
            rows.append(row)
        del q, k, v, grad
    return rows


def dropout_add(hbm, p=0.1):
    """Megatron's bias-dropout-add (x + bias, dropout, + residual) compiled into one kernel, as
    training runs it (x needs its gradient, so the 1-byte mask is kept), against plain copy and
    add at the same size (512 MB of bf16 a tensor), in bytes moved per second against HBM
    bandwidth: does dropout's random number generation keep it memory-bound?"""
    n, h = 256 * 1024 * 1024, 8192
    x = torch.randn(n // h, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn(n // h, h, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    g = torch.randn_like(r)

    def bda(x, bias, r):
        return r + F.dropout(x + bias, p=p, training=True)

    def add(x, bias, r):
        return r + (x + bias)
    cbda, cadd = torch.compile(bda), torch.compile(add)
    xd = x.detach()

    def bda_fb():
        grads_of(cbda(x, bias, r), (x,), g)
    e = 2  # bytes of a bf16 element
    cases = {"copy_eager": (lambda: xd.clone(), 2 * e * n),
             "add_eager": (lambda: xd + r, 3 * e * n),
             "add_compiled": (lambda: cadd(xd, bias, r), 3 * e * n),
             "dropout_eager": (lambda: F.dropout(xd, p=p, training=True), 2 * e * n + n),
             # read x and r, write the sum and the mask
             "bias_dropout_add_compiled": (lambda: cbda(x, bias, r), 3 * e * n + n)}
    rows = []
    for name, (fn, nbytes) in cases.items():
        sec = timed(fn)
        rows.append({"kernel": name, "bytes": nbytes, "seconds": sec,
                     "gb_per_s": nbytes / sec / 1e9, "fraction": nbytes / sec / 1e9 / hbm})
    # Forward and backward together: the backward reads the gradient and the mask and writes
    # x's gradient (2e + 1), and sums the bias gradient (read the gradient once more).
    sec = timed(bda_fb)
    nbytes = (3 * e * n + n) + (2 * e * n + n)
    rows.append({"kernel": "bias_dropout_add_compiled_fwd_bwd", "bytes": nbytes, "seconds": sec,
                 "gb_per_s": nbytes / sec / 1e9, "fraction": nbytes / sec / 1e9 / hbm})
    return rows


def memory(hbm):
    rows = []
    n = 256 * 1024 * 1024  # 512 MB of bf16
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    cases = {
        "copy": (lambda: x.clone(), 2 * 2 * n),
        "add": (lambda: x + y, 3 * 2 * n),
        "gelu": (lambda: F.gelu(x, approximate="tanh"), 2 * 2 * n),
    }
    h = 8192
    xr = x.view(-1, h)
    ln = torch.nn.LayerNorm(h, device="cuda", dtype=torch.bfloat16)
    cases["layernorm"] = (lambda: ln(xr), 2 * 2 * n)
    for name, (fn, nbytes) in cases.items():
        s = timed(fn)
        rows.append({"kernel": name, "bytes": nbytes, "seconds": s,
                     "gb_per_s": nbytes / s / 1e9, "fraction": nbytes / s / 1e9 / hbm})
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peak-tflops", type=float, required=True)
    p.add_argument("--hbm-gbs", type=float, required=True)
    p.add_argument("--only", choices=["dropout", "fp8", "elementwise", "head", "attention"],
                   help="dropout: only attention and elementwise dropout against no dropout; "
                   "fp8: only FP8 GEMMs against bf16 (needs --peak-fp8-tflops); "
                   "elementwise: only norms, activations and rotary, forward and backward; "
                   "head: only the output layer's GEMMs and the cross entropy; "
                   "attention: only causal attention")
    p.add_argument("--peak-fp8-tflops", type=float, default=1979)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    if a.only in ("head", "attention"):
        part = head(a.peak_tflops, a.hbm_gbs) if a.only == "head" else attention(a.peak_tflops)
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "peak_tflops": a.peak_tflops, "hbm_gbs": a.hbm_gbs, a.only: part},
                  sys.stdout, indent=1)
        print()
        return
    if a.only == "elementwise":
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "hbm_gbs": a.hbm_gbs, "elementwise": elementwise(a.hbm_gbs)}, sys.stdout,
                  indent=1)
        print()
        return
    if a.only == "fp8":
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "peak_tflops": a.peak_tflops, "peak_fp8_tflops": a.peak_fp8_tflops,
                   "fp8_gemm": fp8_gemms(a.peak_tflops, a.peak_fp8_tflops),
                   "sustained": sustained(a.peak_tflops, a.peak_fp8_tflops)}, sys.stdout, indent=1)
        print()
        return
    if a.only == "dropout":
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "attention_dropout": attention_dropout(a.peak_tflops),
                   "dropout_add": dropout_add(a.hbm_gbs)}, sys.stdout, indent=1)
        print()
        return
    g, fit = gemms(a.peak_tflops)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "peak_tflops": a.peak_tflops, "hbm_gbs": a.hbm_gbs,
           "gemm_fit": fit, "gemm": g, "attention": attention(a.peak_tflops),
           "memory": memory(a.hbm_gbs)}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
