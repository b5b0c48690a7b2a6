"""pytest plugin and helpers for a user's own accuracy regression tests.

Registered through the ``pytest11`` entry point, so ``pip install edgekit`` is enough::

    from edgekit.testing import assert_accuracy_drop

    def test_int8_tflite_keeps_its_accuracy():
        assert_accuracy_drop("artifacts/model-int8.tflite", data="digits", max_drop=1.0)

or with the fixture, which caches evaluations across tests::

    def test_agreement(edgekit_eval):
        assert edgekit_eval("artifacts/model-int8.tflite").agreement >= 0.98
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from edgekit.devices import DEFAULT_DEVICE


def assert_accuracy_drop(
    artifact: str | Path,
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
    check_record(record, max_drop, min_agreement, min_sqnr, point_estimate)
    return record


def check_record(
    record: Any,
    max_drop: float | None = None,
    min_agreement: float | None = None,
    min_sqnr: float | None = None,
    point_estimate: bool = False,
) -> None:
    """Raise AssertionError with the gate table when any bound does not hold."""
    from edgekit.measure.gates import accuracy_gates, format_gates

    results = accuracy_gates(record, max_drop, min_agreement, min_sqnr, point_estimate)
    if not all(result.passed for result in results):
        __tracebackhide__ = True
        raise AssertionError("edgekit accuracy gate failed:\n" + format_gates(results))


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
