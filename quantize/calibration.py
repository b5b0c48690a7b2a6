"""Calibration sampling: drawn from the dataset's calibration split, never the evaluation one."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from edgekit.errors import UserInputError
from edgekit.sources.data import Dataset, Split

DEFAULT_SAMPLES = 200
CALIBRATION_SEED = 7


@dataclass(frozen=True)
class CalibrationSet:
    x: np.ndarray  # NCHW float32
    digest: str
    dataset: str

    @property
    def size(self) -> int:
        return len(self.x)


def sample_calibration(dataset: Dataset, samples: int = DEFAULT_SAMPLES) -> CalibrationSet:
    if samples <= 0:
        raise UserInputError(
            f"{dataset.name}: --calibration-samples must be positive, got {samples}"
        )
    pool = dataset.calibration.x
    order = np.random.default_rng(CALIBRATION_SEED).permutation(len(pool))[:samples]
    x = np.ascontiguousarray(pool[np.sort(order)])
    return CalibrationSet(x, hashlib.sha256(x.tobytes()).hexdigest(), dataset.name)


def selection_slice(dataset: Dataset, calibration_samples: int = DEFAULT_SAMPLES) -> Split:
    """The calibration half's images that calibration did not draw: disjoint from both the
    calibration samples and the evaluation half, for choices (which layers to keep float) whose
    result the evaluation half then reports without bias."""
    pool = dataset.calibration
    drawn = np.random.default_rng(CALIBRATION_SEED).permutation(len(pool))[:calibration_samples]
    rest = np.setdiff1d(np.arange(len(pool)), drawn)
    return Split(np.ascontiguousarray(pool.x[rest]), pool.y[rest])
