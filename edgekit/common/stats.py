"""Statistics that keep accuracy gates from flaking (a paired bootstrap interval for the
accuracy drop and McNemar's exact test on the disagreements) and latency ratios honest (the
two-level fit of interleaved rounds in sessions, and Tukey's simultaneous test for groups)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
from scipy import stats

BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 2000


def paired_bootstrap_drop(
    baseline_correct: np.ndarray,
    artifact_correct: np.ndarray,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile interval of (baseline top-1 - artifact top-1) in points, resampling images
    (the same images for both, hence paired)."""
    difference = baseline_correct.astype(np.float64) - artifact_correct.astype(np.float64)
    if not difference.any():
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(difference), size=(resamples, len(difference)))
    means = difference[index].mean(axis=1) * 100.0
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(low), float(high)


def mcnemar_exact(baseline_correct: np.ndarray, artifact_correct: np.ndarray) -> dict[str, float]:
    """Exact (binomial) McNemar test: are the images only the baseline gets right (b) and those
    only the artifact gets right (c) a fair coin? p = 1 when there are no disagreements."""
    b = int(np.sum(baseline_correct & ~artifact_correct))
    c = int(np.sum(~baseline_correct & artifact_correct))
    p_value = 1.0 if b + c == 0 else float(stats.binomtest(b, b + c, 0.5).pvalue)
    return {"baseline_only": b, "artifact_only": c, "p_value": p_value}


def latency_summary(samples_ms: np.ndarray, trim: float = 0.1) -> dict[str, float]:
    """Mean, std, CV, min, percentiles, max and the trimmed mean of latency samples (ms)."""
    values = np.asarray(samples_ms, dtype=np.float64)
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "count": len(values),
        "mean_ms": mean,
        "std_ms": std,
        "cv": std / mean if mean > 0 else 0.0,
        "min_ms": float(values.min()),
        "p50_ms": float(p50),
        "p90_ms": float(p90),
        "p99_ms": float(p99),
        "max_ms": float(values.max()),
        "trimmed_mean_ms": float(stats.trim_mean(values, trim)),
    }


def paired_ratio(
    numerator_rounds: list[float] | np.ndarray,
    denominator_rounds: list[float] | np.ndarray,
    confidence: float = 0.95,
) -> tuple[float, tuple[float, float]]:
    """Ratio of two interleaved latencies and its interval, from paired rounds: the geometric
    mean of the per-round ratios, with a t-interval on their logarithms (``scipy.stats.ttest_1samp``
    on log ratios: rounds are the independent units, both sides of a round saw the same machine)."""
    a = np.asarray(numerator_rounds, dtype=np.float64)
    b = np.asarray(denominator_rounds, dtype=np.float64)
    logs = np.log(a / b)
    centre = float(np.exp(logs.mean()))
    if len(logs) < 2 or float(np.ptp(logs)) == 0.0:
        return centre, (centre, centre)
    interval = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return centre, (float(np.exp(interval.low)), float(np.exp(interval.high)))


def session_ratio(
    numerator_rounds: list[float] | np.ndarray,
    denominator_rounds: list[float] | np.ndarray,
    sessions: list[int] | np.ndarray,
    confidence: float = 0.95,
) -> tuple[float, tuple[float, float]]:
    """Ratio of two interleaved latencies whose rounds ran in several sessions (each side
    reopened between them), with an interval for what another run's estimate would be.

    Rounds within a session share that session's state (where kernels and buffers landed, the
    machine's minute), so sessions, not rounds, are the independent units: each session's mean
    log ratio is one observation. The interval is a t prediction interval for the mean of as many
    new sessions: centre +- t(k-1) * s * sqrt(2/k), s the spread of the k session means. With one
    session it is ``paired_ratio``."""
    logs = np.log(np.asarray(numerator_rounds, dtype=np.float64)) - np.log(
        np.asarray(denominator_rounds, dtype=np.float64)
    )
    labels = np.asarray(sessions)
    means = np.array([logs[labels == label].mean() for label in np.unique(labels)])
    if len(means) < 2:
        return paired_ratio(numerator_rounds, denominator_rounds, confidence)
    centre = float(means.mean())
    half = (
        stats.t.ppf(0.5 + confidence / 2.0, len(means) - 1)
        * means.std(ddof=1)
        * np.sqrt(2.0 / len(means))
    )
    return float(np.exp(centre)), (float(np.exp(centre - half)), float(np.exp(centre + half)))


def ratio_interval(
    numerator_rounds: list[float] | np.ndarray,
    denominator_rounds: list[float] | np.ndarray,
    sessions: list[int] | np.ndarray | None = None,
    band: float | None = None,
    confidence: float = 0.95,
) -> tuple[float, tuple[float, float]]:
    """The one way every ratio gets its interval: from sessions where the rounds ran in more
    than one (``session_ratio``), else from the paired rounds widened by the noise ``band``
    (a second session's distance, standing in for the sessions that were not run)."""
    if sessions is not None and len(set(np.asarray(sessions).tolist())) > 1:
        return session_ratio(numerator_rounds, denominator_rounds, sessions, confidence)
    ratio, interval = paired_ratio(numerator_rounds, denominator_rounds, confidence)
    return ratio, widen(interval, band)


def widen(interval: tuple[float, float], band: float | None) -> tuple[float, float]:
    """A ratio's interval widened by a noise band (the fraction two sessions of the same file
    differ by): what rounds cannot see, between-session differences, is added on both sides."""
    low, high = interval
    if not band:
        return low, high
    return low / (1.0 + band), high * (1.0 + band)


def band_of(interval: tuple[float, float]) -> float:
    """The noise band a self-against-self ratio interval shows: its largest distance from 1."""
    return max(abs(interval[0] - 1.0), abs(interval[1] - 1.0))


def session_prediction(
    sides: list[list[float]] | list[np.ndarray], sessions: int, confidence: float = 0.95
) -> tuple[float, float] | None:
    """Where one more session's figure (a p50) should fall, as factors on a side's figure: a
    t prediction interval from figures of several sides, each listed per session (the sessions
    the rounds ran in). Each side's log figures spread about their own mean, pooled over the
    sides (the machine's drift and where each process landed move them all alike): half-width
    t(df) * s * sqrt(1 + 1/``sessions``), df the pooled degrees of freedom. None with fewer
    than two sessions of any side."""
    logs = [np.log(np.asarray(side, dtype=np.float64)) for side in sides if len(side) >= 2]
    freedom = sum(len(side) - 1 for side in logs)
    if freedom < 1 or sessions < 1:
        return None
    spread = np.sqrt(sum(float(((side - side.mean()) ** 2).sum()) for side in logs) / freedom)
    half = stats.t.ppf(0.5 + confidence / 2.0, freedom) * spread * np.sqrt(1.0 + 1.0 / sessions)
    return float(np.exp(-half)), float(np.exp(half))


def median_interval(
    values: list[float] | np.ndarray, confidence: float = 0.95, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """A percentile-bootstrap interval of the median (of per-round latencies)."""
    data = np.asarray(values, dtype=np.float64)
    if len(data) < 2 or float(np.ptp(data)) == 0.0:
        centre = float(np.median(data)) if len(data) else float("nan")
        return centre, centre
    result = stats.bootstrap(
        (data,),
        np.median,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


# --- two levels: each side's level, and ratios of levels (the fit: edgekit.common.two_levels) ---


@dataclass(frozen=True)
class LevelFit:
    """One side's estimate from a two-level fit: its mean log latency (the mean of its session
    figures), the variance of that mean, and its degrees of freedom."""

    log_level: float
    variance: float
    df: float
    sessions: int
    own_variance: bool = False  # its sessions spread beyond the pool's: its own variance

    def to_dict(self) -> dict[str, float | int | bool]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: dict) -> LevelFit:
        return cls(**{f.name: payload[f.name] for f in fields(cls) if f.name in payload})


@dataclass(frozen=True)
class TwoLevelFit:
    """The pool's two levels: every side's ``LevelFit``, and the variance components a plan
    for more measurement needs (per log block median)."""

    sides: list[LevelFit]
    session_var: float  # between sessions of one side (beyond the rounds' noise)
    round_var: float  # between rounds within one session
    rounds_per_session: float


def combined(levels: list[LevelFit]) -> LevelFit:
    """Several sides of one thing (sessions of it open at once) as one: the mean of their log
    levels, its variance from theirs."""
    count = len(levels)
    return LevelFit(
        float(np.mean([level.log_level for level in levels])),
        sum(level.variance for level in levels) / count**2,
        min(level.df for level in levels),
        levels[0].sessions,
        any(level.own_variance for level in levels),
    )


def level_ratio(
    side: LevelFit, reference: LevelFit, confidence: float = 0.95, critical: float | None = None
) -> tuple[float, tuple[float, float]]:
    """``side``'s latency over ``reference``'s with its interval: the difference of their log
    levels, its variance the sum of theirs (their sessions are separate processes), a t
    quantile at their (Welch-Satterthwaite) degrees of freedom, or ``critical`` in its place
    (a simultaneous interval's)."""
    centre = side.log_level - reference.log_level
    variance = side.variance + reference.variance
    if variance <= 0.0:
        value = float(np.exp(centre))
        return value, (value, value)
    quantile = (
        critical if critical is not None else t_quantile(confidence, pair_df(side, reference))
    )
    half = quantile * float(np.sqrt(variance))
    return float(np.exp(centre)), (float(np.exp(centre - half)), float(np.exp(centre + half)))


def pair_df(a: LevelFit, b: LevelFit) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two levels."""
    if a.df == b.df:
        return a.df
    spread = a.variance + b.variance
    parts = a.variance**2 / a.df + b.variance**2 / b.df
    return float(spread**2 / parts) if parts > 0 else min(a.df, b.df)


def t_quantile(confidence: float, df: float) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2.0, max(df, 1.0)))


def simultaneous_quantile(comparisons: int, df: float, confidence: float = 0.95) -> float:
    """Tukey's critical value for all pairs of ``comparisons`` levels, on the scale of one
    pair's standard error (the studentized range over the square root of 2): intervals this
    wide hold every pairwise ratio at once with ``confidence``."""
    if comparisons < 3:
        return t_quantile(confidence, df)
    return _tukey(comparisons, round(min(max(df, 1.0), 1000.0), 1), confidence)


@functools.cache
def _tukey(comparisons: int, freedom: float, confidence: float) -> float:
    return float(stats.studentized_range.ppf(confidence, comparisons, freedom) / np.sqrt(2.0))


def relative_half_width(interval: tuple[float, float], ratio: float) -> float:
    """How far an interval reaches from its ratio, as a fraction of it (the larger side)."""
    low, high = interval
    if ratio <= 0:
        return float("inf")
    return max(high / ratio - 1.0, 1.0 - low / ratio)


# --- across runs: two independent runs' figures for one ratio ---


def _log_half_width(interval: tuple[float, float] | list[float]) -> float:
    low, high = interval
    return float(np.log(high / low)) / 2.0


def runs_agree(
    first: float,
    first_interval: tuple[float, float] | list[float],
    second: float,
    second_interval: tuple[float, float] | list[float],
) -> bool:
    """Whether two separate runs' estimates of one ratio agree: their log distance within the
    root sum of squares of their intervals' log half-widths, the interval of a difference of
    two independent estimates (edgekit's intervals are symmetric on the log scale). Calibrated
    intervals of runs that differ in nothing agree 95 times in 100 at 95 % confidence."""
    reach = float(np.hypot(_log_half_width(first_interval), _log_half_width(second_interval)))
    return abs(float(np.log(first / second))) <= reach


def chance_to_hold(
    interval: tuple[float, float] | list[float],
    other_interval: tuple[float, float] | list[float],
    confidence: float = 0.95,
) -> float:
    """How often a calibrated ``interval`` holds another run's estimate, whose own interval is
    ``other_interval``, when the runs differ in nothing: less than ``confidence``, since that
    estimate carries its own noise (two alike 95 % intervals: about 83 %). Normal quantiles:
    t intervals of few degrees of freedom hold somewhat more."""
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    own, other = _log_half_width(interval), _log_half_width(other_interval)
    if own <= 0.0:
        return 0.0
    return float(2.0 * stats.norm.cdf(z * own / np.hypot(own, other)) - 1.0)


def recorded_ratio(
    side: object, reference: object, confidence: float = 0.95
) -> tuple[float, tuple[float, float]]:
    """``side``'s latency over ``reference``'s from what was recorded of each (a result row, a
    profile, or a dict with ``latency_fit`` (a ``LevelFit`` or its JSON), ``rounds_ms``,
    ``round_sessions`` and ``noise_band``), both of one pool: from their levels in the pool's
    two-level fit, or, for what was recorded before the fit existed, from the paired rounds
    (``ratio_interval``)."""

    def read(item: object, name: str) -> Any:
        return item.get(name) if isinstance(item, dict) else getattr(item, name, None)

    fits = [read(item, "latency_fit") for item in (side, reference)]
    if fits[0] and fits[1]:
        levels = [fit if isinstance(fit, LevelFit) else LevelFit.from_dict(fit) for fit in fits]
        return level_ratio(*levels, confidence)
    band = max(read(side, "noise_band") or 0.0, read(reference, "noise_band") or 0.0)
    sessions = read(side, "round_sessions") or None
    rounds = read(side, "rounds_ms"), read(reference, "rounds_ms")
    return ratio_interval(*rounds, sessions, band or None, confidence)
