"""``edgekit export --int8 --max-drop POINTS``: int8 with automatic fp32 fallback, per layer.

Quantize everything, measure the top-1 drop on the evaluation split on the real runtime; while it
is over budget, keep the next most harmful layer (:mod:`edgekit.quantize.debug`'s ranking) float
and re-export. A layer is kept float together with its consumers, because its output tensor is
only float when both its producer and every reader are. Each step is re-measured (accuracy on
the runtime in a child process, latency with a short protocol: every float island adds
quantize/dequantize boundaries), and the manifest of the artifact returned records them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgekit.artifact import Artifact, load_artifact, manifest_path
from edgekit.data import Dataset
from edgekit.errors import ExportRejected, UserInputError
from edgekit.fileio import write_json_atomic
from edgekit.models import SourceModel

DEFAULT_MAX_STEPS = 4
STEPS_DIR = ".accuracy-aware"


@dataclass
class Step:
    """One export of the loop: what was kept float and what it measured."""

    step: int
    keep_float: list[str]
    top1: float
    baseline_top1: float
    drop_points: float
    drop_ci: list[float]
    sqnr_db: float
    agreement: float
    int8_fraction: float | None
    p50_ms: float | None
    validation_passed: bool
    latency_status: str = "ok"
    added: list[str] = field(default_factory=list)  # the float island this step added


@dataclass
class AccuracyAwareResult:
    artifact: Artifact
    steps: list[Step]
    within_budget: bool
    max_drop_points: float
    warnings: list[str] = field(default_factory=list)

    @property
    def keep_float(self) -> list[str]:
        return list(self.artifact.manifest.get("keep_float", []))


def precision_label(manifest: dict[str, Any]) -> str:
    """``int8``, or ``int8 (2 layers float)`` for an artifact with float islands (manifest or
    results row: reads ``recipe`` and ``keep_float``)."""
    recipe = str(manifest.get("recipe", ""))
    kept = manifest.get("keep_float") or (manifest.get("details") or {}).get("keep_float") or []
    if not kept:
        return recipe
    return f"{recipe} ({len(kept)} layer{'s' if len(kept) != 1 else ''} float)"


def int8_fraction_text(manifest: dict[str, Any]) -> str:
    """``91 % int8`` from the manifest's coverage (empty when not quantized)."""
    fraction = (manifest.get("coverage") or {}).get("int8_fraction")
    return "" if fraction is None else f"{100 * fraction:.0f} % int8"


def export_accuracy_aware(
    source: SourceModel,
    dataset: Dataset,
    target: str,
    max_drop: float,
    out_dir: Path,
    calibration_samples: int = 200,
    max_steps: int = DEFAULT_MAX_STEPS,
    eval_limit: int | None = None,
    ranking: list[str] | None = None,
    bench_protocol: Any = None,
    bench_guard: Any = None,
    bench: bool = True,
    validation_samples: int = 200,
) -> AccuracyAwareResult:
    """int8 for ``target`` within ``max_drop`` top-1 points of ``source``, if ``max_steps``
    float islands suffice; otherwise the step with the smallest drop (``within_budget`` False).

    ``ranking`` (most harmful first) defaults to :func:`edgekit.quantize.debug.analyze` on the
    calibration samples; ``eval_limit`` caps the evaluation images (all by default);
    ``validation_samples`` is each export's own validation (the drop is measured on all).
    """
    from edgekit.quantize.calibration import sample_calibration
    from edgekit.quantize.debug import consumers, find_layers, float_island

    if max_drop < 0:
        raise UserInputError(f"--max-drop must be >= 0 points, got {max_drop}")
    if source.framework != "torch":
        raise UserInputError(
            f"--max-drop: {source.name} is a {source.framework} model; float islands are chosen "
            "by torch module path"
        )
    names = [layer.name for layer in find_layers(source.module)]
    if ranking is None:
        from edgekit.quantize.debug import analyze

        calibration = sample_calibration(dataset, calibration_samples).x
        ranking = analyze(source, calibration, crosscheck=False).ranking()
    readers = consumers(source.module, source.example_input(), names)
    split = dataset.evaluation
    x, y = (
        (split.x, split.y) if eval_limit is None else (split.x[:eval_limit], split.y[:eval_limit])
    )
    baseline = source.predict(x)

    out_dir = Path(out_dir)
    scratch = out_dir / STEPS_DIR
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
            artifact = _export_step(source, dataset, target, keep, scratch / f"step{index}",
                                    calibration_samples, validation_samples)  # fmt: skip
            step = _measure(artifact, x, y, baseline, dataset, index, keep, added)
            if bench:
                _bench(step, artifact, x, bench_protocol, bench_guard)
            steps.append(step)
            artifacts.append(artifact)
            if step.drop_points <= max_drop and step.validation_passed:
                break
        chosen = _choose(steps, max_drop)
        final = _promote(artifacts[chosen], out_dir, steps, chosen, max_drop)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    within = steps[chosen].drop_points <= max_drop
    warnings = []
    if not within:
        warnings.append(
            f"--max-drop {max_drop:g}: still {steps[chosen].drop_points:.2f} points after "
            f"{len(steps) - 1} float island(s) (step limit {max_steps}); kept the best step"
        )
    return AccuracyAwareResult(final, steps, within, max_drop, warnings)


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
    calibration_samples: int,
    validation_samples: int,
) -> Artifact:
    """Export int8 with ``keep`` float; a validation failure still gives a measurable file."""
    from edgekit.export import export_artifact

    try:
        return export_artifact(
            source, dataset, target, "int8", directory, calibration_samples,
            keep_float=tuple(keep), validation_samples=validation_samples,
        ).artifact  # fmt: skip
    except ExportRejected as exc:
        rejected = next(directory.glob("*.rejected"), None)
        if rejected is None:
            raise
        artifact = load_artifact(rejected)
        artifact.manifest.setdefault("warnings", []).append(str(exc))
        return artifact


def _measure(
    artifact: Artifact,
    x: Any,
    y: Any,
    baseline: Any,
    dataset: Dataset,
    index: int,
    keep: list[str],
    added: list[str],
) -> Step:
    from edgekit.accuracy import compare_on_labels
    from edgekit.bench import predict_in_child

    outputs, _runtime = predict_in_child(artifact.path, x, "cpu", 1)
    figures = compare_on_labels(outputs, baseline, y, dataset.class_names)
    return Step(
        step=index,
        keep_float=list(keep),
        top1=figures["top1"],
        baseline_top1=figures["baseline_top1"],
        drop_points=figures["drop_points"],
        drop_ci=[float(v) for v in figures["drop_ci"]],
        sqnr_db=float(figures["sqnr_db"]),
        agreement=float(figures["agreement"]),
        int8_fraction=(artifact.manifest.get("coverage") or {}).get("int8_fraction"),
        p50_ms=None,
        validation_passed=bool(artifact.manifest["validation"]["passed"]),
        added=list(added),
    )


def _bench(step: Step, artifact: Artifact, x: Any, protocol: Any, guard: Any) -> None:
    from edgekit.bench import NoiseGuard, Protocol, bench_artifact

    protocol = protocol or Protocol(warmup=5, min_runs=30, min_seconds=0.3, max_seconds=5.0)
    guard = guard or NoiseGuard(retries=0, settle_max_s=5.0)
    record = bench_artifact(artifact.path, "cpu", 1, protocol, guard, sample=x[:1], timeout_s=120)
    step.latency_status = record.status if not record.disturbed else "disturbed"
    step.p50_ms = record.stats.get("p50_ms") if record.status == "ok" else None


def _choose(steps: list[Step], max_drop: float) -> int:
    """The first step within budget that passed validation, else the smallest drop."""
    for step in steps:
        if step.drop_points <= max_drop and step.validation_passed:
            return step.step
    return min(steps, key=lambda s: (not s.validation_passed, s.drop_points)).step


def _promote(
    artifact: Artifact, out_dir: Path, steps: list[Step], chosen: int, max_drop: float
) -> Artifact:
    """Move the chosen step's file beside the others and record the loop in its manifest."""
    name = artifact.path.name
    destination = out_dir / name
    manifest = dict(artifact.manifest)
    manifest["keep_float"] = list(steps[chosen].keep_float)
    manifest["accuracy_aware"] = {
        "max_drop_points": max_drop,
        "within_budget": steps[chosen].drop_points <= max_drop,
        "chosen_step": chosen,
        "split": "evaluation",
        "steps": [asdict(step) for step in steps],
    }
    manifest["file"] = {**manifest["file"], "name": destination.name}
    os.replace(artifact.path, destination)
    manifest_path(artifact.path).unlink(missing_ok=True)
    write_json_atomic(manifest_path(destination), manifest)
    return Artifact(destination, manifest)
