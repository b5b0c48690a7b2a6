"""The report's plots: latency against drop (both intervals as error bars, target by colour,
recipe by marker, a legend instead of labels that collide), latency distributions, sizes,
per-layer time, and what quantization changed (``change_plots``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.common.stats import median_interval
from edgekit.report.change_plots import class_drop_plot, flip_risk_plot
from edgekit.report.profiles import layer_cells, most_expensive
from edgekit.report.recommend import measured, pareto_front
from edgekit.report.style import plain_log_ticks, save_figure, series_colours
from edgekit.results import Results

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _pareto(results: Results, out_dir: Path) -> Path | None:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = measured(results.rows)
    if not rows:
        return None
    front = {id(row) for row in pareto_front(results.rows)}
    targets = list(dict.fromkeys(row.target for row in rows))
    recipes = list(dict.fromkeys(row.precision for row in rows))
    devices = list(dict.fromkeys(str(row.device) for row in rows))
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    for row in rows:
        low, high = median_interval(row.rounds_ms) if row.rounds_ms else (row.p50, row.p50)
        d_low, d_high = row.accuracy.drop_ci
        colour = COLOURS[targets.index(row.target) % len(COLOURS)]
        marker = MARKERS[recipes.index(row.precision) % len(MARKERS)]
        filled = devices.index(str(row.device)) == 0
        ax.errorbar(
            row.p50,
            row.drop,
            xerr=[[max(row.p50 - low, 0.0)], [max(high - row.p50, 0.0)]],
            yerr=[[max(row.drop - d_low, 0.0)], [max(d_high - row.drop, 0.0)]],
            fmt=marker,
            color=colour,
            markerfacecolor=colour if filled else "white",
            markersize=11 if id(row) in front else 7,
            markeredgewidth=2 if id(row) in front else 1,
            elinewidth=0.8,
            capsize=2,
            alpha=0.9,
        )
    ordered = sorted((r for r in rows if id(r) in front), key=lambda r: r.p50)
    ax.step(
        [r.p50 for r in ordered],
        [r.drop for r in ordered],
        where="post",
        color="tab:red",
        alpha=0.5,
    )
    budget = results.run.get("config", {}).get("max_drop")
    handles = [
        Line2D([], [], color=c, marker="o", linestyle="", label=t)
        for t, c in zip(targets, COLOURS, strict=False)
    ]
    handles += [
        Line2D([], [], color="gray", marker=m, linestyle="", label=r)
        for r, m in zip(recipes, MARKERS, strict=False)
    ]
    if len(devices) > 1:
        handles += [
            Line2D([], [], color="gray", marker="o", linestyle="", label=devices[0]),
            Line2D(
                [],
                [],
                color="gray",
                marker="o",
                markerfacecolor="white",
                linestyle="",
                label=", ".join(devices[1:]),
            ),
        ]
    handles.append(Line2D([], [], color="tab:red", alpha=0.5, label="Pareto front (large marks)"))
    if budget is not None:
        ax.axhline(budget, color="gray", linestyle="--")
        handles.append(Line2D([], [], color="gray", linestyle="--", label=f"budget {budget:g}"))
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel("p50 latency (ms, log scale; bars: 95% interval of the median)")
    ax.set_ylabel("top-1 drop against the baseline (points; bars: 95% interval)")
    ax.set_title("latency against accuracy drop")
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return save_figure(fig, out_dir / "pareto.png")


def plots(results: Results, out_dir: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    pareto = _pareto(results, out_dir)
    if pareto is not None:
        paths["pareto"] = pareto
    timed = [r for r in results.rows if r.samples_ms]
    if timed:
        fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(timed) + 1)))
        ax.boxplot(
            [r.samples_ms for r in timed],
            vert=False,
            showfliers=True,
            tick_labels=[r.label for r in timed],
        )
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_xlabel("latency per inference (ms, log scale)")
        ax.set_title("latency distributions")
        ax.tick_params(axis="y", labelsize=7)
        paths["latency"] = save_figure(fig, out_dir / "latency.png")
    sized = {f"{r.target}/{r.precision}": r.size_bytes / 1024 for r in results.rows if r.size_bytes}
    if sized:
        fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(sized) + 1)))
        ax.barh(list(sized), list(sized.values()), color="tab:green")
        ax.set_xlabel("artifact size (KB)")
        ax.set_title("size per artifact")
        ax.tick_params(axis="y", labelsize=7)
        paths["size"] = save_figure(fig, out_dir / "size.png")
    memory = memory_plot(results, out_dir / "memory.png")
    if memory is not None:
        paths["memory"] = memory
    for name, made in (
        ("classes", class_drop_plot(results, out_dir / "classes.png")),
        ("flips", flip_risk_plot(results, out_dir / "flips.png")),
    ):
        if made is not None:
            paths[name] = made
    if results.run.get("profiles"):
        paths["layers"] = layer_plot(results.run["profiles"], out_dir / "layers.png")
    return paths


def layer_plot(profiles: list[dict[str, Any]], path: Path, top: int = 12) -> Path:
    """Per-layer time, layers x artifacts (``edgekit profile``'s dicts): grouped bars of the
    most expensive layers, so the runtimes line up layer by layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    # the layer's part of the p50 where every profile has one, else the profilers' own times
    cells = layer_cells(profiles)
    scaled = all(c.part_ms is not None for by_label in cells.values() for c in by_label.values())
    names = most_expensive(cells, top)[::-1]
    labels = [profile["label"] for profile in profiles]
    colours = series_colours(labels)  # a colour family per target, a shade per recipe
    height = 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(9, max(3, 0.3 * len(names) * max(len(labels), 1) / 2 + 1.5)))
    positions = np.arange(len(names))
    for index, label in enumerate(labels):
        values = [
            (cell.ms if scaled else cell.raw_ms) if (cell := cells[name].get(label)) else 0.0
            for name in names
        ]
        ax.barh(positions + index * height, values, height, label=label, color=colours[label])
    ax.set_yticks(positions + height * (len(labels) - 1) / 2, names, fontsize=7)
    ax.set_xlabel(
        "part of the whole-model p50 (ms): each layer's share of its runtime's profiled time"
        if scaled
        else "time per inference (ms), from each runtime's own profiler"
    )
    ax.set_title(f"the {len(names)} most expensive layers")
    ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


MEMORY_PARTS = (
    ("file_mb", "file", "tab:green"),
    ("planned_mb", "planned", "tab:blue"),
    ("residual_mb", "residual", "tab:gray"),
)


def memory_plot(results: Results, path: Path) -> Path | None:
    """The model's own memory per artifact (one bar per row that measured it), stacked in its
    parts: file, the runtime's plan, the residual. The runtime's floor is left out: it is the
    runtime's, not the model's, and would dwarf the rest."""
    import matplotlib.pyplot as plt

    # a phone's row has no share to split (no floor measured there)
    told = [
        r
        for r in results.rows
        if r.memory and r.memory.status == "ok" and r.memory.model_mb is not None
    ]
    if not told:
        return None
    labels = [r.label for r in told]
    fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(told) + 1)))
    left = [0.0] * len(told)
    for key, name, colour in MEMORY_PARTS:
        # a residual below zero (a part larger than what the model added) is drawn as none
        widths = [max(getattr(r.memory, key) or 0.0, 0.0) for r in told]
        ax.barh(labels, widths, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("the model's own memory above the runtime's floor (MB)")
    ax.set_title("memory per artifact, in parts")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(loc="lower right", fontsize=8)
    return save_figure(fig, path)
