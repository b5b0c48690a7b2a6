"""pytest plugin and helpers for a user's own accuracy regression tests.

Registered through the ``pytest11`` entry point, so ``pip install edgekit`` is enough::

    from edgekit.testing import assert_accuracy_drop, assert_class_drop, assert_flips

    def test_int8_tflite_keeps_its_accuracy():
        assert_accuracy_drop("artifacts/model-int8.tflite", data="digits", max_drop=1.0)

    def test_no_class_loses_more_than_five_points_and_few_answers_flip():
        assert_class_drop("artifacts/model-int8.tflite", max_class_drop=5.0)
        assert_flips("artifacts/model-int8.tflite", max_flips="1%")

or with the fixture, which caches evaluations across tests::

    def test_agreement(edgekit_eval):
        assert edgekit_eval("artifacts/model-int8.tflite").agreement >= 0.98
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from edgekit.devices import DEFAULT_DEVICE

if TYPE_CHECKING:
    from edgekit.measure.prediction_gates import PredictionBounds
    from edgekit.records import AccuracyRecord


def assert_accuracy_drop(
    artifact: str | Path,
    *,
    data: str = "digits",
    max_drop: float = 1.0,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    device: str = DEFAULT_DEVICE,
    point_estimate: bool = False,
) -> Any:
    """Evaluate ``artifact`` against its baseline and fail the test when a gate does not hold.

    Returns the ``edgekit.measure.accuracy.AccuracyRecord`` so a test can assert more."""
    from edgekit.measure.accuracy import evaluate_artifact

    record = evaluate_artifact(str(artifact), data=data, device=device)
    check_record(record, max_drop, min_agreement, min_sqnr, point_estimate=point_estimate)
    return record


def check_record(
    record: AccuracyRecord,
    max_drop: float | None = None,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    *,
    point_estimate: bool = False,
) -> None:
    """Raise AssertionError with the gate table when any bound does not hold."""
    from edgekit.measure.gates import accuracy_gates, format_gates

    results = accuracy_gates(
        record, max_drop, min_agreement, min_sqnr, point_estimate=point_estimate
    )
    if not all(result.passed for result in results):
        __tracebackhide__ = True
        raise AssertionError("edgekit accuracy gate failed:\n" + format_gates(results))


def assert_class_drop(
    artifact: str | Path,
    *,
    data: str = "digits",
    max_class_drop: float = 5.0,
    device: str = DEFAULT_DEVICE,
    point_estimate: bool = False,
) -> Any:
    """Fail when any one class's drop (the upper end of its 95 % interval, unless
    ``point_estimate``) exceeds ``max_class_drop`` points; the message names the class."""
    from edgekit.measure.prediction_gates import PredictionBounds

    bounds = PredictionBounds(max_class_drop=max_class_drop, point_estimate=point_estimate)
    return _assert_predictions(artifact, data, device, bounds)


def assert_flips(
    artifact: str | Path,
    *,
    data: str = "digits",
    max_flips: int | str = 0,
    device: str = DEFAULT_DEVICE,
    fail_on_collapse: bool = True,
) -> Any:
    """Fail when more than ``max_flips`` top-1 predictions (a count, or a share such as
    ``"2%"``) changed against the source model, or, by default, when the artifact collapsed."""
    from edgekit.measure.prediction_gates import FlipBound, PredictionBounds

    bounds = PredictionBounds(
        max_flips=FlipBound.parse(str(max_flips)), fail_on_collapse=fail_on_collapse
    )
    return _assert_predictions(artifact, data, device, bounds)


def _assert_predictions(
    artifact: str | Path, data: str, device: str, bounds: PredictionBounds
) -> Any:
    from edgekit.measure.accuracy import evaluate_artifact
    from edgekit.measure.gates import format_gates
    from edgekit.measure.prediction_gates import prediction_gates

    record = evaluate_artifact(str(artifact), data=data, device=device)
    results = prediction_gates(record, bounds)
    if not all(result.passed for result in results):
        __tracebackhide__ = True
        raise AssertionError("edgekit prediction gate failed:\n" + format_gates(results))
    return record


@pytest.fixture(scope="session")
def edgekit_eval() -> Callable[..., Any]:
    """``edgekit_eval(artifact, data="digits", device=DEFAULT_DEVICE)`` -> AccuracyRecord,
    cached."""
    from edgekit.measure.accuracy import evaluate_artifact

    cache: dict[tuple[str, str, str], Any] = {}

    def evaluate(artifact: str | Path, data: str = "digits", device: str = DEFAULT_DEVICE) -> Any:
        key = (str(artifact), data, device)
        if key not in cache:
            cache[key] = evaluate_artifact(str(artifact), data=data, device=device)
        return cache[key]

    return evaluate
