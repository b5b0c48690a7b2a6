"""Regression gates: bounds on the accuracy drop, agreement and SQNR, each PASS or FAIL.

The drop gate decides on the upper end of the bootstrap interval by default, so a gate fails
only when the data say the drop may exceed the bound, not on one unlucky image."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from edgekit.accuracy import AccuracyRecord


@dataclass(frozen=True)
class GateResult:
    artifact: str
    device: str
    gate: str
    measured: float
    bound: float
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def accuracy_gates(
    record: AccuracyRecord,
    max_drop: float | None = None,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    point_estimate: bool = False,
) -> list[GateResult]:
    results = []
    name, device = record.label, record.device
    if max_drop is not None:
        low, high = record.drop_ci
        measured = record.drop_points if point_estimate else high
        what = "drop (points)" if point_estimate else f"drop, {record.confidence:.0%} upper bound"
        detail = (
            f"drop {record.drop_points:.2f} [{low:.2f}, {high:.2f}], "
            f"McNemar p={record.mcnemar['p_value']:.3g}"
        )
        results.append(
            GateResult(name, device, what, measured, max_drop, measured <= max_drop, detail)
        )
    if min_agreement is not None:
        results.append(
            GateResult(
                name,
                device,
                "top-1 agreement",
                record.agreement,
                min_agreement,
                record.agreement >= min_agreement,
            )
        )
    if min_sqnr is not None:
        results.append(
            GateResult(
                name, device, "SQNR (dB)", record.sqnr_db, min_sqnr, record.sqnr_db >= min_sqnr
            )
        )
    return results


def format_gates(results: list[GateResult]) -> str:
    """A plain-text table (used in pytest failure messages and logs)."""
    header = ("artifact", "device", "gate", "measured", "bound", "result")
    rows = [header] + [
        (
            r.artifact,
            r.device,
            r.gate,
            f"{r.measured:.3f}",
            f"{r.bound:.3f}",
            "PASS" if r.passed else "FAIL",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    details = [f"  {r.artifact} {r.gate}: {r.detail}" for r in results if r.detail]
    return "\n".join(lines + details)
