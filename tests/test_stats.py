"""The statistics behind latency reports and accuracy gates, against hand-computed values (each
test here was written to kill mutants `make mutation` found alive)."""

from __future__ import annotations

import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
from scipy import stats as scipy_stats

from edgekit.common.metrics import compare_outputs, sqnr_db
from edgekit.common.stats import (
    LevelFit,
    TwoLevelFit,
    band_of,
    chance_to_hold,
    combined,
    latency_summary,
    level_ratio,
    mcnemar_exact,
    median_interval,
    pair_df,
    paired_bootstrap_drop,
    paired_ratio,
    ratio_interval,
    recorded_ratio,
    relative_half_width,
    runs_agree,
    session_ratio,
    simultaneous_quantile,
    widen,
)
from edgekit.results import Row


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


# The accuracy drop's bootstrap.


def reference_drop(baseline: np.ndarray, artifact: np.ndarray, confidence: float) -> tuple:
    """The percentile bootstrap written out: 2000 draws of as many image indices (the same
    images for both sides) from default_rng(0), each draw's mean drop in points, and the
    (1 - c) / 2 and (1 + c) / 2 quantiles of those."""
    difference = baseline.astype(np.float64) - artifact.astype(np.float64)
    draws = np.random.default_rng(0).integers(0, len(difference), size=(2000, len(difference)))
    drops = np.array([100.0 * difference[images].mean() for images in draws])
    return tuple(np.quantile(drops, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0]))


def test_the_drop_interval_is_the_percentile_bootstrap_of_2000_resamples_with_seed_0():
    # pinned: a gate's verdict must come out the same run to run and machine to machine, so
    # the resample count, the seed, the draw and the percentile levels are part of the figure
    rng = np.random.default_rng(11)
    baseline = rng.random(200) < 0.9
    artifact = baseline ^ (rng.random(200) < 0.1)  # about 20 images change, both ways
    for confidence in (0.95, 0.999, 0.3):  # 0.999 reaches the sparse tails, where draws show
        assert paired_bootstrap_drop(baseline, artifact, confidence) == pytest.approx(
            reference_drop(baseline, artifact, confidence), rel=1e-12
        )


def test_a_drop_that_is_the_same_on_every_image_has_an_interval_of_zero_width_at_it():
    everything, nothing = np.ones(50, dtype=bool), np.zeros(50, dtype=bool)
    assert paired_bootstrap_drop(everything, nothing) == (100.0, 100.0)  # in points
    assert paired_bootstrap_drop(nothing, everything) == (-100.0, -100.0)


# McNemar's exact test.


def test_losses_with_no_wins_are_tested_not_taken_for_a_tie():
    baseline = np.array([True] * 10 + [True] * 40)
    artifact = np.array([False] * 10 + [True] * 40)
    result = mcnemar_exact(baseline, artifact)
    assert (result["baseline_only"], result["artifact_only"]) == (10, 0)
    assert result["p_value"] == pytest.approx(2 / 2**10)  # both tails of Binomial(10, 1/2)
    assert mcnemar_exact(artifact, baseline)["p_value"] == pytest.approx(2 / 2**10)


def test_mcnemar_is_two_sided_swapping_the_sides_keeps_the_p_value():
    baseline = np.array([True] * 2 + [False] * 10 + [True] * 88)
    artifact = np.array([False] * 2 + [True] * 10 + [True] * 88)
    result = mcnemar_exact(baseline, artifact)
    assert (result["baseline_only"], result["artifact_only"]) == (2, 10)
    assert result["p_value"] == pytest.approx(2 * 79 / 4096)  # as for 10 losses and 2 wins


def test_counting_the_disagreements_warns_about_nothing():
    # an accuracy gate's output is read by people: a stray numpy warning there is a bug
    baseline = np.array([True, True, False, False])
    artifact = np.array([True, False, True, False])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = mcnemar_exact(baseline, artifact)
    assert (result["baseline_only"], result["artifact_only"]) == (1, 1)
    assert result["p_value"] == 1.0


# Latency summaries.


def test_a_single_sample_has_no_spread():
    summary = latency_summary(np.array([5.0]))
    assert summary["count"] == 1
    assert (summary["std_ms"], summary["cv"]) == (0.0, 0.0)
    figures = ("mean_ms", "min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "trimmed_mean_ms")
    assert [summary[name] for name in figures] == [5.0] * len(figures)


def test_two_samples_have_the_sample_standard_deviation():
    summary = latency_summary(np.array([1.0, 3.0]))
    assert summary["std_ms"] == pytest.approx(np.sqrt(2.0))  # ddof=1: sqrt((1 + 1) / 1)
    assert summary["cv"] == pytest.approx(np.sqrt(2.0) / 2.0)


def test_the_percentiles_are_the_50th_90th_and_99th_by_linear_interpolation():
    samples = np.random.default_rng(0).permutation(np.arange(101.0))  # 0, 1, ..., 100 ms
    summary = latency_summary(samples)
    assert (summary["p50_ms"], summary["p90_ms"], summary["p99_ms"]) == (50.0, 90.0, 99.0)
    assert latency_summary(np.arange(11.0))["p99_ms"] == pytest.approx(9.9)


def test_samples_at_the_timer_floor_have_a_cv_of_zero_not_a_division_by_zero():
    summary = latency_summary(np.zeros(5))  # an op faster than the clock's resolution
    assert (summary["mean_ms"], summary["std_ms"], summary["cv"]) == (0.0, 0.0, 0.0)


def test_sub_millisecond_latencies_keep_their_cv():
    summary = latency_summary(np.array([0.2, 0.4]))
    assert summary["cv"] == pytest.approx(np.sqrt(0.02) / 0.3)


# Ratios from paired rounds.


def reference_paired(a: list[float], b: list[float], confidence: float = 0.95) -> tuple:
    """Geometric mean of the per-round ratios, and mean log ratio +- t(n-1) * s / sqrt(n)."""
    logs = np.log(np.asarray(a)) - np.log(np.asarray(b))
    n, centre = len(logs), logs.mean()
    half = scipy_stats.t.ppf((1.0 + confidence) / 2.0, n - 1) * logs.std(ddof=1) / np.sqrt(n)
    return np.exp(centre), (np.exp(centre - half), np.exp(centre + half))


def test_the_paired_ratio_is_numerator_over_denominator_with_a_t_interval_on_log_ratios():
    a, b = [2.2, 1.8, 2.1, 2.4, 1.9, 2.0], [1.1, 1.0, 1.0, 1.2, 0.9, 1.05]
    for confidence in (0.95, 0.8):
        ratio, interval = paired_ratio(a, b, confidence)
        expected_ratio, expected_interval = reference_paired(a, b, confidence)
        assert ratio == pytest.approx(expected_ratio)
        assert interval == pytest.approx(expected_interval)


def test_a_ratio_that_is_the_same_in_every_round_has_an_interval_of_zero_width_at_it():
    # and says so without scipy's "catastrophic cancellation" warning from a t-test on a
    # spread of zero: a report of two identical runs should print nothing alarming
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ratio, (low, high) = paired_ratio([3.0, 3.0, 3.0], [1.5, 1.5, 1.5])
    assert ratio == pytest.approx(2.0)
    assert low == high == ratio


def test_two_rounds_that_differ_have_a_t_interval_with_one_degree_of_freedom():
    ratio, interval = paired_ratio([1.1, 0.9], [1.0, 1.0])
    expected_ratio, expected_interval = reference_paired([1.1, 0.9], [1.0, 1.0])
    assert ratio == pytest.approx(expected_ratio)
    assert interval == pytest.approx(expected_interval)
    assert interval[1] / interval[0] > 2.0  # one degree of freedom: wide, but an interval


# Ratios from sessions.


def reference_sessions(a: list[float], b: list[float], sessions: list[int]) -> tuple:
    """Each session's mean log ratio is one observation; a 95 % t prediction interval for the
    mean of as many new sessions: centre +- t(k-1) * s * sqrt(1/k + 1/k)."""
    by_session: dict[int, list[float]] = {}
    for x, y, session in zip(a, b, sessions, strict=True):
        by_session.setdefault(session, []).append(np.log(x / y))
    means = np.array([np.mean(logs) for logs in by_session.values()])
    k, centre = len(means), means.mean()
    half = scipy_stats.t.ppf(0.975, k - 1) * means.std(ddof=1) * np.sqrt(1.0 / k + 1.0 / k)
    return np.exp(centre), (np.exp(centre - half), np.exp(centre + half))


def test_the_session_interval_for_two_and_four_sessions_matches_the_prediction_interval():
    rng = np.random.default_rng(2)
    for k in (2, 4):
        sessions = [s for s in range(k) for _ in range(3)]
        b = list(rng.uniform(1.0, 3.0, 3 * k))  # a denominator that is not 1: a ratio
        shift = 0.1 + 0.05 * np.asarray(sessions) + rng.normal(0.0, 0.01, 3 * k)
        a = list(np.asarray(b) * np.exp(shift))
        ratio, interval = session_ratio(a, b, sessions)
        expected_ratio, expected_interval = reference_sessions(a, b, sessions)
        assert ratio == pytest.approx(expected_ratio)
        assert interval == pytest.approx(expected_interval)
        # two or more sessions: the band is what sessions measure, so it is not added
        assert ratio_interval(a, b, sessions, band=0.5) == (ratio, interval)


def test_scaling_both_sides_of_every_round_leaves_the_session_ratio_unchanged():
    a, b, sessions = [1.2, 1.3, 1.5, 1.4, 1.1, 1.2], [1.0] * 6, [0, 0, 1, 1, 2, 2]
    ratio, interval = session_ratio(a, b, sessions)
    scaled = session_ratio([3.0 * x for x in a], [3.0 * y for y in b], sessions)
    assert scaled == (pytest.approx(ratio), pytest.approx(interval))


def test_rounds_all_in_one_session_are_the_paired_interval_widened_by_the_band():
    a, b = [1.0, 1.1, 0.9, 1.05], [1.0, 1.0, 1.0, 1.0]
    assert ratio_interval(a, b, [3, 3, 3, 3], band=0.1) == ratio_interval(a, b, None, band=0.1)


def test_an_empty_session_list_is_no_sessions_and_the_band_still_widens():
    # profiles whose runs recorded no sessions carry round_sessions == []
    a, b = [1.0, 1.1, 0.9, 1.05], [1.0, 1.0, 1.0, 1.0]
    ratio, interval = ratio_interval(a, b, [], band=0.1)
    assert (ratio, interval) == ratio_interval(a, b, None, band=0.1)
    assert interval == pytest.approx(widen(paired_ratio(a, b)[1], 0.1))


# Bands and median intervals.


def test_the_band_of_an_interval_that_misses_one_is_its_farther_end():
    assert band_of((0.9, 0.95)) == pytest.approx(0.1)  # all below one
    assert band_of((1.02, 1.05)) == pytest.approx(0.05)  # all above one
    assert band_of((0.5, 2.5)) == pytest.approx(1.5)


def test_a_median_interval_of_no_rounds_is_nan_and_of_one_round_is_that_round():
    low, high = median_interval([])
    assert np.isnan(low) and np.isnan(high)
    assert median_interval([3.0]) == (3.0, 3.0)


def test_two_rounds_that_differ_have_a_median_interval_spanning_both():
    # resampled medians of two rounds are 1.0, 1.5 or 2.0; the 2.5 % and 97.5 % ones are the ends
    assert median_interval([1.0, 2.0]) == (1.0, 2.0)


def test_session_prediction_pools_each_sides_spread_and_widens_with_fewer_sessions():
    import math

    from edgekit.common.stats import session_prediction

    # one side, three sessions 10 % apart: s = log 1.1, df 2, t = 4.303
    low, high = session_prediction([[1.0, 1.1, 1.21]], sessions=3)
    half = 4.302653 * math.log(1.1) * math.sqrt(1 + 1 / 3)
    assert math.log(high) == pytest.approx(half, rel=1e-4)
    assert low == pytest.approx(1 / high)
    # a second side with the same spread: more degrees of freedom, a narrower interval
    pooled = session_prediction([[1.0, 1.1, 1.21], [2.0, 2.2, 2.42]], sessions=3)
    assert pooled[1] < high
    # a side's level does not count, only its spread about its own mean
    assert session_prediction([[1.0, 1.1, 1.21], [5.0, 5.5, 6.05]], sessions=3) == pooled
    assert session_prediction([[1.0], [2.0]], sessions=1) is None  # no spread to see
    # two sessions are enough to see a spread (df 1); the prediction for one more session
    two = session_prediction([[1.0, 1.1]], sessions=2)
    spread = math.log(1.1) / math.sqrt(2)  # the sample deviation of two logs log 1.1 apart
    assert math.log(two[1]) == pytest.approx(12.706205 * spread * math.sqrt(1.5), rel=1e-4)
    # a prediction for a single session is the widest; none for no session at all
    one = session_prediction([[1.0, 1.1, 1.21]], sessions=1)
    assert math.log(one[1]) == pytest.approx(4.302653 * math.log(1.1) * math.sqrt(2), rel=1e-4)
    assert session_prediction([[1.0, 1.1, 1.21]], sessions=0) is None


def around(centre: float, half: float) -> tuple[float, float]:
    """An interval symmetric on the log scale, as edgekit's ratio intervals are."""
    return float(np.exp(centre - half)), float(np.exp(centre + half))


def test_two_runs_agree_when_their_estimates_are_within_both_intervals_together():
    # half-widths 0.03 and 0.04 on the log scale reach 0.05 together (3-4-5)
    first, second = 1.0, float(np.exp(0.049))
    assert runs_agree(first, around(0.0, 0.03), second, around(0.049, 0.04))
    assert runs_agree(second, around(0.049, 0.04), first, around(0.0, 0.03))
    further = float(np.exp(0.051))
    assert not runs_agree(first, around(0.0, 0.03), further, around(0.051, 0.04))
    assert not runs_agree(further, around(0.051, 0.04), first, around(0.0, 0.03))
    # either interval alone is too narrow; only together do they reach
    assert not runs_agree(first, around(0.0, 0.03), float(np.exp(0.045)), around(0.045, 0.0))
    # on the edge of the reach counts as agreeing; two alike figures agree, whatever their size
    assert runs_agree(1.0, (0.5, 2.0), 2.0, (2.0, 2.0))
    assert runs_agree(3.0, (2.9, 3.1), 3.0, (2.9, 3.1))


def test_a_calibrated_interval_holds_another_runs_estimate_less_often_than_its_confidence():
    alike = chance_to_hold(around(0.0, 0.03), around(0.0, 0.03))
    assert alike == pytest.approx(2 * scipy_stats.norm.cdf(1.959964 / np.sqrt(2)) - 1, abs=1e-6)
    assert alike == pytest.approx(0.834, abs=0.001)
    # a wide interval beside a precise run's estimate holds it almost as often as the truth
    assert chance_to_hold(around(0.0, 0.30), around(0.0, 0.003)) == pytest.approx(0.95, abs=1e-3)
    assert chance_to_hold(around(0.0, 0.003), around(0.0, 0.30)) < 0.05
    assert chance_to_hold(around(0.0, 0.03), around(0.0, 0.03), confidence=0.90) == pytest.approx(
        2 * scipy_stats.norm.cdf(1.644854 / np.sqrt(2)) - 1, abs=1e-6
    )
    assert chance_to_hold((1.0, 1.0), around(0.0, 0.03)) == 0.0  # a point holds nothing
    assert chance_to_hold((1.0, 1.0), (1.0, 1.0)) == 0.0


def test_sessions_open_at_once_count_as_one_side_with_the_variance_of_their_mean():
    first = LevelFit(0.1, 0.04, 5.0, 4)
    second = LevelFit(0.3, 0.02, 3.0, 4, own_variance=True)
    both = combined([first, second])
    assert both.log_level == pytest.approx(0.2)
    assert both.variance == pytest.approx((0.04 + 0.02) / 4)  # the variance of a mean of two
    assert (both.df, both.sessions, both.own_variance) == (3.0, 4, True)
    # three at once: the variance of a mean of three is their sum over nine
    three = combined([first, second, LevelFit(0.2, 0.03, 4.0, 4)])
    assert three.variance == pytest.approx((0.04 + 0.02 + 0.03) / 9)


def test_a_fit_is_a_value_that_no_reader_can_change():
    # one fit is read by the report, the recommendation and the history at once
    fit = LevelFit(0.1, 0.04, 5.0, 4)
    assert fit.own_variance is False  # the pool's variance unless the fit says otherwise
    with pytest.raises(FrozenInstanceError):
        fit.variance = 0.0
    pool = TwoLevelFit([fit], session_var=0.01, round_var=0.001, rounds_per_session=3.0)
    with pytest.raises(FrozenInstanceError):
        pool.session_var = 0.0


def test_the_degrees_of_freedom_of_a_difference_are_welch_satterthwaites():
    # (0.01 + 0.02)^2 / (0.01^2 / 4 + 0.02^2 / 9)
    assert pair_df(LevelFit(0.0, 0.01, 4.0, 5), LevelFit(0.0, 0.02, 9.0, 10)) == pytest.approx(
        12.96, abs=0.01
    )
    # alike degrees of freedom are kept as they are, whatever the variances (equal, not same)
    assert pair_df(LevelFit(0.0, 0.01, 4.0, 5), LevelFit(0.0, 0.01, float("4"), 5)) == 4.0
    # whichever side has more
    assert pair_df(LevelFit(0.0, 0.02, 9.0, 10), LevelFit(0.0, 0.01, 4.0, 5)) == pytest.approx(
        12.96, abs=0.01
    )
    # no variance on either side: the fewer degrees of freedom
    assert pair_df(LevelFit(0.0, 0.0, 4.0, 5), LevelFit(0.0, 0.0, 9.0, 10)) == 4.0


def test_a_level_ratio_is_a_t_interval_on_the_log_scale():
    side, reference = LevelFit(0.2, 0.0004, 6.0, 7), LevelFit(0.0, 0.0005, 6.0, 7)
    ratio, (low, high) = level_ratio(side, reference)
    half = scipy_stats.t.ppf(0.975, 6.0) * np.sqrt(0.0009)
    assert ratio == pytest.approx(np.exp(0.2))
    assert (low, high) == pytest.approx((np.exp(0.2 - half), np.exp(0.2 + half)))


def test_a_level_ratio_of_one_degree_of_freedom_or_fewer_uses_one():
    side, reference = LevelFit(0.2, 0.0004, 1.0, 2), LevelFit(0.0, 0.0005, 1.0, 2)
    _, (low, high) = level_ratio(side, reference)
    half = scipy_stats.t.ppf(0.975, 1.0) * np.sqrt(0.0009)
    assert (low, high) == pytest.approx((np.exp(0.2 - half), np.exp(0.2 + half)))
    fewer = LevelFit(0.2, 0.0004, 0.5, 2), LevelFit(0.0, 0.0005, 0.5, 2)
    assert level_ratio(*fewer)[1] == pytest.approx((low, high))


def test_tukeys_quantile_holds_three_or_more_levels_at_once():
    assert simultaneous_quantile(2, 10.0) == pytest.approx(scipy_stats.t.ppf(0.975, 10.0))
    # one pair is the t quantile at its own degrees of freedom, neither rounded nor clamped
    assert simultaneous_quantile(2, 12.34) == pytest.approx(scipy_stats.t.ppf(0.975, 12.34))
    assert simultaneous_quantile(2, 5000.0) == pytest.approx(scipy_stats.t.ppf(0.975, 5000.0))
    three = scipy_stats.studentized_range.ppf(0.95, 3, 10.0) / np.sqrt(2)
    assert simultaneous_quantile(3, 10.0) == pytest.approx(three)
    # freedom is clamped to [1, 1000] and rounded to a tenth (the cache's key)
    assert simultaneous_quantile(4, 0.5) == pytest.approx(simultaneous_quantile(4, 1.0))
    assert simultaneous_quantile(4, 1.0) == pytest.approx(
        scipy_stats.studentized_range.ppf(0.95, 4, 1.0) / np.sqrt(2)
    )
    assert simultaneous_quantile(4, 12.34) == pytest.approx(
        scipy_stats.studentized_range.ppf(0.95, 4, 12.3) / np.sqrt(2)
    )
    assert simultaneous_quantile(4, 5000.0) == pytest.approx(
        scipy_stats.studentized_range.ppf(0.95, 4, 1000.0) / np.sqrt(2)
    )


def test_relative_half_width_is_the_farther_reach_from_the_ratio():
    assert relative_half_width((1.8, 2.5), 2.0) == pytest.approx(0.25)
    assert relative_half_width((1.5, 2.1), 2.0) == pytest.approx(0.25)
    assert relative_half_width((1.0, 2.0), 0.0) == float("inf")
    assert relative_half_width((1.0, 2.0), -1.0) == float("inf")  # no ratio of latencies
    # an interval reaching past twice the ratio: the whole reach, not its fraction past 1
    assert relative_half_width((1.5, 5.0), 2.0) == pytest.approx(1.5)


def test_a_recorded_ratio_reads_both_sides_fits_or_else_their_rounds():
    side = {"latency_fit": LevelFit(0.2, 0.0004, 6.0, 7).to_dict(), "rounds_ms": [2.0] * 4}
    reference = {"latency_fit": LevelFit(0.0, 0.0005, 6.0, 7).to_dict(), "rounds_ms": [1.0] * 4}
    ratio, interval = recorded_ratio(side, reference)
    assert ratio == pytest.approx(np.exp(0.2))
    # at 95 % unless told: the interval a level ratio of the two fits gives
    fits = LevelFit.from_dict(side["latency_fit"]), LevelFit.from_dict(reference["latency_fit"])
    assert interval == pytest.approx(level_ratio(*fits, 0.95)[1])
    # one side without a fit (recorded before it existed): both from their paired rounds
    older = {"rounds_ms": [1.0, 1.0, 1.0, 1.0]}
    ratio, interval = recorded_ratio(side, older)
    assert ratio == pytest.approx(2.0) and interval == pytest.approx((2.0, 2.0))
    ratio, _ = recorded_ratio({"rounds_ms": [2.0] * 4}, reference)
    assert ratio == pytest.approx(2.0)
    # rounds of one session widened by the recorded noise band (either side's, the larger)
    wobbly, steady_rounds = {"rounds_ms": [2.0, 2.1, 2.0, 2.1], "noise_band": 0.05}, [1.0] * 4
    plain = ratio_interval(wobbly["rounds_ms"], steady_rounds)[1]
    assert recorded_ratio(wobbly, {"rounds_ms": steady_rounds})[1] == pytest.approx(
        (plain[0] / 1.05, plain[1] * 1.05)
    )
    # rounds recorded with their sessions: the interval between sessions, not between rounds
    rounds = {"rounds_ms": [2.0, 2.1, 2.6, 2.7], "round_sessions": [0, 0, 1, 1]}
    steady = {"rounds_ms": [1.0, 1.0, 1.0, 1.0]}
    sessions = [0, 0, 1, 1]
    assert recorded_ratio(rounds, steady)[1] == pytest.approx(
        ratio_interval(rounds["rounds_ms"], steady["rounds_ms"], sessions)[1]
    )
    assert recorded_ratio(rounds, steady)[1] != pytest.approx(
        ratio_interval(rounds["rounds_ms"], steady["rounds_ms"])[1]
    )


def test_a_recorded_ratio_reads_a_fit_as_a_record_or_as_its_json():
    # a results row holds its LevelFit; a profile's dict has its JSON
    fit = LevelFit(0.3, 0.0004, 6.0, 7)
    as_record = Row("artifact", "tflite", "int8", "ok", latency_fit=fit, rounds_ms=[9.0] * 4)
    as_json = {"latency_fit": LevelFit(0.1, 0.0005, 6.0, 7).to_dict(), "rounds_ms": [1.0] * 4}
    assert recorded_ratio(as_record, as_json)[0] == pytest.approx(np.exp(0.2))
    assert recorded_ratio(as_json, as_record)[0] == pytest.approx(np.exp(-0.2))
