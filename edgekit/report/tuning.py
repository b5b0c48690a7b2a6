"""The report's "Tuned against default" section (``edgekit run --tune``): for each artifact, the
start (edgekit's defaults) and the tuned configuration, interleaved by the search's final
comparison, with the options that won."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgekit.report.content import Section, Table
from edgekit.results import Results

if TYPE_CHECKING:
    from collections.abc import Sequence

TUNING_COLUMNS = (
    "artifact",
    "device",
    "default p50 ms",
    "tuned p50 ms",
    "tuned / default [95%]",
    "verdict",
    "tuned options",
)


def ratio_text(ratio: float | None, interval: Sequence[float] | None) -> str:
    """``ratio [low, high]``, or ``-`` where there is none."""
    if ratio is None or interval is None:
        return "-"
    return f"{ratio:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def ms_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _options(options: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in options.items()) or "the defaults"


def _verdict(record: dict[str, Any]) -> str:
    """What the final comparison said: the tuned options kept, sent back, or never in doubt."""
    final = record.get("final")
    if final is None:
        return "the default won every stage (tuned is the default)"
    if final == "faster":
        return "tuned is faster"
    if final == "tie":
        return "a tie: the default stays"
    return str(final)


def tuning_row(record: dict[str, Any]) -> list[str]:
    if "error" in record:
        return [
            record["label"],
            record["device"],
            "-",
            "-",
            "-",
            f"not tuned: {record['error']}",
            "-",
        ]
    compared = ratio_text(record.get("ratio"), record.get("interval"))
    shown = record.get("changed") or record.get("tied") or {}  # a final tie keeps the default
    return [
        record["label"],
        record["device"],
        ms_or_dash(record.get("default_p50_ms")),
        ms_or_dash(record.get("best_p50_ms")),
        compared,
        _verdict(record),
        _options(shown),
    ]


def tuning_line(record: dict[str, Any]) -> str:
    """One artifact's search in a line (``edgekit run --tune`` prints one per artifact)."""
    label, default, tuned, compared, verdict, options = (
        tuning_row(record)[i] for i in (0, 2, 3, 4, 5, 6)
    )
    if "error" in record:
        return f"tuned {label} on {record['device']}: {verdict}"
    return (
        f"tuned {label} on {record['device']}: {verdict}; default {default} ms, tuned "
        f"{tuned} ms, tuned/default {compared}; options: {options}"
    )


def tuning_section(results: Results) -> Section:
    records = results.run.get("tuning") or []
    if not records:
        return Section("Tuned against default", [])
    lines = [
        "run --tune searched each artifact's runtime options (edgekit tune's search: the thread "
        "count, then each option, interleaved against the incumbent) within an equal share of "
        f"{results.run.get('config', {}).get('tune_budget_s', 0):g} s; the results above were "
        "measured with the tuned options, at the run's thread counts.",
        "default p50 and tuned p50 come from the search's final comparison: the stages' winner "
        "interleaved with edgekit's defaults (1 thread), in three sessions; where the default "
        "won every stage, both are its p50 in that run, where it ran alone. The winner is kept "
        "only where its interval lies below 1; a tie keeps the default, and the column names "
        "the options that tied.",
    ]
    return Section(
        "Tuned against default", lines, [Table(TUNING_COLUMNS, [tuning_row(r) for r in records])]
    )
