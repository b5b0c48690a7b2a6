"""Which of the user's images go into a bundle: the ones the artifact is least sure of (the
smallest top-2 margins, where a preprocessing slip flips the answer first: a parity check on
random inputs passed a .pte that real images caught, roboflow/rf-detr #1233), then one per
class in turn, so every class has an image."""

from __future__ import annotations

import numpy as np


def top2_margins(logits: np.ndarray) -> np.ndarray:
    """The softmax probability of the top class minus the runner-up's, per image."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    ordered = np.sort(probabilities, axis=1)
    return ordered[:, -1] - (ordered[:, -2] if logits.shape[1] > 1 else 0.0)


def choose_images(logits: np.ndarray, labels: np.ndarray, count: int) -> list[int]:
    """``count`` indices: half of them (rounded up) the smallest margins, then one image per
    class in turn (in the dataset's evaluation order) until ``count``."""
    count = min(count, len(labels))
    margins = top2_margins(np.asarray(logits, np.float64))
    chosen = [int(i) for i in np.argsort(margins, kind="stable")[: (count + 1) // 2]]
    taken = set(chosen)
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        if index not in taken:
            by_class.setdefault(int(label), []).append(index)
    while len(chosen) < count:
        for label in sorted(by_class):
            if by_class[label] and len(chosen) < count:
                chosen.append(by_class[label].pop(0))
    return chosen
