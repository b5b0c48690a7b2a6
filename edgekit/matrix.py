"""``edgekit run``: the whole matrix (targets x recipes x devices x threads) plus the baseline,
measured in one run, into a run directory with results.json, the report files and a history
record. ``run_matrix`` called from Python produces exactly what ``edgekit run`` produces.

A failed row (an export error, a crash, a timeout, a device that is not available) is recorded
with its reason and the run goes on. The run directory is built under a hidden temporary name
and renamed into place at the end, so an interrupted run leaves no partial directory."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edgekit.accuracy import AccuracyRecord, evaluate_artifact
from edgekit.artifact import Artifact
from edgekit.bench import bench_artifacts
from edgekit.data import Dataset, load_dataset
from edgekit.devices import get_device
from edgekit.errors import DeviceUnavailable, EdgekitError
from edgekit.export import export_artifact
from edgekit.fileio import journal, write_json_atomic
from edgekit.latency import LatencyRecord, NoiseGuard, Protocol
from edgekit.machine import fingerprint
from edgekit.models import load_model
from edgekit.report import build_report
from edgekit.report.history import record_run
from edgekit.report.recommend import Recommendation, recommend
from edgekit.results import RESULTS_SCHEMA_VERSION, Results, Row
from edgekit.run_config import RunConfig
from edgekit.source import SourceModel
from edgekit.targets import runtime_versions

Progress = Callable[[str], None]


@dataclass
class RunResult:
    run_dir: Path
    results: Results
    report: dict[str, Path]
    recommendation: Recommendation

    @property
    def failed(self) -> list[Row]:
        return [row for row in self.results.rows if row.status == "failed"]

    @property
    def unavailable(self) -> list[Row]:
        return [row for row in self.results.rows if row.status == "unavailable"]


def run_matrix(
    config: RunConfig,
    progress: Progress | None = None,
    history: Path | None = None,
) -> RunResult:
    """Export, validate, evaluate and benchmark every combination; write the run directory,
    its report and its history record; return them with the recommendation."""
    config.validate()
    say = progress or (lambda message: None)
    source = load_model(config.model, quiet=True)
    dataset = load_dataset(config.data, source.preprocess)
    created = datetime.now(UTC)
    name = config.name or source.name
    final = Path(config.runs_dir) / f"{created.strftime('%Y%m%d-%H%M%S')}-{name}"
    if final.exists():
        raise EdgekitError(f"{final}: a run directory of that name exists already")
    partial = final.with_name(f".{final.name}.partial")
    (partial / "artifacts").mkdir(parents=True)
    journal(partial)
    try:
        results = _measure(config, source, dataset, partial, final.name, created, say)
        write_json_atomic(partial / "results.json", results.to_dict())
        say("report")
        build_report(partial)
        partial.rename(final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    record_run(results, final, history)
    report = {
        "md": final / "report.md",
        "html": final / "report.html",
        "json": final / "report.json",
    }
    return RunResult(final, results, report, recommend(results.rows, config.max_drop))


def _measure(
    config: RunConfig,
    source: SourceModel,
    dataset: Dataset,
    run_dir: Path,
    run_id: str,
    created: datetime,
    say: Progress,
) -> Results:
    from edgekit.peak import measure_peaks

    protocol = Protocol(config.warmup, config.min_runs, config.min_seconds, rounds=config.rounds)
    guard = NoiseGuard(enabled=config.noise_guard)
    say("measuring the machine's matmul peaks")
    peaks = {str(threads): measure_peaks(threads) for threads in config.threads}
    exported, rows = _export_all(config, source, dataset, run_dir / "artifacts", protocol, say)
    for device in config.devices:
        for row in _device_rows(config, device, exported, source, dataset, protocol, guard, say):
            # each device pool interleaves its own baseline; the report keeps the first one
            if row.kind == "baseline" and any(
                r.kind == "baseline" and r.threads == row.threads for r in rows
            ):
                continue
            rows.append(row)
    macs = _macs(source)
    for row in rows:
        _derive(row, peaks, macs)
    run = {
        "id": run_id,
        "name": config.name or source.name,
        "created": created.isoformat(timespec="seconds"),
        "model": {
            "spec": source.spec,
            "name": source.name,
            "digest": source.digest,
            "macs": macs,
            "load_options": source.load_options,
        },
        "data": {
            "spec": config.data,
            "digest": dataset.digest,
            "evaluation_samples": len(dataset.evaluation),
        },
        "config": asdict(config),
        "machine": fingerprint(versions=runtime_versions()),
        "peaks": peaks,
    }
    return Results(run, rows, RESULTS_SCHEMA_VERSION)


def _export_all(
    config: RunConfig,
    source: SourceModel,
    dataset: Dataset,
    out_dir: Path,
    protocol: Protocol,
    say: Progress,
) -> tuple[list[Artifact], list[Row]]:
    exported: list[Artifact] = []
    rows: list[Row] = []
    for target in config.targets:
        for recipe in config.recipes:
            say(f"export {target}/{recipe}")
            try:
                if recipe == "int8" and config.accuracy_aware:
                    from edgekit.accuracy_aware import export_accuracy_aware

                    aware = export_accuracy_aware(
                        source, dataset, target, config.max_drop, out_dir,
                        config.calibration_samples, point_estimate=config.point_estimate,
                    )  # fmt: skip
                    exported.append(aware.artifact)
                    continue
                result = export_artifact(
                    source, dataset, target, recipe, out_dir, config.calibration_samples
                )
                exported.append(result.artifact)
            except EdgekitError as exc:
                rows.append(_failed(target, recipe, None, None, exc, stage="export"))
    return exported, rows


def _device_rows(
    config: RunConfig,
    device: str,
    exported: list[Artifact],
    source: SourceModel,
    dataset: Dataset,
    protocol: Protocol,
    guard: NoiseGuard,
    say: Progress,
) -> list[Row]:
    where = get_device(device, **config.device_options(device))
    traits = where.traits()
    accuracy: dict[str, AccuracyRecord] = {}
    rows: list[Row] = []
    runnable = []
    for artifact in exported:
        reason = where.unavailable_reason(artifact)
        if reason:
            for threads in config.threads:
                rows.append(_failed(artifact.target, artifact.recipe, device, threads,
                                    DeviceUnavailable(reason), artifact))  # fmt: skip
            continue
        if traits.predicts:
            say(f"evaluate {artifact.label} on {device}")
            try:
                accuracy[artifact.label] = evaluate_artifact(
                    str(artifact.path), config.data, where, source=source, dataset=dataset
                )
            except EdgekitError as exc:
                for threads in config.threads:
                    rows.append(_failed(artifact.target, artifact.recipe, device, threads,
                                        exc, artifact))  # fmt: skip
                continue
        runnable.append(artifact)
    if not runnable:
        return rows
    sample = dataset.evaluation.x[:1]
    for threads in config.threads:
        say(f"bench {len(runnable)} artifact(s) on {device}, {threads} thread(s), interleaved")
        records = bench_artifacts(
            runnable, where, threads, protocol, guard, sample, True, config.timeout,
            progress=say,
        )  # fmt: skip
        for record in records:
            if record.artifact is None:  # the baseline of this pool
                rows.append(_row(record, None, None))
                continue
            artifact = next(a for a in runnable if str(a.path) == record.artifact)
            found = accuracy.get(artifact.label)
            rows.append(_row(record, artifact, None if found is None else found.to_dict()))
    return rows


def _row(record: LatencyRecord, artifact: Artifact | None, accuracy: dict | None) -> Row:
    row = Row(
        kind="artifact" if artifact is not None else "baseline",
        target=record.target or "baseline",
        recipe=record.recipe or "fp32",
        device=record.device,
        threads=record.threads,
        status=record.status,
        error=record.error,
        model=record.model,
        latency=record.stats,
        samples_ms=record.samples_ms,
        rounds_ms=record.rounds_ms,
        block_runs=record.block_runs,
        load_ms=record.load_ms,
        first_ms=record.first_ms,
        peak_rss_mb=record.peak_rss_mb,
        foreign_cpu=record.foreign_cpu,
        steal=record.steal,
        disturbed=record.disturbed,
        attempts=record.attempts,
        runtime=record.runtime,
        traits=record.traits,
        fingerprint=record.fingerprint,
        interleaved_with=record.interleaved_with,
        warnings=list(record.warnings),
        accuracy=accuracy,
        speedup=record.speedup if record.traits.get("latency_comparable") else None,
        speedup_ci=record.speedup_ci if record.traits.get("latency_comparable") else None,
        noise_band=record.noise_band,
    )
    if artifact is not None:
        _describe_artifact(row, artifact)
    return row


def _describe_artifact(row: Row, artifact: Artifact) -> None:
    manifest = artifact.manifest
    row.artifact = f"artifacts/{artifact.path.name}"
    row.size_bytes = manifest["file"]["size"]
    row.validation = manifest.get("validation")
    row.coverage = manifest.get("coverage")
    row.export_warnings = list(manifest.get("warnings", []))
    row.io_dtype = manifest["input"]["dtype"]
    row.keep_float = list(manifest.get("keep_float", []))
    row.accuracy_aware = manifest.get("accuracy_aware")


def _failed(
    target: str,
    recipe: str,
    device: str | None,
    threads: int | None,
    error: EdgekitError,
    artifact: Artifact | None = None,
    stage: str = "run",
) -> Row:
    unavailable = isinstance(error, DeviceUnavailable)  # a device this machine lacks
    row = Row(
        kind="artifact",
        target=target,
        recipe=recipe,
        device=device,
        threads=threads,
        status="unavailable" if unavailable else "failed",
        stage=stage,
        error=str(error),
    )
    if artifact is not None:
        _describe_artifact(row, artifact)
    return row


def _derive(row: Row, peaks: dict[str, dict[str, float]], macs: int | None) -> None:
    """Achieved GFLOP/s (GOP/s) and the share of the measured peak of the arithmetic that runs:
    the int8 peak where most compute ops run in int8, the fp32 peak otherwise."""
    p50 = row.p50
    if p50 is None or not macs:
        return
    row.gflops = 2 * macs / (p50 / 1e3) / 1e9
    peak = peaks.get(str(row.threads), {})
    int8_share = (row.coverage or {}).get("int8_fraction") or 0.0
    row.peak_kind = "int8" if row.recipe.startswith("int8") and int8_share >= 0.5 else "fp32"
    reference = peak.get("int8_gops" if row.peak_kind == "int8" else "fp32_gflops")
    if reference and row.traits.get("where") == "host" and row.latency_comparable:
        row.peak_fraction = row.gflops / reference


def _macs(source: SourceModel) -> int | None:
    if source.framework != "torch":
        return None
    import torch

    from edgekit.architectures import count_macs

    return count_macs(source.module, torch.from_numpy(source.example_input()))


def matrix_summary(result: RunResult) -> dict[str, Any]:
    """What the CLI prints after a run (and ``--json`` gives)."""
    return {
        "run_dir": str(result.run_dir),
        "recommendation": result.recommendation.summary,
        "failed": [row.label for row in result.failed],
        "unavailable": [row.label for row in result.unavailable],
        "report": {key: str(path) for key, path in result.report.items()},
    }
