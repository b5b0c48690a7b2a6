"""``edgekit export --int8 --max-drop POINTS``: int8 with automatic fp32 fallback, per layer.

Quantize everything and measure the top-1 drop on the real runtime; while the upper end of the
drop's 95 % interval (or the drop itself, ``point_estimate``) is over budget, keep the next most
harmful layer (``edgekit.quantize.sensitivity.analyze``'s ranking) float and re-export.
A layer is kept float together with its consumers, because its output tensor is only float
when both its producer and every reader are.

The loop *chooses* on a selection slice: the calibration half's images that calibration did
not draw. The chosen artifact's drop is then *reported* on the evaluation half, which played no
part in the choice (choosing on the images that report the result overstates it). At the end
every step's artifact is timed interleaved with step 0, so the price of each float island is a
ratio with an interval. The manifest of the artifact returned records all of it."""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, load_artifact, manifest_path
from edgekit.common.budget import DropBudget
from edgekit.common.fileio import journal, write_json_atomic
from edgekit.devices import DEFAULT_DEVICE, get_device
from edgekit.errors import ExportRejected, UserInputError
from edgekit.measure.accuracy import compare_on_labels
from edgekit.records import AwareLoop, Step
from edgekit.sources.data import Dataset, Split
from edgekit.sources.source import SourceModel
from edgekit.worker.latency import LatencyProtocol, NoiseGuard

DEFAULT_MAX_STEPS = 4
STEPS_DIR = ".accuracy-aware"
# two sessions of a fixed plan: the steps' ratios are advice beside the drop, not a decision
STEP_PROTOCOL = LatencyProtocol(
    warmup=5, min_runs=30, min_seconds=0.3, max_seconds=10.0, rounds=8, sessions=2, precision=None
)


@dataclass
class AccuracyAwareResult:
    artifact: Artifact
    steps: list[Step]
    within_budget: bool
    max_drop_points: float
    evaluation: dict[str, Any]  # the chosen step on the evaluation half
    warnings: list[str] = field(default_factory=list)

    @property
    def keep_float(self) -> list[str]:
        return self.artifact.manifest.keep_float


def export_accuracy_aware(
    source: SourceModel,
    dataset: Dataset,
    target: str,
    max_drop: float,
    out_dir: Path,
    *,
    calibration_samples: int = 200,
    max_steps: int = DEFAULT_MAX_STEPS,
    ranking: list[str] | None = None,
    bench: bool = True,
    validation_samples: int = 200,
    point_estimate: bool = False,
    bench_protocol: LatencyProtocol | None = None,
    bench_guard: NoiseGuard | None = None,
) -> AccuracyAwareResult:
    """int8 for ``target`` within ``max_drop`` top-1 points of ``source``, if ``max_steps``
    float islands suffice; otherwise the step with the smallest drop (``within_budget`` False).

    ``ranking`` (most harmful first) defaults to the sensitivity analysis on the calibration
    samples; ``validation_samples`` is each export's own validation."""
    from edgekit.quantize.calibration import sample_calibration, selection_slice
    from edgekit.quantize.layers import consumers, find_layers, float_island

    if max_drop < 0:
        raise UserInputError(f"--max-drop must be >= 0 points, got {max_drop}")
    budget = DropBudget.of(max_drop, point_estimate=point_estimate)
    if source.framework != "torch":
        raise UserInputError(
            f"--max-drop: {source.name} is a {source.framework} model; float islands are chosen "
            "by torch module path"
        )
    names = [layer.name for layer in find_layers(source.module)]
    if ranking is None:
        from edgekit.quantize.sensitivity import analyze

        ranking = analyze(source, sample_calibration(dataset, calibration_samples).x).ranking()
    readers = consumers(source.module, source.example_input(), names)
    selection = selection_slice(dataset, calibration_samples)
    if len(selection) < 2:
        raise UserInputError(
            f"{dataset.name}: no images left for choosing float layers once calibration drew "
            f"{calibration_samples}; use fewer --calibration-samples"
        )
    baseline = source.predict(selection.x)
    scratch = Path(out_dir) / STEPS_DIR
    journal(scratch)
    steps: list[Step] = []
    artifacts: list[Artifact] = []
    keep: list[str] = []
    candidates = list(ranking)
    try:
        for index in range(max_steps + 1):
            added: list[str] = []
            if index:
                island = _next_island(candidates, keep, readers, float_island)
                if island is None:
                    break  # every ranked layer is float already
                added = [name for name in island if name not in keep]
                keep += added
            artifact = _export_step(
                source,
                dataset,
                target,
                keep,
                scratch / f"step{index}",
                calibration_samples=calibration_samples,
                validation_samples=validation_samples,
            )
            step = _measure(
                artifact, selection, baseline, dataset, index=index, keep=keep, added=added
            )
            steps.append(step)
            artifacts.append(artifact)
            if not budget.over(step.drop_points, step.drop_ci[1]) and step.validation_passed:
                break
        if bench:
            _bench_steps(steps, artifacts, selection, bench_protocol, bench_guard)
        chosen = _choose(steps, budget)
        evaluation = _evaluate(artifacts[chosen], source, dataset)
        within = not budget.over(evaluation["drop_points"], evaluation["drop_ci"][1])
        final = _promote(
            artifacts[chosen],
            Path(out_dir),
            steps,
            chosen,
            budget=budget,
            evaluation=evaluation,
            within=within,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    warnings = []
    if not within:
        warnings.append(
            f"--max-drop {max_drop:g}: the chosen step's drop on the evaluation split is "
            f"{evaluation['drop_points']:+.2f} [{evaluation['drop_ci'][0]:+.2f}, "
            f"{evaluation['drop_ci'][1]:+.2f}] after {len(steps) - 1} float island(s) (step "
            f"limit {max_steps}); kept the best step"
        )
    return AccuracyAwareResult(final, steps, within, max_drop, evaluation, warnings)


def _next_island(
    candidates: list[str], keep: list[str], readers: dict[str, list[str]], island: Any
) -> list[str] | None:
    """The float island of the most harmful layer not float yet."""
    while candidates:
        layer = candidates.pop(0)
        if layer not in keep:
            return island(layer, readers)
    return None


def _export_step(
    source: SourceModel,
    dataset: Dataset,
    target: str,
    keep: list[str],
    directory: Path,
    *,
    calibration_samples: int,
    validation_samples: int,
) -> Artifact:
    """Export int8 with ``keep`` float; a validation failure still gives a measurable file."""
    from edgekit.export.pipeline import export_artifact

    try:
        return export_artifact(
            source,
            dataset,
            target,
            "int8",
            out_dir=directory,
            calibration_samples=calibration_samples,
            keep_float=tuple(keep),
            validation_samples=validation_samples,
        ).artifact
    except ExportRejected as exc:
        rejected = next(directory.glob("*.rejected"), None)
        if rejected is None:
            raise
        artifact = load_artifact(rejected)
        warned = artifact.manifest.replace(warnings=[*artifact.manifest.warnings, str(exc)])
        return Artifact(artifact.path, warned)


def _measure(
    artifact: Artifact,
    split: Split,
    baseline: np.ndarray,
    dataset: Dataset,
    *,
    index: int,
    keep: list[str],
    added: list[str],
) -> Step:
    outputs, _runtime = get_device(DEFAULT_DEVICE).predict(artifact, split.x, 1)
    figures = compare_on_labels(outputs, baseline, split.y, dataset.class_names)
    return Step(
        step=index,
        keep_float=list(keep),
        top1=figures["top1"],
        baseline_top1=figures["baseline_top1"],
        drop_points=figures["drop_points"],
        drop_ci=[float(v) for v in figures["drop_ci"]],
        sqnr_db=float(figures["sqnr_db"]),
        agreement=float(figures["agreement"]),
        int8_fraction=(artifact.manifest.coverage or {}).get("int8_fraction"),
        p50_ms=None,
        validation_passed=bool((artifact.manifest.validation or {}).get("passed")),
        added=list(added),
    )


def _bench_steps(
    steps: list[Step],
    artifacts: list[Artifact],
    split: Split,
    protocol: LatencyProtocol | None,
    guard: NoiseGuard | None,
) -> None:
    """Every step's artifact, interleaved: the cost of each float island against step 0."""
    from edgekit.measure.bench import measure_interleaved
    from edgekit.worker.latency import LatencyRecord

    device = get_device(DEFAULT_DEVICE)
    protocol = protocol or STEP_PROTOCOL
    guard = guard or NoiseGuard(retries=0, settle_max_s=5.0)
    timers = [device.timer(a, 1, split.x[:1], protocol, 120.0) for a in artifacts]
    records = [LatencyRecord.for_artifact(a, device.name, 1) for a in artifacts]
    try:
        result = measure_interleaved(timers, records, protocol, guard)
    finally:
        for timer in timers:
            timer.close()
    for side, (step, record) in enumerate(zip(steps, records, strict=True)):
        step.latency_status = record.status if not record.disturbed else "disturbed"
        step.p50_ms = record.stats.get("p50_ms") if record.status == "ok" else None
        if record.status == "ok" and records[0].status == "ok":
            ratio, (low, high) = result.ratio(side, 0)
            step.ratio_to_first, step.ratio_ci = ratio, [low, high]


def _choose(steps: list[Step], budget: DropBudget) -> int:
    """The first step within budget that passed validation, else the smallest drop."""
    for step in steps:
        if not budget.over(step.drop_points, step.drop_ci[1]) and step.validation_passed:
            return step.step
    return min(steps, key=lambda s: (not s.validation_passed, s.drop_ci[1])).step


def _evaluate(artifact: Artifact, source: SourceModel, dataset: Dataset) -> dict[str, Any]:
    """The chosen artifact on the evaluation half: the figures the user is told."""
    split = dataset.evaluation
    outputs, _runtime = get_device(DEFAULT_DEVICE).predict(artifact, split.x, 1)
    figures = compare_on_labels(outputs, source.predict(split.x), split.y, dataset.class_names)
    return {
        "split": "evaluation",
        "samples": figures["samples"],
        "top1": figures["top1"],
        "drop_points": figures["drop_points"],
        "drop_ci": [float(v) for v in figures["drop_ci"]],
        "agreement": figures["agreement"],
    }


def _promote(
    artifact: Artifact,
    out_dir: Path,
    steps: list[Step],
    chosen: int,
    *,
    budget: DropBudget,
    evaluation: dict[str, Any],
    within: bool,
) -> Artifact:
    """Move the chosen step's file beside the others and record the loop in its manifest."""
    destination = out_dir / artifact.path.name
    record = AwareLoop(
        max_drop_points=budget.points,
        within_budget=within,
        chosen_step=chosen,
        steps=steps,
        rule=budget.rule,
        selection_split="calibration half, images calibration did not draw",
    )
    # the evaluation as _evaluate wrote it (its drop_ci a list, as JSON keeps it)
    loop = {**asdict(record), "evaluation": evaluation}
    manifest = artifact.manifest.replace(
        keep_float=list(steps[chosen].keep_float),
        accuracy_aware=loop,
        file={**artifact.manifest.to_dict()["file"], "name": destination.name},
    )
    os.replace(artifact.path, destination)
    manifest_path(artifact.path).unlink(missing_ok=True)
    write_json_atomic(manifest_path(destination), manifest.to_dict())
    return Artifact(destination, manifest)
