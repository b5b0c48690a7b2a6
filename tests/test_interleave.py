"""The interleaver's rounds, with scripted sides (no runtime): a gate's open question keeps the
rounds going, a settled one stops them at the plan; sessions reopen every side, and the
intervals they give hold another run's estimate where intervals from rounds do not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from edgekit.common.stats import paired_ratio
from edgekit.errors import UserInputError
from edgekit.measure.interleave import Interleaved, interleave
from edgekit.worker.latency import Block, BlockTimer, NoiseGuard, Protocol, check_session_gap

PLAN = Protocol(warmup=0, min_runs=1, min_seconds=0.0, rounds=10, block_seconds=0.001, sessions=1)
IN_SESSIONS = Protocol(
    warmup=0, min_runs=1, min_seconds=0.0, rounds=9, block_seconds=0.001, sessions=3
)
QUIET = NoiseGuard(enabled=False)


class Scripted(BlockTimer):
    """A side whose block medians scatter around ``ms`` by ``spread`` (seeded)."""

    def __init__(self, label: str, ms: float, spread: float, seed: int) -> None:
        self.label, self.ms, self.spread, self.warm_ms, self.runtime = label, ms, spread, 1.0, {}
        self._rng = np.random.default_rng(seed)

    def block(self, runs: int) -> Block:
        value = self.ms * (1.0 + self._rng.normal(0.0, self.spread))
        return Block([value] * runs, value, value)


def sides(candidate_ms: float, spread: float = 0.06) -> list[BlockTimer]:
    return [Scripted("reference", 1.0, spread, 1), Scripted("candidate", candidate_ms, spread, 2)]


def over_threshold(bound: float):
    def decided(result: Interleaved) -> bool:
        _, (low, high) = result.ratio(1, 0)
        return low > bound or high <= bound

    return decided


def test_without_a_question_the_plan_is_the_number_of_rounds():
    result = interleave(sides(1.15), PLAN, QUIET)
    assert len(result.rounds_used) == PLAN.rounds


def test_a_settled_question_stops_at_the_plan():
    result = interleave(sides(1.5), PLAN, QUIET, decided=over_threshold(1.10), max_rounds=40)
    assert len(result.rounds_used) == PLAN.rounds
    assert result.ratio(1, 0)[1][0] > 1.10


def test_an_open_question_goes_on_until_the_interval_leaves_the_threshold():
    planned = interleave(sides(1.15), PLAN, QUIET)
    _, (low, high) = planned.ratio(1, 0)
    assert low <= 1.10 < high  # ten rounds cannot tell 15 % from 10 % at this spread
    result = interleave(sides(1.15), PLAN, QUIET, decided=over_threshold(1.10), max_rounds=40)
    assert PLAN.rounds < len(result.rounds_used) <= 40
    assert result.ratio(1, 0)[1][0] > 1.10  # caught


def test_an_answer_that_never_comes_stops_at_the_cap():
    result = interleave(sides(1.0), PLAN, QUIET, decided=lambda result: False, max_rounds=25)
    assert len(result.rounds_used) == 25


class Session(BlockTimer):
    """A side whose every session runs at its own speed (where its buffers landed, the
    machine's minute): rounds within a session agree to 0.5 %, sessions differ by ``between``."""

    def __init__(self, label: str, between: float, rng: np.random.Generator) -> None:
        self.label, self.between, self._rng, self.warm_ms, self.runtime = (
            label,
            between,
            rng,
            1.0,
            {},
        )
        self.session_ms = float(np.exp(rng.normal(0.0, between)))
        self.opened = 1

    def reopen(self) -> BlockTimer:
        again = Session(self.label, self.between, self._rng)
        again.opened = self.opened + 1
        return again

    def block(self, runs: int) -> Block:
        value = self.session_ms * (1.0 + self._rng.normal(0.0, 0.005))
        return Block([value] * runs, value, value)


def one_run(seed: int) -> tuple[float, tuple[float, float], tuple[float, float]]:
    """Two sides of the same speed: the ratio, its interval from sessions, and from rounds."""
    rng = np.random.default_rng(seed)
    timers: list[BlockTimer] = [Session("a", 0.04, rng), Session("b", 0.04, rng)]
    result = interleave(timers, IN_SESSIONS, QUIET)
    ratio, from_sessions = result.ratio(1, 0)
    _, from_rounds = paired_ratio(result.rounds_ms(1), result.rounds_ms(0))
    return ratio, from_sessions, from_rounds


def test_every_side_is_reopened_between_sessions():
    timers: list[BlockTimer] = [Session(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    result = interleave(timers, IN_SESSIONS, QUIET)
    assert result.session_of_round == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [timer.opened for timer in timers] == [3, 3]  # the caller's list holds the last ones


def test_session_intervals_hold_another_runs_estimate_where_round_intervals_do_not():
    runs = [one_run(seed) for seed in range(20)]
    pairs = [(i, j) for i in range(len(runs)) for j in range(len(runs)) if i != j]

    def held(which: int) -> float:
        return sum(runs[i][which][0] <= runs[j][0] <= runs[i][which][1] for i, j in pairs) / len(
            pairs
        )

    assert held(1) >= 0.85  # a 95 % prediction interval over sessions
    assert held(2) < 0.5  # rounds alone cannot see how far sessions differ


def test_a_session_gap_waits_before_every_new_session_and_nowhere_else(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("edgekit.measure.interleave.time.sleep", waits.append)
    spread_out = replace(IN_SESSIONS, session_gap_s=120.0)
    timers: list[BlockTimer] = [Session(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    result = interleave(timers, spread_out, QUIET)
    assert waits == [120.0, 120.0]  # three sessions, two gaps between them
    assert result.session_of_round == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_session_gap_needs_sessions_to_wait_between():
    with pytest.raises(UserInputError, match="needs --sessions 2 or more"):
        check_session_gap(60.0, 1)
    with pytest.raises(UserInputError, match=">= 0 seconds"):
        check_session_gap(-1.0, 4)
    check_session_gap(0.0, 1)  # no gap: nothing to check
