#!/usr/bin/env python3
"""gemm_waves.py [KERNELS.json] > results/models/h100-gemm-waves.md (or h200-kernels.json > h200-gemm-waves.md)

Does explicit wave quantisation over the SMs explain the measured GEMMs better than the
smooth shape factors the cost model uses (models/README.md, "Compute-efficiency model")?

The measurements: results/models/h100-kernels.json (44 bf16 GEMMs of transformer shapes on one
H100 SXM, bench/gpu_kernels.py). Two models of the achieved fraction of peak, each fitted by
a grid search (least squares on the log of model / measured):
  smooth: level * narrow * mnk/(mnk + narrow * mnk_half), narrow = k/(k + k_half) * n/(n + n_half)
          (models/cluster.cc: t = 2 mnk / (level peak narrow) + 5 us)
  waves:  smooth * the best wave efficiency over the output tiles cuBLAS may pick
          (128x256, 256x128, 128x128: tiles / (waves x 132 SMs)), its level and halves refitted
mnk_half keeps the model's 5 us per-GEMM overhead. Prints a Markdown report.
"""
import json
import math
import sys

SMS = 132  # H100 and H200 SXM
PEAK = 989e12
T0 = 5e-6
TILES = [(128, 256), (256, 128), (128, 128)]


def smooth(m, n, k, level, k_half, n_half):
    # t = 2 mnk / (level peak narrow) + T0: the narrow factors slow the work, not the overhead.
    narrow = k / (k + k_half) * n / (n + n_half)
    mnk = m * n * k
    mnk_half = level * PEAK * T0 / 2
    return level * narrow * mnk / (mnk + narrow * mnk_half)


def waves(m, n):
    best = 0.0
    for tm, tn in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        best = max(best, tiles / (math.ceil(tiles / SMS) * SMS))
    return best


def log_rms(gemms, f):
    errs = [math.log(f(g["m"], g["n"], g["k"]) / g["fraction"]) for g in gemms]
    return math.sqrt(sum(e * e for e in errs) / len(errs)), errs


def fit(gemms, with_waves):
    best = None
    for level in [0.70 + 0.01 * i for i in range(16)]:
        for k_half in range(0, 1001, 50):
            for n_half in range(0, 501, 25):
                def f(m, n, k):
                    e = smooth(m, n, k, level, k_half, n_half)
                    return e * waves(m, n) if with_waves else e
                r, errs = log_rms(gemms, f)
                if best is None or r < best[0]:
                    best = (r, level, k_half, n_half, errs)
    return best


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "results/models/h100-kernels.json"
    data = json.load(open(path))
    gemms, device = data["gemm"], data.get("device", "one GPU")
    model_r, _ = log_rms(gemms, lambda m, n, k: smooth(m, n, k, 0.77, 550, 275))
    s = fit(gemms, False)
    w = fit(gemms, True)
    print("# Wave quantisation against the measured GEMMs of one %s\n" % device)
    print("Made by `scripts/gemm_waves.py %s` (%d bf16 GEMMs on one %s)." % (path, len(gemms), device))
    print("Log-RMS error of model / measured, each model's constants fitted by grid search.\n")
    print("| model | level | k_half | n_half | log-RMS error |")
    print("|---|--:|--:|--:|--:|")
    print("| smooth, H100's factors in models/cluster.cc | 0.77 | 550 | 275 | %.3f |" % model_r)
    print("| smooth, refitted | %.2f | %d | %d | %.3f |" % (s[1], s[2], s[3], s[0]))
    print("| smooth x waves (tiles %s), refitted | %.2f | %d | %d | %.3f |"
          % (", ".join("%dx%d" % t for t in TILES), w[1], w[2], w[3], w[0]))
    print("\n| m | n | k | measured | smooth | smooth x waves | wave efficiency |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    for g, es, ew in zip(gemms, s[4], w[4]):
        print("| %d | %d | %d | %.3f | %.3f | %.3f | %.2f |" % (
            g["m"], g["n"], g["k"], g["fraction"], g["fraction"] * math.exp(es),
            g["fraction"] * math.exp(ew), waves(g["m"], g["n"])))


if __name__ == "__main__":
    main()
