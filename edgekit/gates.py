"""Regression gates: bounds on the accuracy drop, agreement and SQNR, each PASS or FAIL.

The drop gate decides on the upper end of the bootstrap interval by default, so a gate fails
only when the data say the drop may exceed the bound, not on one unlucky image."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
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


def run_accuracy_gates(
    results: dict[str, Any],
    max_drop: float | None = None,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    point_estimate: bool = False,
) -> list[GateResult]:
    """Accuracy gates on every row of a run's results.json that has an accuracy figure."""
    from edgekit.recommend import row_label

    gates = []
    for row in results["rows"]:
        accuracy = row.get("accuracy")
        if row["kind"] != "artifact" or not accuracy:
            continue
        known = {f.name for f in fields(AccuracyRecord)}  # device records may carry more
        record = AccuracyRecord(
            **{k: v for k, v in accuracy.items() if k in known and k != "drop_ci"},
            drop_ci=tuple(accuracy["drop_ci"]),
        )
        record.label = row_label(row)
        gates += accuracy_gates(record, max_drop, min_agreement, min_sqnr, point_estimate)
    return gates


def latency_gates(
    results: dict[str, Any], earlier_run: str, max_regression_pct: float, history: Any = None
) -> list[GateResult]:
    """p50 of each row against the same row of an earlier run in the history."""
    from edgekit.history import row_key, run_rows

    before = run_rows(earlier_run, history)
    gates = []
    for row in results["rows"]:
        p50 = (row.get("latency") or {}).get("p50_ms")
        then = before.get(row_key(row))
        if p50 is None or not then or not then["p50_ms"]:
            continue
        change = 100.0 * (p50 - then["p50_ms"]) / then["p50_ms"]
        detail = f"p50 {then['p50_ms']:.3f} ms in {earlier_run} -> {p50:.3f} ms"
        if row.get("disturbed"):
            detail += " (this measurement was disturbed by other processes)"
        gates.append(
            GateResult(
                row_key(row),
                str(row.get("device")),
                "p50 regression (%)",
                change,
                max_regression_pct,
                change <= max_regression_pct,
                detail,
            )
        )
    return gates
