"""``edgekit eval``: an artifact and the baseline on the evaluation split, compared.

Top-1 (and top-5 with more than 5 classes) for both, the drop in points with a paired bootstrap
interval, McNemar's exact test, top-1 agreement, logit SQNR and abs diffs, and which classes
changed. On a device whose traits say ``compare_to_host`` (the emulated ARM64 core), also the
same artifact's logits there against the host's (``versus_host``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, as_artifact
from edgekit.common.metrics import compare_outputs, device_vs_host
from edgekit.common.stats import mcnemar_exact, paired_bootstrap_drop
from edgekit.devices import DEFAULT_DEVICE, as_device
from edgekit.errors import DeviceUnavailable, UserInputError
from edgekit.measure.flips import CORRECTION, collapse, confusion_change, flips, per_class
from edgekit.measure.gallery import flip_gallery
from edgekit.records import AccuracyRecord
from edgekit.sources.data import Dataset, load_dataset
from edgekit.sources.load import reload_model
from edgekit.sources.preprocess import Preprocess
from edgekit.sources.source import SourceModel

if TYPE_CHECKING:
    from edgekit.artifacts.foreign import ForeignOptions


def labels_only(outputs: np.ndarray, labels: np.ndarray, names: tuple[str, ...]) -> dict:
    """The figures of a file without a source model: top-1 (top-5) on the labels, no drop."""
    result: dict[str, Any] = {
        "samples": len(labels),
        "top1": top_k(outputs, labels, 1),
        "baseline_top1": None,
        "drop_points": None,
        "drop_ci": None,
        "confidence": 0.95,
        "agreement": None,
        "sqnr_db": None,
        "max_abs_diff": None,
        "mean_abs_diff": None,
        "mcnemar": None,
        "baseline": "none: a file another tool made has no source model here",
        "reference": "labels",
        "collapse": collapse(outputs, names).to_dict(),
    }
    if len(names) > 5:
        result["top5"] = top_k(outputs, labels, 5)
    return result


def top_k(logits: np.ndarray, labels: np.ndarray, k: int) -> float:
    # stable: a tie (int8 logits are steps) goes to the lowest class index, as argmax does
    best = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    return float(np.mean(np.any(best == labels[:, None], axis=1)))


def compare_on_labels(
    outputs: np.ndarray,
    baseline: np.ndarray,
    labels: np.ndarray,
    class_names: tuple[str, ...],
    confidence: float = 0.95,
    images: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every accuracy figure of ``outputs`` against ``baseline`` logits on ``labels``; with
    the evaluated ``images``, the flipped ones as a gallery (edgekit.measure.gallery)."""
    artifact_correct = outputs.argmax(1) == labels
    baseline_correct = baseline.argmax(1) == labels
    figures = compare_outputs(baseline, outputs)
    low, high = paired_bootstrap_drop(baseline_correct, artifact_correct, confidence)
    result: dict[str, Any] = {
        "samples": len(labels),
        "top1": float(artifact_correct.mean()),
        "baseline_top1": float(baseline_correct.mean()),
        "drop_points": 100.0 * float(baseline_correct.mean() - artifact_correct.mean()),
        "drop_ci": (low, high),
        "confidence": confidence,
        "agreement": figures["top1_agreement"],
        "sqnr_db": figures["sqnr_db"],
        "max_abs_diff": figures["max_abs_diff"],
        "mean_abs_diff": figures["mean_abs_diff"],
        "mcnemar": mcnemar_exact(baseline_correct, artifact_correct),
        "changed_classes": _changed_classes(outputs, baseline, labels, class_names),
        "per_class": [
            c.to_dict() for c in per_class(outputs, baseline, labels, class_names, confidence)
        ],
        "per_class_correction": CORRECTION,
        "confusion_change": confusion_change(outputs, baseline, labels, len(class_names)),
        "flips": flips(outputs, baseline, labels, confidence),
        "collapse": collapse(outputs, class_names, baseline).to_dict(),
    }
    if images is not None:
        result["gallery"] = flip_gallery(outputs, baseline, labels, images, class_names)
    if len(class_names) > 5:
        result["top5"] = top_k(outputs, labels, 5)
        result["baseline_top5"] = top_k(baseline, labels, 5)
    return result


def _changed_classes(
    outputs: np.ndarray, baseline: np.ndarray, labels: np.ndarray, names: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Per true class: images the baseline and the artifact get right, where they differ."""
    rows = []
    for index, name in enumerate(names):
        mask = labels == index
        if not mask.any():
            continue
        base = int(np.sum(baseline[mask].argmax(1) == index))
        art = int(np.sum(outputs[mask].argmax(1) == index))
        flipped = int(np.sum(baseline[mask].argmax(1) != outputs[mask].argmax(1)))
        if base != art or flipped:
            rows.append(
                {
                    "class": name,
                    "images": int(mask.sum()),
                    "baseline_correct": base,
                    "artifact_correct": art,
                    "predictions_changed": flipped,
                }
            )
    return rows


def source_for(artifact: Artifact) -> SourceModel:
    """Reload the artifact's source model (the baseline) and check it is the one exported."""
    source_info = artifact.manifest.source
    if source_info is None:
        raise UserInputError(f"{artifact.path}: its manifest names no source model")
    try:
        source = reload_model(source_info.to_dict())
    except UserInputError as exc:
        raise UserInputError(
            f"{artifact.path}: cannot load its source model for the baseline ({exc})"
        ) from None
    if source.digest != source_info.digest:
        raise UserInputError(
            f"{artifact.path}: its source model {source_info.spec} changed since export "
            f"(digest {source.digest[:12]} vs {source_info.digest[:12]}); re-export"
        )
    return source


def dataset_for(artifact: Artifact, data: str) -> Dataset:
    preprocess = Preprocess.from_dict(artifact.manifest.preprocessing)
    return load_dataset(data, preprocess)


def evaluate_artifact(
    path: str | Artifact,
    *,
    data: str = "digits",
    device: str | Any = DEFAULT_DEVICE,
    threads: int = 1,
    confidence: float = 0.95,
    limit: int | None = None,
    source: SourceModel | None = None,
    dataset: Dataset | None = None,
    host_logits: np.ndarray | None = None,
) -> AccuracyRecord:
    """Run the evaluation split through the artifact on ``device`` (a name or a Device) and
    through the baseline.

    ``source`` and ``dataset`` let a caller that already holds them (``edgekit run``) skip
    reloading; the source must be the one the artifact was exported from. ``host_logits``
    replaces the host reference of a compare-to-host device (tests perturb it). The source's
    logits on a split are computed once per process (``SourceModel.predict``)."""
    from edgekit.common.machine import fingerprint
    from edgekit.targets import runtime_versions

    artifact = as_artifact(path)
    if not artifact.classifier:
        raise UserInputError(
            f"{artifact.path}: accuracy is out of scope: "
            f"{artifact.manifest.not_a_classifier} (edgekit bench still measures "
            "its latency)"
        )
    device = as_device(device)
    reason = device.why_unavailable(artifact)
    if reason:
        raise DeviceUnavailable(f"{artifact.path.name} on {device.name}: {reason}")
    if artifact.foreign:
        source = None
    elif source is None or source.digest != getattr(artifact.manifest.source, "digest", None):
        source = source_for(artifact)
    if dataset is None:
        dataset = dataset_for(artifact, data)
    classes = len(artifact.manifest.preprocessing["class_names"])
    if dataset.num_classes != classes:
        raise UserInputError(
            f"{dataset.name}: dataset has {dataset.num_classes} classes, {artifact.path.name} "
            f"has {classes} outputs"
        )
    split = dataset.evaluation
    x, y = (split.x, split.y) if limit is None else (split.x[:limit], split.y[:limit])
    outputs, runtime = device.predict(artifact, x, threads)
    if source is None:
        figures = labels_only(outputs, y, dataset.class_names)
    else:
        reference = source.predict(x)
        figures = compare_on_labels(
            outputs, reference, y, dataset.class_names, confidence, images=x
        )
    versus = None
    if device.traits(runtime).compare_to_host:
        if host_logits is None:
            host_logits, reference = device.host_reference(artifact, x, threads)
        else:
            reference = "given by the caller"
        versus = dict(device_vs_host(outputs, np.asarray(host_logits)), reference=reference)
        versus["kernels"] = str(runtime.get("kernels", ""))
    return AccuracyRecord(
        artifact=str(artifact.path),
        label=artifact.label + device.label_suffix(runtime),
        device=device.name,
        dataset=dataset.name,
        **figures,
        runtime=runtime,
        versus_host=versus,
        fingerprint=fingerprint(threads, runtime_versions()),
        assumed=artifact.assumed,
    )


def evaluate_source(
    spec: str,
    *,
    data: str = "digits",
    foreign: ForeignOptions | None = None,
    weights: str | Path | None = None,
) -> dict[str, Any]:
    """The source model alone on the evaluation split (``edgekit eval`` with no artifact)."""
    from edgekit.sources.load import load_model

    source = load_model(spec, weights=weights, foreign=foreign, data=data)
    dataset = load_dataset(data, source.preprocess)
    logits = source.predict(dataset.evaluation.x)
    result = {
        "model": source.name,
        "dataset": dataset.name,
        "samples": len(dataset.evaluation),
        "top1": top_k(logits, dataset.evaluation.y, 1),
        "digest": source.digest,
    }
    if dataset.num_classes > 5:
        result["top5"] = top_k(logits, dataset.evaluation.y, 5)
    return result
