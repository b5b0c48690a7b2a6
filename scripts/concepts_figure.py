"""The figure of docs/concepts.md, "Two levels": one simulated pool of four artifacts (two of
them equally fast) whose sessions land 3 % apart and whose blocks scatter 1 %, through edgekit's
own interleaver, fit and speed groups (``edgekit.measure.simulated``). Left: each artifact's
latency over the fastest one's with intervals from the rounds alone (the session level dropped);
right: the two-level intervals, a band per speed group. Seeded: the same picture every time.

    python scripts/concepts_figure.py   # -> docs/assets/two-levels.png
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from edgekit.common.ranking import speed_groups
from edgekit.common.stats import paired_ratio
from edgekit.measure.interleave import interleave
from edgekit.measure.simulated import simulated_pool
from edgekit.report.style import plain_log_ticks, save_figure
from edgekit.worker.latency import LatencyProtocol, NoiseGuard

TRUE_MS = [1.0, 1.0, 1.12, 1.3]
LABELS = ["a (1.00)", "b (1.00)", "c (1.12)", "d (1.30)"]
PLAN = LatencyProtocol(warmup=0, min_runs=1, min_seconds=0.0, rounds=12, block_seconds=0.001,
                sessions=4, precision=None)  # fmt: skip
OUT = Path(__file__).resolve().parent.parent / "docs" / "assets" / "two-levels.png"


def main() -> None:
    sides, machine = simulated_pool(3, TRUE_MS, session_sd=0.03, round_sd=0.01)
    result = interleave(sides, PLAN, NoiseGuard(enabled=False), clock=machine.clock)
    fastest = min(range(len(TRUE_MS)), key=lambda side: result.level(side).log_level)
    groups = speed_groups([result.level(side) for side in range(len(TRUE_MS))])
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.0), sharey=True)
    for ax, title, interval_of in (
        (axes[0], "rounds only: the session level dropped",
         lambda side: paired_ratio(result.rounds_ms(side), result.rounds_ms(fastest))),
        (axes[1], "two levels, and the speed groups", lambda side: result.ratio(side, fastest)),
    ):  # fmt: skip
        for side, true in enumerate(TRUE_MS):
            # the fastest is the reference: a point at 1, no interval
            ratio, (low, high) = interval_of(side) if side != fastest else (1.0, (1.0, 1.0))
            ax.errorbar(ratio, side, xerr=[[ratio - low], [high - ratio]], fmt="o",
                        color="#333", capsize=3)  # fmt: skip
            ax.plot(true / TRUE_MS[fastest], side, marker="|", color="#c92a2a", markersize=14)
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("latency over the fastest (log; red: the true ratio)", fontsize=8)
    for number, group in enumerate(groups):
        for side in group:
            axes[1].axhspan(side - 0.5, side + 0.5, color=("#e7f5ff", "#fff4e6")[number % 2],
                            zorder=0)  # fmt: skip
    axes[0].set_yticks(range(len(TRUE_MS)), LABELS, fontsize=8)
    axes[0].set_ylim(len(TRUE_MS) - 0.5, -0.5)
    save_figure(fig, OUT)
    print(f"wrote {OUT}: groups {[[LABELS[side] for side in group] for group in groups]}")


if __name__ == "__main__":
    main()
