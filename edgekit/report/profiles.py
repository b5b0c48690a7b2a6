"""The report's "Where the time goes" section: the ten most expensive layers with the runtimes
side by side, and each artifact's explanation (from the profiles ``edgekit run`` recorded).

Each cell is the layer's part of the whole-model p50 and its share of the profiled time, so an
artifact's column adds up to 100 % (the scaling is said in the section, as the profile records
it); the profiler's own sum against the p50 is said per artifact."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgekit.report.content import Section, Table
from edgekit.results import Results

TOP = 10


def _share(layer: dict[str, Any], profile: dict[str, Any]) -> float | None:
    # a profile recorded before shares were of the profiled sum: derive it from the raw times
    ops_ms = profile.get("ops_ms") or 0.0
    if profile.get("scaling"):
        return float(layer["share"])
    return layer["ms"] / ops_ms if ops_ms > 0 else None


@dataclass(frozen=True)
class LayerCell:
    """One layer of one artifact: the profiler's own ms, its share of the profiled time, and
    that share of the whole-model p50 (None without a p50)."""

    raw_ms: float
    share: float | None
    part_ms: float | None

    @property
    def ms(self) -> float:
        """The figure to show: the part of the p50 where there is one, else the raw time."""
        return self.raw_ms if self.part_ms is None else self.part_ms


def layer_cells(profiles: list[dict[str, Any]]) -> dict[str, dict[str, LayerCell]]:
    """layer name -> artifact label -> its cell, for profiles as results.json keeps them."""
    cells: dict[str, dict[str, LayerCell]] = {}
    for profile in profiles:
        total = profile.get("total_ms")
        for layer in profile["layers"]:
            share = _share(layer, profile)
            part = None if share is None or not total else share * total
            cells.setdefault(layer["name"], {})[profile["label"]] = LayerCell(
                layer["ms"], share, part
            )
    return cells


def most_expensive(cells: dict[str, dict[str, LayerCell]], top: int) -> list[str]:
    """The ``top`` layers by their largest share in any artifact, largest first."""
    return sorted(cells, key=lambda name: -max(c.share or 0.0 for c in cells[name].values()))[:top]


def layer_table(profiles: list[dict[str, Any]], top: int = TOP) -> Table:
    """The most expensive layers, one column per artifact: each cell its part of the p50
    (or the profiler's own time, said) and its share of the profiled time, with a bar."""
    labels = [profile["label"] for profile in profiles]
    cells = layer_cells(profiles)
    rows, bars = [], []
    for name in most_expensive(cells, top):
        row, shares = [name], []
        for label in labels:
            cell = cells[name].get(label)
            if cell is None:
                row.append("")
                shares.append(None)
                continue
            figure = f"{cell.ms:.3f} ms" + ("" if cell.part_ms is not None else " (profiler)")
            row.append(figure + ("" if cell.share is None else f" ({100 * cell.share:.0f} %)"))
            shares.append(cell.share)
        rows.append(row)
        bars.append([None, *shares])
    return Table(("layer", *labels), rows, bars=bars)


def profile_section(results: Results) -> Section:
    heading = "Where the time goes"
    profiles: list[dict[str, Any]] = results.run.get("profiles") or []
    if not profiles:
        return Section(heading, [])
    scaling = next((p["scaling"] for p in profiles if p.get("scaling")), None)
    lines = [
        f"Per-layer time on the host CPU ({profiles[0]['method']} and the others' own "
        "profilers; layers named by the source model's module paths), the ten most expensive "
        "layers. Each cell: the layer's part of the whole-model p50 and, in brackets, its share "
        "of the profiled time (a column's shares add up to 100 %)"
        + (f": {scaling}." if scaling else "."),
    ]
    after = []
    for profile in profiles:
        total = profile.get("total_ms")
        against = (
            f", {100 * profile['ops_ms'] / total:.0f} % of the p50 {total:.3f} ms" if total else ""
        )
        after.append(
            f"{profile['label']}: the profiler's op times summed to {profile['ops_ms']:.3f} ms"
            f"{against}"
        )
        after += [f"  - {line}" for line in profile.get("explanation", [])]
    return Section(heading, lines, [layer_table(profiles)], after)
