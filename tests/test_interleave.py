"""The interleaver's rounds, with scripted sides (no runtime): a gate's open question keeps the
rounds going, a settled one stops them at the plan."""

from __future__ import annotations

import numpy as np

from edgekit.interleave import Interleaved, interleave
from edgekit.latency import Block, BlockTimer, NoiseGuard, Protocol

PLAN = Protocol(warmup=0, min_runs=1, min_seconds=0.0, rounds=10, block_seconds=0.001)
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
