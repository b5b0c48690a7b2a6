"""The statistics behind latency reports and accuracy gates, against hand-computed values (each
test here was written to kill mutants `make mutation` found alive)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from edgekit.common.metrics import compare_outputs, sqnr_db
from edgekit.common.stats import (
    band_of,
    latency_summary,
    mcnemar_exact,
    median_interval,
    paired_bootstrap_drop,
    paired_ratio,
    ratio_interval,
    session_ratio,
    widen,
)


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


def test_the_default_trim_drops_a_tenth_at_each_end():
    samples = np.array([1.0] * 18 + [100.0, 100.0])
    assert latency_summary(samples)["trimmed_mean_ms"] == pytest.approx(1.0)


def test_a_95_percent_bootstrap_interval_is_about_four_standard_errors_wide():
    rng = np.random.default_rng(5)
    baseline = np.ones(2000, dtype=bool)
    artifact = rng.random(2000) >= 0.1  # loses about 10 % of the images
    low, high = paired_bootstrap_drop(baseline, artifact)
    error = 100.0 * np.sqrt(0.1 * 0.9 / 2000)  # the drop's standard error, in points
    assert 3.6 * error < high - low < 4.3 * error  # 2 x 1.96 standard errors
    narrow = paired_bootstrap_drop(baseline, artifact, confidence=0.5)
    assert narrow[1] - narrow[0] < 0.5 * (high - low)


def test_widening_adds_the_band_on_both_sides_in_ratio():
    assert widen((0.9, 1.1), 0.1) == pytest.approx((0.9 / 1.1, 1.1 * 1.1))
    assert widen((0.9, 1.1), None) == (0.9, 1.1) == widen((0.9, 1.1), 0.0)


def test_the_band_is_the_farther_end_from_one():
    assert band_of((0.95, 1.02)) == pytest.approx(0.05)
    assert band_of((0.99, 1.08)) == pytest.approx(0.08)


def test_a_session_interval_is_a_t_prediction_interval_over_session_means():
    logs = np.array([0.1, 0.1, 0.2, 0.2, 0.3, 0.3])  # sessions' mean log ratios 0.1, 0.2, 0.3
    sessions = [0, 0, 1, 1, 2, 2]
    ratio, (low, high) = session_ratio(np.exp(logs), np.ones(6), sessions)
    half = scipy_stats.t.ppf(0.975, 2) * 0.1 * np.sqrt(2.0 / 3.0)
    assert ratio == pytest.approx(np.exp(0.2))
    assert (low, high) == pytest.approx((np.exp(0.2 - half), np.exp(0.2 + half)))
    assert ratio_interval(np.exp(logs), np.ones(6), sessions, band=0.5) == (ratio, (low, high))


def test_one_session_is_the_paired_interval_widened_by_the_band():
    a, b = [1.0, 1.1, 0.9, 1.05], [1.0, 1.0, 1.0, 1.0]
    assert session_ratio(a, b, [0, 0, 0, 0]) == paired_ratio(a, b)
    ratio, interval = paired_ratio(a, b)
    assert ratio_interval(a, b, None, 0.1) == (ratio, pytest.approx(widen(interval, 0.1)))


def test_a_median_interval_brackets_the_median_unless_nothing_varies():
    low, high = median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    assert low < 4.0 < high
    assert median_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
