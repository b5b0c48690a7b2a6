"""What the report's plots share: colours, a colour family per target and a shade per recipe, so a
dozen series (3 targets x 4 recipes) stay apart, where matplotlib's 10-colour cycle repeats; and
log axes with plain tick labels (0.06, not 6x10^-2); and saving a figure."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

FAMILIES = {"tflite": "Blues", "executorch": "Oranges", "onnx": "Greens", "baseline": "Greys"}
OTHER_FAMILIES = ("Purples", "Reds", "PuRd", "YlOrBr")


def series_colours(labels: list[str]) -> dict[str, Any]:
    """``target/recipe...`` labels -> a colour each: the target picks the colour map, the
    label's rank among that target's labels picks the shade (darker for later ones)."""
    from matplotlib import colormaps

    by_target: dict[str, list[str]] = {}
    for label in dict.fromkeys(labels):
        by_target.setdefault(label.split("/")[0], []).append(label)
    colours, others = {}, iter(OTHER_FAMILIES * 4)
    for target, members in by_target.items():
        family = colormaps[FAMILIES.get(target) or next(others)]
        for rank, label in enumerate(members):
            # shades from 0.45 to 0.95 of the map: light enough to tell apart, never white
            colours[label] = family(0.45 + 0.5 * rank / max(len(members) - 1, 1))
    return colours


def plain_log_ticks(axis: Axis) -> None:
    """Tick labels of a log axis as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    axis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def save_figure(fig: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
