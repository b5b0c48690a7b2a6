"""The units of work of ``edgekit run`` (cells): one export (a target x a recipe) and one
device pool (every artifact on one device: evaluated there, then timed interleaved with the
baseline per thread count; on the host CPU also profiled layer by layer). ``run_matrix`` runs
them in this process, or as Ray tasks on a cluster (``edgekit.cluster.executor``); either
way the same rows come back."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edgekit.artifacts.artifact import Artifact
from edgekit.common.progress import Progress
from edgekit.common.schema import record_from
from edgekit.devices import DEFAULT_DEVICE, get_device
from edgekit.errors import DeviceUnavailable, EdgekitError
from edgekit.export.cache import cached_export
from edgekit.export.pipeline import export_artifact
from edgekit.measure.accuracy import AccuracyRecord, evaluate_artifact
from edgekit.measure.bench import bench_artifacts
from edgekit.records import AwareLoop, Coverage
from edgekit.results import Row
from edgekit.run.config import RunConfig
from edgekit.sources.data import Dataset
from edgekit.sources.source import SourceModel
from edgekit.worker.latency import LatencyRecord


@dataclass
class PoolResult:
    """What one device pool measured, where and when (the benchmark's own window)."""

    rows: list[Row]
    profiles: list[dict[str, Any]] = field(default_factory=list)
    node: str = ""
    bench_started: str | None = None
    bench_finished: str | None = None


def export_one(
    config: RunConfig,
    source: SourceModel,
    dataset: Dataset,
    target: str,
    recipe: str,
    out_dir: Path,
) -> tuple[Artifact | None, Row | None]:
    """One export cell: the artifact, or the failed row that says why not."""
    try:
        if recipe == "int8" and config.accuracy_aware:
            from edgekit.export.accuracy_aware import export_accuracy_aware

            aware = export_accuracy_aware(
                source,
                dataset,
                target,
                config.max_drop,
                out_dir,
                calibration_samples=config.calibration_samples,
                point_estimate=config.point_estimate,
            )
            return aware.artifact, None
        export = cached_export if config.export_cache else export_artifact
        result = export(
            source,
            dataset,
            target,
            recipe,
            out_dir=out_dir,
            calibration_samples=config.calibration_samples,
        )
        return result.artifact, None
    except EdgekitError as exc:
        return None, failed_row(target, recipe, None, None, exc, stage="export")


def export_all(
    config: RunConfig,
    source: SourceModel,
    dataset: Dataset,
    out_dir: Path,
    say: Progress,
    timings: list[dict[str, Any]] | None = None,
) -> tuple[list[Artifact], list[Row]]:
    """Every export of one model, one after the other; each one's time into ``timings``."""
    exported: list[Artifact] = []
    rows: list[Row] = []
    for target in config.targets:
        for recipe in config.recipes:
            say(f"export {target}/{recipe}")
            started = time.perf_counter()
            artifact, failed = export_one(config, source, dataset, target, recipe, out_dir)
            if timings is not None:
                # a copy from the export cache takes no converter time: said beside the time
                reused = artifact is not None and artifact.manifest.reused is not None
                timings.append(export_timing(config.model, target, recipe, started, reused=reused))
            if artifact is not None:
                exported.append(artifact)
            if failed is not None:
                rows += export_failed(failed, config)
    return exported, rows


def export_failed(failed: Row, config: RunConfig) -> list[Row]:
    """A failed export as the rows its artifact would have had: one per device and thread
    count, each labelled with them (``tflite/fp32 @ android x1``)."""
    return [
        replace(failed, device=device, threads=threads)
        for device in config.devices
        for threads in config.threads
    ]


def export_timing(
    model: str, target: str, recipe: str, started: float, *, reused: bool = False
) -> dict[str, Any]:
    """One export's own time and where it ran (``run["phases"]["exports"]``)."""
    return {
        "model": model,
        "target": target,
        "recipe": recipe,
        "node": socket.gethostname(),
        "seconds": time.perf_counter() - started,
        "reused": reused,
    }


def device_pool(
    config: RunConfig,
    device: str,
    exported: list[Artifact],
    source: SourceModel | None,
    dataset: Dataset | None,
    say: Progress,
) -> PoolResult:
    """One device pool: its rows (the pool's baseline included), stamped with the node and the
    benchmark's window, and on the host CPU the per-layer profiles."""
    started = _now()
    rows = _pool_rows(config, device, exported, source, dataset, say)
    finished = _now()
    profiles = []
    if config.profile and device == DEFAULT_DEVICE:
        from edgekit.run.profile import profile_run

        say("profile the host-CPU artifacts layer by layer")
        profiles = profile_run(exported, rows, config.threads[0], config.profile_runs, say)
    node = socket.gethostname()
    for row in rows:
        row.node = node
        if row.status != "unavailable":
            row.bench_started, row.bench_finished = started, finished
    return PoolResult(rows, profiles, node, started, finished)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _pool_rows(
    config: RunConfig,
    device: str,
    exported: list[Artifact],
    source: SourceModel,
    dataset: Dataset,
    say: Progress,
) -> list[Row]:
    # ``device`` is the pool's name as the run and its rows say it; ``pool_device`` the Device
    pool_device = get_device(device, **config.device_options(device))
    traits = pool_device.traits()
    accuracy: dict[str, AccuracyRecord] = {}
    rows: list[Row] = []
    runnable = []
    for artifact in exported:

        def failed(error: EdgekitError, artifact: Artifact = artifact) -> list[Row]:
            return [
                failed_row(artifact.target, artifact.recipe, device, threads, error,
                           artifact=artifact)
                for threads in config.threads
            ]  # fmt: skip

        reason = pool_device.why_unavailable(artifact)
        if reason:
            rows += failed(DeviceUnavailable(reason))
            continue
        if traits.predicts and dataset is not None:
            say(f"evaluate {artifact.label} on {device}")
            try:
                accuracy[artifact.label] = evaluate_artifact(
                    artifact,
                    data=config.data,
                    device=pool_device,
                    source=source,
                    dataset=dataset,
                )
            except EdgekitError as exc:
                rows += failed(exc)
                continue
        runnable.append(artifact)
    if not runnable:
        return rows
    sample = dataset.evaluation.x[:1] if dataset is not None else None
    for threads in config.threads:
        say(f"bench {len(runnable)} artifact(s) on {device}, {threads} thread(s), interleaved")
        records = bench_artifacts(
            runnable,
            device=pool_device,
            threads=threads,
            protocol=config.protocol(),
            guard=config.guard(),
            sample=sample,
            baseline=True,
            timeout_s=config.timeout,
            progress=say,
        )
        for record in records:
            if record.artifact is None:  # the baseline of this pool
                rows.append(row_of(record, None, None))
                continue
            artifact = next(a for a in runnable if str(a.path) == record.artifact)
            found = accuracy.get(artifact.label)
            rows.append(row_of(record, artifact, found))
    return rows


# how a LatencyRecord's fields land in a Row: by name, except these. ``stats`` is the row's
# ``latency``; the others come from the artifact (describe_artifact) or from the explanations
# added after the pool (hints), never from the measurement
_RENAMED = {"stats": "latency"}
_NOT_COPIED = {"artifact", "size_bytes", "hints", "assumed"}


def row_of(
    record: LatencyRecord, artifact: Artifact | None, accuracy: AccuracyRecord | None
) -> Row:
    """The result row of one measurement, its fields copied from the record by name (its
    memory and latency fit, JSON in the record, built into their records)."""
    row_fields = {f.name for f in fields(Row)}
    copied = {
        _RENAMED.get(f.name, f.name): getattr(record, f.name)
        for f in fields(record)
        if _RENAMED.get(f.name, f.name) in row_fields and f.name not in _NOT_COPIED
    }
    comparable = record.traits.get("latency_comparable")
    row = Row.from_dict(
        {
            **copied,
            "kind": "artifact" if artifact is not None else "baseline",
            "target": record.target or "baseline",
            "recipe": record.recipe or "fp32",
            "warnings": list(record.warnings),
            "accuracy": accuracy,
            # a speed-up is a promise only where the device's latency is real
            "speedup": record.speedup if comparable else None,
            "speedup_ci": record.speedup_ci if comparable else None,
        }
    )
    if artifact is not None:
        describe_artifact(row, artifact)
    return row


def describe_artifact(row: Row, artifact: Artifact) -> None:
    manifest = artifact.manifest
    row.artifact = f"artifacts/{artifact.path.name}"
    if row.accuracy is not None:
        # where the file lies in the run directory, not where a pool (or node) evaluated it
        row.accuracy = replace(row.accuracy, artifact=row.artifact)
    row.size_bytes = manifest.file.size
    row.validation = manifest.validation
    row.coverage = None if not manifest.coverage else record_from(Coverage, manifest.coverage)
    row.export_warnings = manifest.warnings
    row.io_dtype = manifest.input.dtype
    row.keep_float = manifest.keep_float
    row.accuracy_aware = (
        None if manifest.accuracy_aware is None else record_from(AwareLoop, manifest.accuracy_aware)
    )
    row.assumed = artifact.assumed
    row.audit = manifest.audit


def failed_row(
    target: str,
    recipe: str,
    device: str | None,
    threads: int | None,
    error: EdgekitError,
    *,
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
        describe_artifact(row, artifact)
    return row
