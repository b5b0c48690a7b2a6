"""Which artifact to ship: the Pareto front of latency against accuracy drop, and the fastest
artifact whose drop stays within the budget, with the reason each other row lost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def row_label(row: dict[str, Any]) -> str:
    from edgekit.quantize.accuracy_aware import precision_label

    io = "-io8" if row.get("io_dtype") in ("int8", "uint8") else ""
    return f"{row['target']}/{precision_label(row)}{io} @ {row.get('device')} x{row.get('threads')}"


def software_gpu(row: dict[str, Any]) -> bool:
    return row.get("device") == "gpu" and bool(row.get("runtime", {}).get("software_vulkan"))


def _drop(row: dict[str, Any]) -> float | None:
    accuracy = row.get("accuracy")
    return None if not accuracy else accuracy["drop_points"]


def _drop_high(row: dict[str, Any]) -> float | None:
    accuracy = row.get("accuracy")
    return None if not accuracy else accuracy["drop_ci"][1]


def measured(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Artifact rows with both a latency and an accuracy figure."""
    return [
        row
        for row in rows
        if row["kind"] == "artifact"
        and row["status"] == "ok"
        and row.get("device") != "arm64-emu"  # emulated latency is never compared
        and not software_gpu(row)  # nor a software Vulkan device's
        and row.get("latency", {}).get("p50_ms") is not None
        and row.get("accuracy")
    ]


def pareto_front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows no other row beats on both p50 latency and accuracy drop (lower is better for both)."""
    candidates = measured(rows)
    front = []
    for row in candidates:
        latency, drop = row["latency"]["p50_ms"], _drop(row)
        dominated = any(
            other is not row
            and other["latency"]["p50_ms"] <= latency
            and _drop(other) <= drop
            and (other["latency"]["p50_ms"] < latency or _drop(other) < drop)
            for other in candidates
        )
        if not dominated:
            front.append(row)
    return sorted(front, key=lambda row: row["latency"]["p50_ms"])


@dataclass
class Recommendation:
    best: dict[str, Any] | None
    budget: float
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (row label, why it lost)

    @property
    def summary(self) -> str:
        if self.best is None:
            return f"no artifact stays within a {self.budget:g}-point drop budget"
        latency = self.best["latency"]["p50_ms"]
        high = _drop_high(self.best)
        speedup = self.best.get("speedup")
        faster = f", {speedup:.2f}x the baseline" if speedup else ""
        return (
            f"{row_label(self.best)}: p50 {latency:.3f} ms{faster}, drop "
            f"{_drop(self.best):+.2f} points (95% upper bound {high:+.2f} <= {self.budget:g})"
        )


def recommend(rows: list[dict[str, Any]], max_drop: float = 1.0) -> Recommendation:
    """The fastest artifact whose drop's upper confidence bound is within ``max_drop`` points.

    Software-Vulkan GPU rows and disturbed measurements are not eligible: their latency is not
    the device's."""
    reasons: list[tuple[str, str]] = []
    eligible = []
    for row in rows:
        if row["kind"] != "artifact":
            continue
        label = row_label(row)
        if row["status"] == "unavailable":
            continue  # a device this machine does not have: listed once, in its own section
        if row["status"] != "ok":
            reasons.append((label, f"{row['status']}: {row.get('error')}"))
        elif not row.get("accuracy"):
            reasons.append((label, "no accuracy figure"))
        elif row.get("device") == "arm64-emu":
            reasons.append((label, "emulated ARM64: numerics only, its latency is not a phone's"))
        elif software_gpu(row):
            reasons.append((label, "software Vulkan: its latency is not a GPU's"))
        elif row.get("disturbed"):
            reasons.append((label, "latency disturbed by other processes"))
        elif _drop_high(row) > max_drop:
            reasons.append(
                (label, f"drop upper bound {_drop_high(row):+.2f} > budget {max_drop:g}")
            )
        else:
            eligible.append(row)
    eligible.sort(key=lambda row: row["latency"]["p50_ms"])
    best = eligible[0] if eligible else None
    for row in eligible[1:]:
        reasons.append(
            (
                row_label(row),
                f"slower: p50 {row['latency']['p50_ms']:.3f} ms vs "
                f"{best['latency']['p50_ms']:.3f} ms",
            )
        )
    return Recommendation(best, max_drop, reasons)
