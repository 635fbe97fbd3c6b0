#!/usr/bin/env python3
"""Plot of a `pipetwin plan` search: tokens/s against peak memory per GPU.

usage: plot_plan.py ALL.csv OUT.png [--memory-limit BYTES]

ALL.csv is `pipetwin plan --csv` output (one row per evaluated layout). Simulated layouts are
drawn filled, coloured by schedule; layouts that fit but were skipped because their compute
bound could not reach the top K are drawn at that bound (hollow, an upper limit); layouts
refused by memory at their bound too (grey crosses, right of the memory limit). The memory
limit is a vertical line; the Pareto front (most tokens/s for at most that much memory) of
the simulated layouts is a step line. Needs python3-matplotlib; Agg backend.
"""
import csv
import sys

try:
    import matplotlib
except ImportError:  # exit 3: pipetwin says what to install
    print("%s: needs python3-matplotlib (scripts/deps.sh installs it)" % sys.argv[0],
          file=sys.stderr)
    sys.exit(3)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = 1024.0**3


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, out = argv[1], argv[2]
    limit = None
    if "--memory-limit" in argv:
        limit = float(argv[argv.index("--memory-limit") + 1]) / GIB
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    sims = [r for r in rows if r["status"] == "simulated"]
    skipped = [r for r in rows if r["status"] == "skipped_by_bound"]
    nofit = [r for r in rows if r["status"] == "no_fit"]
    schedules = sorted({r["schedule"] for r in sims + skipped})
    cmap = plt.get_cmap("tab10")
    colour = {s: cmap(i % 10) for i, s in enumerate(schedules)}

    fig, ax = plt.subplots(figsize=(9, 6))
    if nofit:
        ax.scatter([float(r["peak_memory_bytes"]) / GIB for r in nofit],
                   [float(r["tokens_per_s_bound"]) for r in nofit], marker="x", s=10,
                   color="0.75", label=f"refused by memory ({len(nofit)}), at its bound")
    for s in schedules:
        sk = [r for r in skipped if r["schedule"] == s]
        if sk:
            ax.scatter([float(r["peak_memory_bytes"]) / GIB for r in sk],
                       [float(r["tokens_per_s_bound"]) for r in sk], s=12, facecolors="none",
                       edgecolors=[colour[s]], alpha=0.5, linewidths=0.6)
        sm = [r for r in sims if r["schedule"] == s]
        if sm:
            ax.scatter([float(r["peak_memory_bytes"]) / GIB for r in sm],
                       [float(r["tokens_per_s"]) for r in sm], s=22, color=colour[s],
                       label=f"{s} ({len(sm)} simulated)")
    if skipped:
        ax.scatter([], [], s=12, facecolors="none", edgecolors="0.3",
                   label=f"skipped by the bound ({len(skipped)}), at its bound")
    # Pareto front of the simulated layouts: sorted by memory, keep each new best tokens/s.
    pts = sorted((float(r["peak_memory_bytes"]) / GIB, float(r["tokens_per_s"])) for r in sims)
    front, best = [], -1.0
    for m, t in pts:
        if t > best:
            front.append((m, t))
            best = t
    if front:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="black",
                linewidth=1.2, label="Pareto front (simulated)")
    if limit is not None:
        ax.axvline(limit, color="red", linestyle="--", linewidth=1,
                   label=f"memory per GPU ({limit:.0f} GiB)")
    if limit is not None:
        # The feasible side in view: refused layouts beyond twice the limit are off the plot.
        beyond = sum(float(r["peak_memory_bytes"]) / GIB > 2 * limit for r in nofit)
        ax.set_xlim(0, 2 * limit)
        if beyond:
            ax.text(0.99, 0.01, f"{beyond} refused layouts beyond {2 * limit:.0f} GiB not shown",
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="0.4")
    ax.set_xlabel("peak memory of the fullest GPU (GiB)")
    ax.set_ylabel("tokens per second")
    ax.set_title(f"pipetwin plan: {len(rows)} layouts evaluated, {len(sims)} simulated")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
