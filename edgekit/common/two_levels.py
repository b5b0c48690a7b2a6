"""The two-level fit of interleaved rounds in sessions (Kalibera and Jones, 2013): each side's
level, and the variance of that level, from rounds within sessions and sessions within sides.

A side's log latency in round r, in its session k: mu_side + round_r + session_(side,k) +
noise. Interleaving puts every side in every round, so round_r (the machine's minute) is
estimated from all sides and cancels in any ratio; what is left are the sessions (a new
process: where kernels and buffers landed) and the rounds' noise within them. Both are
estimated from the pool's own data: each side's session figures (the median of its rounds,
each round's common drift removed) spread about the side's level by sigma_session^2 + the
rounds' share, pooled over the sides, so every ratio has about (sides - 1)/sides x the sum
of (sessions - 1) degrees of freedom ((sides - 1)(sessions - 1) where all sides were reopened
together). Sides need not have as many sessions: a side whose own sessions spread far more
than the pool's (an F test at 2 %) keeps its own, wider variance, the pool is estimated
again without it, and the measuring may reopen that side alone
(``edgekit.measure.sessions``). At 2 %, seeded simulations (tests/test_intervals.py) keep
the coverage of a pool of alike sides within 93-97 %; a looser test flags, and drops from the
pool, sides that merely drew the largest residuals, and the pool comes out too narrow."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy import stats

from edgekit.common.stats import LevelFit, TwoLevelFit

HETEROGENEITY_LEVEL = 0.02


def fit_two_levels(
    log_rounds: np.ndarray, sessions: np.ndarray | list[int] | list[list[int]]
) -> TwoLevelFit:
    """The two-level fit of ``log_rounds`` (sides x rounds: the log of each block's median)
    whose rounds ran in ``sessions``: a label per round where every side was reopened together,
    or a row of labels per side (a side reopened alone has sessions the others do not).

    With one session of every side the rounds are the only level: each side's variance is the
    rounds' spread of the two-way residuals (the sessions' own offsets cannot be seen, and the
    caller's report says so)."""
    values = np.asarray(log_rounds, dtype=np.float64)
    count, rounds = values.shape
    labels = np.asarray(sessions)
    if labels.ndim == 1:
        labels = np.broadcast_to(labels, values.shape)
    cells = _session_cells(values, labels, range(count))
    keys = [len(side) for side in cells]
    within = _within_sessions(values, labels)
    shrink = (count - 1) / count if count > 1 else 1.0  # what the rounds' drift took of it
    round_freedom = max(sum(rounds - k for k in keys) * shrink, 1.0)
    round_var = float((within**2).sum() / round_freedom)
    rounds_mean = rounds / float(np.mean(keys))
    if max(keys) < 2 or count < 2:
        # one session: the rounds are the units (no session variance can be seen)
        variance = round_var / rounds
        fits = [
            LevelFit(float(values[s].mean()), variance, round_freedom, keys[s])
            for s in range(count)
        ]
        return TwoLevelFit(fits, 0.0, round_var, rounds_mean)
    pooled, freedom = _pooled(cells, range(count))
    own = _own_variances(cells)
    kept = [side for side in range(count) if side not in own]
    if own and len(kept) >= 2:
        # the pool again without them: a wild side's sessions also move the rounds' common
        # drift, which every other side's figures would carry otherwise
        cells = _session_cells(values, labels, kept)
        pooled, freedom = _pooled(cells, kept)
        own = {
            side: max(float(np.var(cells[side], ddof=1)), pooled)
            if len(cells[side]) > 1
            else pooled
            for side in own
        }
    fits = []
    for side, figures in enumerate(cells):
        cell_var, side_freedom = (own[side], len(figures) - 1) if side in own else (pooled, freedom)
        fits.append(
            LevelFit(
                float(np.mean(figures)),
                cell_var / len(figures),
                float(max(side_freedom, 1)),
                len(figures),
                side in own,
            )
        )
    session_var = max(pooled - round_var / rounds_mean, 0.0)
    return TwoLevelFit(fits, session_var, round_var, rounds_mean)


def _session_cells(
    values: np.ndarray, labels: np.ndarray, drift_from: Iterable[int]
) -> list[np.ndarray]:
    """Each side's session figures: per session, the median of its rounds (one block a passing
    load slowed moves it less than a mean), each round's drift removed first, as the sides of
    ``drift_from`` saw it (their mean log, each side's own level taken out)."""
    chosen = list(drift_from)
    levels = values.mean(axis=1, keepdims=True)
    drift = (values[chosen] - levels[chosen]).mean(axis=0)
    steady = values - drift
    return [
        np.array(
            [np.median(row[side_labels == key]) for key in dict.fromkeys(side_labels.tolist())]
        )
        for row, side_labels in zip(steady, labels, strict=True)
    ]


def _within_sessions(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The rounds' noise: each value less its session's mean and its round's common drift."""
    within = values.copy()
    for row, side_labels in zip(within, labels, strict=True):
        for key in set(side_labels.tolist()):
            chosen = side_labels == key
            row[chosen] -= row[chosen].mean()
    return within - within.mean(axis=0, keepdims=True)


def _pooled(cells: list[np.ndarray], sides: Iterable[int]) -> tuple[float, float]:
    """The variance of one side's session figure about its level, pooled over ``sides``, and
    its degrees of freedom: the rounds' common drift, removed first, took 1/sides of each."""
    chosen = list(sides)
    squares = sum(float(((cells[s] - cells[s].mean()) ** 2).sum()) for s in chosen)
    freedom = sum(len(cells[s]) - 1 for s in chosen) * (len(chosen) - 1) / len(chosen)
    return squares / max(freedom, 1.0), max(freedom, 1.0)


def _own_variances(cells: list[np.ndarray]) -> dict[int, float]:
    """The sides whose sessions spread beyond the other sides' (each side's own variance, the
    drift's share restored, over the others' pooled one: an F test at
    ``HETEROGENEITY_LEVEL``), with that variance; none with fewer than three sides (two sides
    share one set of residuals). Against the others, not the pool: a side with many sessions
    would otherwise make most of the pool it is tested against."""
    count = len(cells)
    if count < 3:
        return {}
    flagged = {}
    for side, figures in enumerate(cells):
        side_freedom = len(figures) - 1
        others, freedom = _pooled(cells, [other for other in range(count) if other != side])
        if side_freedom < 1 or others <= 0.0:
            continue
        own = float(((figures - figures.mean()) ** 2).sum()) / (side_freedom * (count - 1) / count)
        if own > others * stats.f.ppf(1.0 - HETEROGENEITY_LEVEL, side_freedom, freedom):
            flagged[side] = own
    return flagged
