"""The report's plots of what quantization changed: each class's drop with its 95 % interval,
per artifact, and the flip rate by the source model's top-2 margin."""

from __future__ import annotations

from pathlib import Path

from edgekit.report.style import save_figure, series_colours
from edgekit.results import Results, Row


def _changed(results: Results) -> list[Row]:
    """One artifact row per artifact and device with per-class figures (thread counts share one
    evaluation)."""
    rows, seen = [], set()
    for row in results.rows:
        where = row.label.rsplit(" x", 1)[0]
        if row.kind == "artifact" and row.accuracy and row.accuracy.per_class and where not in seen:
            seen.add(where)
            rows.append(row)
    return rows


def class_drop_plot(results: Results, path: Path) -> Path | None:
    """Drop per class, one marker per artifact that flipped any image (the others are at zero),
    bars for the 95 % interval."""
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [row for row in _changed(results) if row.accuracy.flips["changed"]]
    if not rows:
        return None
    names = [change["name"] for change in rows[0].accuracy.per_class]
    colours = series_colours([row.label for row in rows])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(names) + 3), 4.5))
    width = 0.8 / len(rows)
    for index, row in enumerate(rows):
        changes = {change["name"]: change for change in row.accuracy.per_class}
        present = [name for name in names if name in changes]
        x = np.array([names.index(name) for name in present]) - 0.4 + (index + 0.5) * width
        drops = np.array([changes[name]["drop_points"] for name in present])
        lows = np.array([changes[name]["drop_ci"][0] for name in present])
        highs = np.array([changes[name]["drop_ci"][1] for name in present])
        ax.errorbar(
            x,
            drops,
            yerr=[drops - lows, highs - drops],
            fmt="o",
            markersize=4,
            capsize=2,
            color=colours[row.label],
            label=row.label.rsplit(" x", 1)[0],
        )
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.set_xticks(range(len(names)), names)
    ax.set_xlabel("class")
    ax.set_ylabel("top-1 drop (points; bars: 95% interval)")
    ax.set_title("drop per class against the source model")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save_figure(fig, path)


def flip_risk_plot(results: Results, path: Path) -> Path | None:
    """Flip rate by the source's top-2 margin, per artifact that flipped any image."""
    import matplotlib.pyplot as plt

    rows = [row for row in _changed(results) if row.accuracy.flips["changed"]]
    if not rows:
        return None
    colours = series_colours([row.label for row in rows])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for row in rows:
        curve = row.accuracy.flips["by_margin"]
        centres = [(b["margin_low"] + b["margin_high"]) / 2 for b in curve]
        rates = [100 * b["rate"] for b in curve]
        below = [100 * (b["rate"] - b["rate_ci"][0]) for b in curve]
        above = [100 * (b["rate_ci"][1] - b["rate"]) for b in curve]
        ax.errorbar(
            centres,
            rates,
            yerr=[below, above],
            fmt="o-",
            markersize=4,
            capsize=2,
            color=colours[row.label],
            label=row.label.rsplit(" x", 1)[0],
        )
    ax.set_xlabel("source model's top-2 margin (softmax probability; bins of equal size)")
    ax.set_ylabel("images whose top-1 flipped (%; bars: 95% interval)")
    ax.set_title("where predictions flip")
    ax.legend(fontsize=7)
    return save_figure(fig, path)
