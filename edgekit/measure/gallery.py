"""The flipped images themselves, for the report's gallery: a small PNG of each (as the model
saw it, after preprocessing), its true class, and each side's three most likely classes.

Kept in results.json with the accuracy figures, so that ``edgekit report`` rebuilds the gallery
from the run's files alone, without the dataset. Images that went from right to wrong come
first, then the other flips; at most ``LIMIT`` per artifact, so the file stays small."""

from __future__ import annotations

import base64
import io
from dataclasses import asdict
from typing import Any

import numpy as np
from scipy import special

from edgekit.records import FlippedImage

LIMIT = 12
THUMBNAIL_PX = 64  # the longer side; digits' 32 px are doubled, larger images shrink


def top3(logits: np.ndarray, names: tuple[str, ...]) -> list[list[Any]]:
    """[[class name, softmax probability], ...] for the three most likely classes."""
    probabilities = special.softmax(logits.astype(np.float64))
    order = np.argsort(-probabilities, kind="stable")[:3]
    return [[names[int(i)], round(float(probabilities[i]), 4)] for i in order]


def thumbnail_png(image: np.ndarray) -> str:
    """A base64 PNG of one preprocessed CHW (or HW) image, each image stretched to its own
    value range: the network's input as a picture, not the original photograph."""
    from PIL import Image

    pixels = np.asarray(image, dtype=np.float64)
    if pixels.ndim == 3:
        pixels = pixels[0] if pixels.shape[0] == 1 else np.moveaxis(pixels[:3], 0, -1)
    low, high = float(pixels.min()), float(pixels.max())
    scaled = np.zeros_like(pixels) if high <= low else (pixels - low) / (high - low)
    picture = Image.fromarray(np.round(255 * scaled).astype(np.uint8))
    factor = THUMBNAIL_PX / max(picture.size)
    size = tuple(max(1, round(side * factor)) for side in picture.size)
    resample = Image.Resampling.NEAREST if factor >= 1 else Image.Resampling.BILINEAR
    buffer = io.BytesIO()
    picture.resize(size, resample).save(buffer, format="PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode()


def flip_gallery(
    outputs: np.ndarray,
    baseline: np.ndarray,
    labels: np.ndarray,
    images: np.ndarray,
    names: tuple[str, ...],
    limit: int = LIMIT,
) -> list[dict[str, Any]]:
    """The flipped images (top-1 differs from the source model's), right-to-wrong first."""
    artifact_top, baseline_top = outputs.argmax(1), baseline.argmax(1)
    changed = np.flatnonzero(artifact_top != baseline_top)
    became_wrong = baseline_top[changed] == labels[changed]
    chosen = [*changed[became_wrong], *changed[~became_wrong]][:limit]

    def way(i: int) -> str:
        if baseline_top[i] == labels[i]:
            return "right to wrong"
        return "wrong to right" if artifact_top[i] == labels[i] else "wrong to another wrong"

    return [
        asdict(
            FlippedImage(
                index=int(i),
                label=names[int(labels[i])],
                way=way(i),
                source_top3=top3(baseline[i], names),
                artifact_top3=top3(outputs[i], names),
                png=thumbnail_png(images[i]),
            )
        )
        for i in chosen
    ]
