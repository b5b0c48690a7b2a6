"""Shared fixtures: the default classifier and its dataset, loaded once per test session."""

from __future__ import annotations

import os
import warnings

import pytest

warnings.filterwarnings("ignore", category=FutureWarning)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(scope="session")
def digits_model():
    from edgekit.models import load_model

    return load_model("digits-mobilenet", quiet=True)


@pytest.fixture(scope="session")
def digits_data(digits_model):
    from edgekit.data import load_dataset

    return load_dataset("digits", digits_model.preprocess)


@pytest.fixture(scope="session")
def calibration(digits_data):
    from edgekit.quantize.calibration import sample_calibration

    return sample_calibration(digits_data, 200)
