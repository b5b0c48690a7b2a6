"""Regression gates: bounds on the accuracy drop, agreement and SQNR, on the ARM-vs-x86
difference, and on latency against a reference, each PASS or FAIL.

The drop gate decides on the upper end of the bootstrap interval by default, so a gate fails
only when the data say the drop may exceed the bound, not on one unlucky image. The latency
gate interleaves the candidate with its reference, in sessions, until the ratio's interval lies
on one side of the bound or the budget is spent; it passes only when the whole interval is at or
below the bound."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from edgekit.artifacts.artifact import Artifact, as_artifact
from edgekit.common.budget import DropBudget
from edgekit.devices import DEFAULT_DEVICE, as_device
from edgekit.errors import UserInputError
from edgekit.measure.accuracy import AccuracyRecord
from edgekit.measure.bench import measure_interleaved
from edgekit.measure.interleaved import Interleaved
from edgekit.results import Results
from edgekit.worker.latency import LatencyProtocol, LatencyRecord, NoiseGuard

if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class GateResult:
    artifact: str
    device: str
    gate: str
    measured: float
    bound: float
    passed: bool
    detail: str = ""
    figures: dict[str, Any] = field(default_factory=dict)  # machine-readable extras

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload.update(payload.pop("figures"))
        return payload


def accuracy_gates(
    record: AccuracyRecord,
    max_drop: float | None = None,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    *,
    point_estimate: bool = False,
) -> list[GateResult]:
    results = []
    name, device = record.label, record.device
    if record.drop_points is None and any(
        b is not None for b in (max_drop, min_agreement, min_sqnr)
    ):
        raise UserInputError(
            f"{record.artifact}: no baseline to measure a drop, agreement or SQNR against (a "
            "file another tool made has no source model here); its top-1 on the labels is "
            f"{100 * record.top1:.2f} %"
        )
    if max_drop is not None:
        low, high = record.drop_ci
        budget = DropBudget.of(max_drop, point_estimate=point_estimate)
        measured = budget.measured(record.drop_points, high)
        what = budget.figure + f" ({record.confidence:.0%})" * budget.on_upper_bound
        detail = (
            f"drop {record.drop_points:.2f} [{low:.2f}, {high:.2f}], "
            f"McNemar p={record.mcnemar['p_value']:.3g}"
        )
        results.append(
            GateResult(
                artifact=name,
                device=device,
                gate=what,
                measured=measured,
                bound=max_drop,
                passed=measured <= max_drop,
                detail=detail,
            )
        )
    if min_agreement is not None:
        results.append(
            GateResult(
                artifact=name,
                device=device,
                gate="top-1 agreement",
                measured=record.agreement,
                bound=min_agreement,
                passed=record.agreement >= min_agreement,
            )
        )
    if min_sqnr is not None:
        results.append(
            GateResult(
                artifact=name,
                device=device,
                gate="SQNR (dB)",
                measured=record.sqnr_db,
                bound=min_sqnr,
                passed=record.sqnr_db >= min_sqnr,
            )
        )
    return results


def device_vs_host_gate(record: AccuracyRecord, max_diff: float) -> GateResult:
    """The max |device - host| logit of a compare-to-host device (arm64-emu: ARM vs x86)."""
    figures = record.versus_host
    if figures is None:
        raise UserInputError(
            f"{record.label}: device {record.device} does not compare with the host "
            "(--max-arm-x86-diff needs --device arm64-emu)"
        )
    measured = float(figures["max_abs_diff"])
    detail = (
        f"argmax agreement {figures['argmax_agreement']:.4f}, "
        f"{figures['outputs_differing']}/{figures['outputs']} outputs differ"
    )
    return GateResult(
        artifact=record.label,
        device=record.device,
        gate="ARM vs x86 max |diff|",
        measured=measured,
        bound=max_diff,
        passed=measured <= max_diff,
        detail=detail,
    )


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
    results: Results,
    max_drop: float | None = None,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    *,
    point_estimate: bool = False,
) -> list[GateResult]:
    """Accuracy gates on every row of a run's results.json that has an accuracy figure."""
    gates = []
    for record in accuracy_records(results):
        gates += accuracy_gates(
            record, max_drop, min_agreement, min_sqnr, point_estimate=point_estimate
        )
    return gates


def accuracy_records(results: Results) -> list[AccuracyRecord]:
    """The accuracy record of each artifact row of a run that has one, labelled as its row."""
    records = []
    for row in results.rows:
        if row.kind == "artifact" and row.accuracy:
            records.append(replace(row.accuracy, label=row.label))
    return records


def _input_shape(artifact: Artifact) -> tuple[int, ...]:
    return tuple(artifact.manifest.input.shape)


def latency_decided(result: Interleaved, bound: float) -> bool:
    """The interval of candidate/reference lies on one side of the bound: more sessions cannot
    change the verdict."""
    _, (low, high) = result.ratio(1, 0)
    return low > bound or high <= bound


def latency_regression(
    candidate: str | Artifact,
    reference: str | Artifact,
    max_regression_pct: float,
    *,
    device: str | Any = DEFAULT_DEVICE,
    threads: int = 1,
    protocol: LatencyProtocol | None = None,
    guard: NoiseGuard | None = None,
    synthetic_delay_ms: float | None = None,
) -> GateResult:
    """``candidate`` against ``reference``, interleaved in rounds and sessions until the
    interval of candidate/reference lies on one side of ``1 + max_regression_pct / 100`` or the
    protocol's budget is spent. Passes only when the whole interval is at or below the bound:
    a regression beyond doubt fails, and so does a comparison the budget could not decide (a CI
    must not pass what it could not see). ``synthetic_delay_ms`` slows the candidate by a known
    amount (the benchmarks use it)."""
    if max_regression_pct < 0:
        raise UserInputError(f"--max-latency-regression must be >= 0 %, got {max_regression_pct}")
    new, old = as_artifact(candidate), as_artifact(reference)
    if _input_shape(new) != _input_shape(old):
        raise UserInputError(
            f"{old.path}: its input {list(_input_shape(old))} is not the candidate's "
            f"{list(_input_shape(new))}: a latency ratio of different inputs means nothing"
        )
    device = as_device(device)
    if not device.traits().latency_comparable:
        raise UserInputError(f"--device {device.name}: its latency is not comparable")
    # two sessions at least: a process's own landing is what one session cannot see
    protocol = protocol or LatencyProtocol()
    protocol = replace(protocol, sessions=max(protocol.sessions, 2))
    guard = guard or NoiseGuard()
    bound = 1.0 + max_regression_pct / 100.0

    sides = [(old, None), (new, synthetic_delay_ms)]
    timers, records = [], []
    try:
        for artifact, delay in sides:
            extra = {"synthetic_delay_ms": delay} if delay else {}
            timers.append(device.timer(artifact, threads, None, protocol, 600.0, **extra))
            records.append(LatencyRecord.for_artifact(artifact, device.name, threads))
        result = measure_interleaved(
            timers,
            records,
            protocol,
            guard,
            decided=lambda partial: latency_decided(partial, bound),
        )
    finally:
        for timer in timers:
            timer.close()
    failed = [r.error for r in records if r.status != "ok"]
    if failed:
        raise UserInputError(f"{new.path}: the latency comparison failed: {failed[0]}")
    ratio, (low, high) = result.ratio(1, 0)
    decided = low > bound or high <= bound
    pool = result.summary()
    verdict = (
        ""
        if decided
        else (
            f"; UNDECIDED: the interval still straddles {bound:.2f} after {pool['sessions']} "
            f"sessions ({pool['seconds']:.0f} s, the budget {protocol.budget_s:g} s): a larger "
            "--budget-s may decide it"
        )
    )
    detail = (
        f"candidate/reference {ratio:.3f} [{low:.3f}, {high:.3f}] over {pool['rounds']} "
        f"interleaved rounds in {pool['sessions']} sessions (each side reopened between them; "
        f"stopped on {pool['stopped']}); p50 {records[1].stats['p50_ms']:.3f} ms vs "
        f"{records[0].stats['p50_ms']:.3f} ms{verdict}"
    )
    return GateResult(
        artifact=str(new.path),
        device=device.name,
        gate="latency ratio, 95% interval",
        measured=high,
        bound=bound,
        passed=high <= bound,
        detail=detail,
        figures={
            "ratio": ratio,
            "ratio_ci": [low, high],
            "decided": decided,
            "rounds": pool["rounds"],
            "sessions": pool["sessions"],
            "stopped": pool["stopped"],
        },
    )


def run_latency_gates(
    results: Results,
    run_dir: str | Path,
    earlier_run: str,
    max_regression_pct: float,
    *,
    history: Path | None = None,
    across_machines: bool = False,
    remeasure: bool = True,
    protocol: LatencyProtocol | None = None,
) -> list[GateResult]:
    """Each artifact row of a run against the same row of an earlier run in the history.

    Where both artifact files still exist and the device is the host's, the two are measured
    again now, interleaved (``latency_regression``); otherwise the recorded p50s are
    compared, only when both rows carry the same machine fingerprint (else one line naming the
    fields that differ, unless ``across_machines``, which labels every such figure)."""
    from pathlib import Path

    from edgekit.report.history import machine_mismatch, run_rows

    before = run_rows(earlier_run, history)
    gates = []
    for row in results.rows:
        then = before.get(row.key)
        if row.kind != "artifact" or row.p50 is None or not then or not then["p50_ms"]:
            continue
        current = Path(run_dir) / row.artifact if row.artifact else None
        previous = Path(then["artifact_path"]) if then.get("artifact_path") else None
        host = row.traits.get("where") == "host" and row.latency_comparable
        if remeasure and host and current and previous and current.is_file() and previous.is_file():
            gate = latency_regression(
                current,
                previous,
                max_regression_pct,
                device=str(row.device),
                threads=row.threads or 1,
                protocol=protocol,
            )
            gates.append(
                GateResult(
                    artifact=row.key,
                    device=gate.device,
                    gate=gate.gate,
                    measured=gate.measured,
                    bound=gate.bound,
                    passed=gate.passed,
                    detail=gate.detail,
                    figures=gate.figures,
                )
            )
            continue
        mismatch = machine_mismatch(row.fingerprint, then["fingerprint"], f"{row.key}")
        if mismatch and not across_machines:
            raise UserInputError(mismatch)
        change = 100.0 * (row.p50 - then["p50_ms"]) / then["p50_ms"]
        detail = (
            f"recorded p50 {then['p50_ms']:.3f} ms in {earlier_run} -> {row.p50:.3f} ms "
            "(two moments, not interleaved: no interval)"
        )
        if mismatch:
            detail += f"; ACROSS MACHINES: {mismatch.split('(')[1].split(')')[0]}"
        gates.append(
            GateResult(
                artifact=row.key,
                device=str(row.device),
                gate="p50 regression (%), recorded",
                measured=change,
                bound=max_regression_pct,
                passed=change <= max_regression_pct,
                detail=detail,
            )
        )
    return gates
