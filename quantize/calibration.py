"""Calibration sampling: drawn from the dataset's calibration split, never the evaluation one."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from edgekit.data import Dataset
from edgekit.errors import UserInputError

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
