"""Rows of a run as the recommendation and the report read them, built by hand: a measured
artifact row, and a pool of rows marked as timed in the same interleaved rounds; and a whole
run's recorded results.json."""

from __future__ import annotations

from pathlib import Path

from edgekit.common.stats import LevelFit
from edgekit.results import Row

# a real `edgekit run`'s results.json on this machine (tests/data/record_results.py records it)
RECORDED = Path(__file__).parent / "data" / "results_recorded.json"
HOST = {"latency_comparable": True, "where": "host"}


def measured_row(target, recipe, rounds, drop, high, device="cpu", size=1000, **extra) -> Row:
    """A measured row, as results.json holds it; ``rounds`` are its per-round latencies (the
    p50 is their median)."""
    fields = {
        "kind": "artifact",
        "target": target,
        "recipe": recipe,
        "device": device,
        "threads": 1,
        "status": "ok",
        "latency": {"p50_ms": sorted(rounds)[len(rounds) // 2]},
        "rounds_ms": list(rounds),
        "traits": dict(HOST),
        "size_bytes": size,
        "accuracy": {"drop_points": drop, "drop_ci": [drop - 0.3, high]},
    }
    return Row.from_dict({**fields, **extra})


def interleaved(*rows: Row) -> list[Row]:
    """Mark rows as measured in the same interleaved rounds."""
    for row in rows:
        row.interleaved_with = [other.name for other in rows if other is not row]
    return list(rows)


def read_back(text: str) -> str:
    """An equal string that is not the literal's object, as a value read from results.json or
    a loader is: code that compares such values with ``is`` instead of ``==`` fails on it."""
    return "".join(list(text))


def fitted(row: Row, ms: float, variance: float = 1e-4, df: float = 24.0) -> Row:
    """``row`` with its level in a two-level fit: ``ms`` its latency, ``variance`` that of its
    log level (a pair's is the sum of both), as a pool of several sessions gives them."""
    import math

    row.latency_fit = LevelFit(math.log(ms), variance, df, sessions=4)
    row.latency["p50_ms"] = ms
    return row
