"""What quantization changed, image by image: per-class top-1 and drop with intervals, the
confusion matrix's change, predictions flipped both ways, the flip rate by the source model's
top-2 margin, a label-free collapse detector, and which images flip on several artifacts.

Aggregate top-1 can stay put while answers flip in both directions (Dutta et al. 2024, "Accuracy
is Not All You Need"), and an int8 file that predicts one class for everything is a complaint
users file again and again; these figures say which images and which classes, with intervals."""

from __future__ import annotations

from dataclasses import asdict, replace
from itertools import combinations
from typing import Any

import numpy as np
from scipy import special, stats

from edgekit.common.stats import mcnemar_exact, paired_bootstrap_drop
from edgekit.records import ClassChange, Collapse, FlipPair, Flips, SharedFlips

MARGIN_BINS = 5
CORRECTION = "Benjamini-Hochberg across classes (scipy.stats.false_discovery_control)"


def per_class(
    outputs: np.ndarray,
    baseline: np.ndarray,
    labels: np.ndarray,
    names: tuple[str, ...],
    confidence: float = 0.95,
) -> list[ClassChange]:
    """Every class with images in the split, in class order."""
    artifact_correct = outputs.argmax(1) == labels
    baseline_correct = baseline.argmax(1) == labels
    changes = []
    for index in (index for index in range(len(names)) if np.any(labels == index)):
        mask = labels == index
        base, art = baseline_correct[mask], artifact_correct[mask]
        changes.append(
            ClassChange(
                name=names[index],
                images=int(mask.sum()),
                baseline_top1=float(base.mean()),
                top1=float(art.mean()),
                drop_points=100.0 * float(base.mean() - art.mean()),
                drop_ci=paired_bootstrap_drop(base, art, confidence),
                p_value=mcnemar_exact(base, art)["p_value"],
                p_adjusted=1.0,
            )
        )
    if not changes:
        return []
    adjusted = stats.false_discovery_control([change.p_value for change in changes])
    pairs = zip(changes, adjusted, strict=True)
    return [replace(change, p_adjusted=float(min(1.0, q))) for change, q in pairs]


def confusion_change(
    outputs: np.ndarray, baseline: np.ndarray, labels: np.ndarray, classes: int
) -> list[list[int]]:
    """The artifact's confusion matrix minus the source model's (rows: true class, columns:
    predicted): a positive entry off the diagonal is an error the artifact added."""

    def confusion(logits: np.ndarray) -> np.ndarray:
        matrix = np.zeros((classes, classes), dtype=np.int64)
        np.add.at(matrix, (labels, logits.argmax(1)), 1)
        return matrix

    return (confusion(outputs) - confusion(baseline)).tolist()


def _top2_margin(logits: np.ndarray) -> np.ndarray:
    """Softmax probability of the top class minus that of the second, per image."""
    top2 = np.sort(special.softmax(logits.astype(np.float64), axis=1), axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def flip_risk(
    flipped: np.ndarray, margin: np.ndarray, bins: int = MARGIN_BINS, confidence: float = 0.95
) -> list[dict[str, Any]]:
    """Flip rate in bins of the source's top-2 margin (quantile edges, so each bin holds about
    the same number of images), each rate with its Clopper-Pearson interval."""
    edges = np.unique(np.quantile(margin, np.linspace(0.0, 1.0, bins + 1)))
    if len(edges) < 2:
        edges = np.array([margin.min(), margin.max()])
    which = np.clip(np.searchsorted(edges, margin, side="right") - 1, 0, len(edges) - 2)
    curve = []
    for index in range(len(edges) - 1):
        inside = which == index
        images, count = int(inside.sum()), int(flipped[inside].sum())
        if images == 0:
            continue
        interval = stats.binomtest(count, images).proportion_ci(confidence)
        curve.append(
            {
                "margin_low": float(edges[index]),
                "margin_high": float(edges[index + 1]),
                "images": images,
                "flipped": count,
                "rate": count / images,
                "rate_ci": [float(interval.low), float(interval.high)],
            }
        )
    return curve


def flips(
    outputs: np.ndarray, baseline: np.ndarray, labels: np.ndarray, confidence: float = 0.95
) -> dict[str, Any]:
    """Top-1 changes against the source model, counted both ways, with McNemar's exact test,
    the images that changed (their indices in the evaluation split) and the flip-risk curve."""
    artifact_top, baseline_top = outputs.argmax(1), baseline.argmax(1)
    changed = artifact_top != baseline_top
    artifact_right, baseline_right = artifact_top == labels, baseline_top == labels
    found = Flips(
        samples=len(labels),
        changed=int(changed.sum()),
        right_to_wrong=int(np.sum(baseline_right & ~artifact_right)),
        wrong_to_right=int(np.sum(~baseline_right & artifact_right)),
        wrong_to_other_wrong=int(np.sum(changed & ~baseline_right & ~artifact_right)),
        mcnemar_p=mcnemar_exact(baseline_right, artifact_right)["p_value"],
        indices=np.flatnonzero(changed).tolist(),
        by_margin=flip_risk(changed, _top2_margin(baseline), confidence=confidence),
    )
    return asdict(found)


def collapse(
    outputs: np.ndarray, names: tuple[str, ...], baseline: np.ndarray | None = None
) -> Collapse:
    """One class for most inputs, or the same output for every input (``.collapsed``)."""
    predicted = outputs.argmax(1)
    counts = np.bincount(predicted, minlength=len(names))
    dominant = int(counts.argmax())
    values = outputs.astype(np.float64)
    return Collapse(
        dominant_class=names[dominant],
        dominant_share=float(counts[dominant] / len(predicted)),
        source_share=None if baseline is None else float(np.mean(baseline.argmax(1) == dominant)),
        classes=len(names),
        output_spread=float(values.std(axis=0).mean()),
        output_scale=float(np.abs(values).mean()),
    )


def shared_flips(flipped: dict[str, list[int]]) -> dict[str, Any]:
    """Do the same images flip? For each pair of artifacts (or devices), the images both
    flipped and the Jaccard overlap of their flipped sets; and the images every one flipped."""
    sets = {label: set(indices) for label, indices in flipped.items()}
    pairs = []
    for (first, a), (second, b) in combinations(sets.items(), 2):
        union = a | b
        jaccard = len(a & b) / len(union) if union else 1.0
        pairs.append(FlipPair(first, second, len(a & b), jaccard))
    every = set.intersection(*sets.values()) if sets else set()
    return asdict(SharedFlips(pairs, sorted(every)))
