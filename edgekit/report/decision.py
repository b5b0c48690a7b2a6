"""The decision, as the report's first screen shows it: the recommended pool's speed groups as
one chart (each artifact's latency over the fastest one's, with its 95 % interval, on a log
axis, a band per group) and a short ranked table."""

from __future__ import annotations

from pathlib import Path

from edgekit.report.recommend import Recommendation, latency_ratio
from edgekit.report.style import plain_log_ticks, save_figure

RANKED_COLUMNS = ("group", "artifact", "p50 ms", "latency / fastest", "speed-up", "drop (points)")
GROUP_SHADES = ("#e7f5ff", "#fff4e6")


def ranked_table(advice: Recommendation) -> list[list[str]]:
    """One line per artifact of the recommended pool, fastest group first."""
    if not advice.ranked:
        return []
    fastest = advice.ranked[0][0]
    lines = []
    for number, group in enumerate(advice.ranked, start=1):
        for row in group:
            ratio = latency_ratio(row, fastest) if row is not fastest else None
            relative = "1 (fastest)" if row is fastest else "-"
            if ratio is not None:
                value, (low, high) = ratio
                relative = f"{value:.2f}x [{low:.2f}, {high:.2f}]"
            speed = ""
            if row.speedup is not None and row.speedup_ci:
                speed = f"{row.speedup:.2f}x [{row.speedup_ci[0]:.2f}, {row.speedup_ci[1]:.2f}]"
            drop = "" if row.drop is None else f"{row.drop:+.2f} (<= {row.drop_high:+.2f})"
            mark = " (recommended)" if row is advice.best else ""
            lines.append(
                [str(number), f"{row.label}{mark}", f"{row.p50:.3f}", relative, speed, drop]
            )
    return lines


def groups_chart(advice: Recommendation, path: Path) -> Path | None:
    """The recommended pool's artifacts, fastest at the top: latency over the fastest one's
    with its 95 % interval (log axis), the groups as alternating bands."""
    rows = [row for group in advice.ranked for row in group]
    if len(rows) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fastest = rows[0]
    fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(rows) + 1.1))
    position = 0
    for number, group in enumerate(advice.ranked):
        top = position
        for row in group:
            ratio = latency_ratio(row, fastest) if row is not fastest else (1.0, (1.0, 1.0))
            value, (low, high) = ratio or (1.0, (1.0, 1.0))
            colour = "#3b5bdb" if row is advice.best else "#333333"
            size = 6 if row is advice.best else 4
            ax.errorbar(
                value,
                position,
                xerr=[[value - low], [high - value]],
                fmt="o",
                color=colour,
                capsize=3,
                markersize=size,
            )
            position += 1
        ax.axhspan(top - 0.5, position - 0.5, color=GROUP_SHADES[number % 2], zorder=0)
        ax.text(1.0, top - 0.35, f" group {number + 1}", fontsize=7, color="#555", va="top")
    labels = [f"{row.label}{' *' if row is advice.best else ''}" for row in rows]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.axvline(1.0, color="#999", linewidth=0.8)
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel("latency over the fastest artifact's (log scale; bars: 95% interval)")
    ax.set_title("speed groups (* recommended)", fontsize=10)
    return save_figure(fig, path)
