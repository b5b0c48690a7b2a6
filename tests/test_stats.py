"""The statistics behind latency reports and accuracy gates, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.metrics import compare_outputs, sqnr_db
from edgekit.stats import latency_summary, mcnemar_exact, paired_bootstrap_drop


def test_latency_summary_of_known_samples():
    samples = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    summary = latency_summary(samples, trim=0.2)
    assert summary["mean_ms"] == pytest.approx(22.0)
    assert summary["std_ms"] == pytest.approx(np.sqrt(((samples - 22.0) ** 2).sum() / 4))
    assert summary["cv"] == pytest.approx(summary["std_ms"] / 22.0)
    assert summary["p50_ms"] == 3.0
    assert (summary["min_ms"], summary["max_ms"]) == (1.0, 100.0)
    assert summary["p90_ms"] == pytest.approx(4.0 + 0.6 * 96.0)  # linear interpolation
    assert summary["trimmed_mean_ms"] == pytest.approx(3.0)  # drops 1.0 and 100.0


def test_mcnemar_exact_counts_the_disagreements():
    baseline = np.array([True] * 10 + [False] * 2 + [True] * 88)
    artifact = np.array([False] * 10 + [True] * 2 + [True] * 88)
    result = mcnemar_exact(baseline, artifact)
    assert (result["baseline_only"], result["artifact_only"]) == (10, 2)
    # two-sided binomial: P(X<=2 or X>=10 | n=12, p=0.5) = 2 * 79/4096
    assert result["p_value"] == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact(baseline, baseline)["p_value"] == 1.0


def test_bootstrap_interval_brackets_the_drop_and_is_seeded():
    rng = np.random.default_rng(3)
    baseline = rng.random(900) < 0.98
    artifact = baseline.copy()
    artifact[np.flatnonzero(baseline)[:18]] = False  # the artifact loses 18 images: 2.0 points
    low, high = paired_bootstrap_drop(baseline, artifact)
    assert low < 2.0 < high
    assert low > 0.5  # 18 one-sided losses are not noise
    assert (low, high) == paired_bootstrap_drop(baseline, artifact)
    assert paired_bootstrap_drop(baseline, baseline) == (0.0, 0.0)


def test_sqnr_and_output_comparison():
    reference = np.array([[3.0, 4.0]])
    assert sqnr_db(reference, reference * 1.1) == pytest.approx(20.0)
    figures = compare_outputs(
        np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.5, 0.0], [0.0, 2.0]])
    )
    assert figures["max_abs_diff"] == 1.0 and figures["mean_abs_diff"] == pytest.approx(0.375)
    assert figures["top1_agreement"] == 1.0
