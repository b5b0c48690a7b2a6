"""The interleaver's rounds, with scripted sides (no runtime): a gate's open question adds
sessions, a settled one stops at the plan; sessions reopen every side, and the intervals they give
hold another run's estimate where intervals from rounds do not (what the intervals promise is
tested by simulation in test_intervals.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scripted_sides import NO_GUARD, Scripted

from edgekit.common.stats import paired_ratio
from edgekit.errors import EdgekitError, UserInputError
from edgekit.measure.interleave import interleave
from edgekit.measure.interleaved import (
    STOPPED_BUDGET,
    STOPPED_FAILED,
    STOPPED_PLAN,
    STOPPED_PRECISION,
    STOPPED_SESSIONS,
    Interleaved,
)
from edgekit.measure.sessions import ALONE_COPIES
from edgekit.measure.simulated import SimulatedMachine, SimulatedSide
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol, NoiseGuard, check_session_gap

PLAN = LatencyProtocol(
    warmup=0,
    min_runs=1,
    min_seconds=0.0,
    rounds=10,
    block_seconds=0.001,
    sessions=1,
    precision=None,
)
IN_SESSIONS = LatencyProtocol(
    warmup=0, min_runs=1, min_seconds=0.0, rounds=9, block_seconds=0.001, sessions=3,
    precision=None,
)  # fmt: skip


def sides(candidate_ms: float, spread: float = 0.06) -> list[BlockTimer]:
    return [Scripted("reference", 1.0, spread, 1), Scripted("candidate", candidate_ms, spread, 2)]


def over_threshold(bound: float):
    def decided(result: Interleaved) -> bool:
        _, (low, high) = result.ratio(1, 0)
        return low > bound or high <= bound

    return decided


def test_without_a_question_the_plan_is_the_number_of_rounds():
    result = interleave(sides(1.15), PLAN, NO_GUARD)
    assert len(result.rounds_used) == PLAN.rounds


def test_a_settled_question_stops_at_the_plan():
    result = interleave(sides(1.5), PLAN, NO_GUARD, decided=over_threshold(1.10))
    assert len(result.rounds_used) == PLAN.rounds and result.stopped == "decided"
    assert result.ratio(1, 0)[1][0] > 1.10


def test_an_open_question_adds_sessions_until_the_interval_leaves_the_threshold():
    planned = interleave(sides(1.15), PLAN, NO_GUARD)
    _, (low, high) = planned.ratio(1, 0)
    assert low <= 1.10 < high  # ten rounds cannot tell 15 % from 10 % at this spread
    result = interleave(sides(1.15), PLAN, NO_GUARD, decided=over_threshold(1.10))
    assert len(set(result.sessions_used)) > 1 and result.stopped == "decided"
    assert result.ratio(1, 0)[1][0] > 1.10  # caught


def test_an_answer_that_never_comes_stops_at_the_most_sessions():
    capped = replace(PLAN, max_sessions=4)
    result = interleave(sides(1.0), capped, NO_GUARD, decided=lambda result: False)
    assert len(set(result.sessions_used)) == 4 and result.stopped == "sessions"


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
    result = interleave(timers, IN_SESSIONS, NO_GUARD)
    ratio, from_sessions = result.ratio(1, 0)
    _, from_rounds = paired_ratio(result.rounds_ms(1), result.rounds_ms(0))
    return ratio, from_sessions, from_rounds


def test_every_side_is_reopened_between_sessions():
    timers: list[BlockTimer] = [Session(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    result = interleave(timers, IN_SESSIONS, NO_GUARD)
    assert result.session_of_round == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [timer.opened for timer in timers] == [3, 3]  # the caller's list holds the last ones


def test_session_intervals_hold_another_runs_estimate_where_round_intervals_do_not():
    runs = [one_run(seed) for seed in range(20)]
    pairs = [(i, j) for i in range(len(runs)) for j in range(len(runs)) if i != j]

    def held(which: int) -> float:
        return sum(runs[i][which][0] <= runs[j][0] <= runs[i][which][1] for i, j in pairs) / len(
            pairs
        )

    # a 95 % interval of the ratio holds another run's estimate less often than the truth (both
    # scatter); with two degrees of freedom its t quantile makes up most of that here
    assert held(1) >= 0.8
    assert held(2) < 0.5  # rounds alone cannot see how far sessions differ


def test_a_session_gap_waits_before_every_new_session_and_nowhere_else(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("edgekit.measure.interleave.time.sleep", waits.append)
    spread_out = replace(IN_SESSIONS, session_gap_s=120.0)
    timers: list[BlockTimer] = [Session(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    result = interleave(timers, spread_out, NO_GUARD)
    assert waits == [120.0, 120.0]  # three sessions, two gaps between them
    assert result.session_of_round == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_session_gap_needs_sessions_to_wait_between():
    with pytest.raises(UserInputError, match="needs --sessions 2 or more"):
        check_session_gap(60.0, 1)
    with pytest.raises(UserInputError, match=">= 0 seconds"):
        check_session_gap(-1.0, 4)
    check_session_gap(0.0, 1)  # no gap: nothing to check


def test_a_negative_session_gap_is_refused_when_the_protocol_is_made():
    """The Python API builds protocols without the CLI's check: the protocol checks itself, so
    no negative gap reaches the wait between sessions."""
    with pytest.raises(UserInputError, match=">= 0 seconds"):
        LatencyProtocol(sessions=2, session_gap_s=-1.0)


class Fixed(BlockTimer):
    """A side of ``warm_ms`` per invoke whose blocks report others' CPU from a script:
    ``disturbed_rounds`` are the blocks (by count) that ran beside foreign load."""

    def __init__(self, label: str, warm_ms: float, disturbed_rounds=(), fails_at=None) -> None:
        self.label, self.warm_ms, self.runtime = label, warm_ms, {}
        self.disturbed_rounds, self.fails_at, self.count = set(disturbed_rounds), fails_at, 0

    def block(self, runs: int) -> Block:
        from edgekit.errors import EdgekitError

        if self.count == self.fails_at:
            raise EdgekitError(f"{self.label} crashed")
        foreign = 0.9 if self.count in self.disturbed_rounds else 0.0
        self.count += 1
        return Block([self.warm_ms] * runs, self.warm_ms, self.warm_ms, foreign_cpu=foreign)


def test_blocks_last_block_seconds_and_rounds_cover_min_runs_and_min_seconds():
    from edgekit.measure.interleave import block_sizes

    timers: list[BlockTimer] = [Fixed("slow", 2.0), Fixed("fast", 0.5)]
    plan = LatencyProtocol(
        rounds=3,
        block_seconds=0.1,
        max_runs=150,
        min_runs=1001,
        min_seconds=0.0,
        max_seconds=1000.0,
    )
    # 100 ms blocks: 50 runs of 2 ms; 200 runs of 0.5 ms, capped at max_runs
    assert block_sizes(timers, plan) == ([50, 150], 21)  # 1001 runs / 50 a block, rounded up
    longer = replace(plan, min_runs=1, min_seconds=3.1)
    assert block_sizes(timers, longer) == ([50, 150], 42)  # 3.1 s / the 75 ms block, rounded up
    capped = replace(longer, max_seconds=1.9999)
    assert block_sizes(timers, capped) == ([50, 150], 19)  # 1.9999 s / the 100 ms block, down
    one_second = LatencyProtocol(rounds=3, block_seconds=1.0, min_runs=1, min_seconds=0.0)
    assert block_sizes([Fixed("quick", 0.4)], one_second)[0] == [2500]  # 1 s of 0.4 ms
    # one run a block: a second holds 2500 blocks of 0.4 ms (1000 // 0.4 is 2499 in floats)
    single = LatencyProtocol(rounds=3, block_seconds=0.0001, min_runs=10**6, max_seconds=1.0)
    assert block_sizes([Fixed("quick", 0.4)], single) == ([1], 2500)
    tiny = replace(longer, max_seconds=0.01)
    assert block_sizes(timers, tiny)[1] == 3  # never fewer than the clean rounds a ratio needs
    assert block_sizes([Fixed("one", 500.0)], replace(plan, min_runs=1))[0] == [1]


def test_several_sessions_of_one_thing_count_as_their_geometric_mean_per_round():
    def blocks(*ms: float) -> list[Block]:
        return [Block(None, value, value) for value in ms]

    result = Interleaved(["a", "a again"], [1, 1], [blocks(2.0, 1.0), blocks(8.0, 9.0)],
                         rounds_used=[0, 1])  # fmt: skip
    assert result.rounds_ms(0) == [2.0, 1.0]
    assert result.rounds_ms([0, 1]) == pytest.approx([4.0, 3.0])


def test_a_disturbed_round_earns_another_and_is_left_out_while_enough_clean_ones_remain(
    monkeypatch,
):
    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet", lambda *a, **k: None)
    guard = NoiseGuard(threshold=0.15, retries=1)
    timers: list[BlockTimer] = [Fixed("a", 1.0, disturbed_rounds={0, 1}), Fixed("b", 1.0)]
    said: list[str] = []
    result = interleave(timers, PLAN, guard, progress=said.append)
    assert result.disturbed == [True, True] + [False] * 10  # two more rounds than planned
    assert said == ["session 1: 10 round(s) of every side", "round 5", "round 10"]
    assert result.rounds_used == list(range(2, 12))
    # always disturbed: at most retries x the plan more rounds, then every round counts
    always = [Fixed("a", 1.0, disturbed_rounds=range(100)), Fixed("b", 1.0)]
    result = interleave(always, PLAN, guard)
    assert len(result.disturbed) == 20 and result.rounds_used == list(range(20))


def test_a_disturbed_rounds_extra_round_runs_in_its_own_session(monkeypatch):
    """Two rounds of the first session disturbed: their two extra rounds run in that session,
    so every session keeps its three clean rounds (a session-based interval needs them all)."""
    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet", lambda *a, **k: None)
    guard = NoiseGuard(threshold=0.15, retries=1)
    timers: list[BlockTimer] = [Fixed("a", 1.0, disturbed_rounds={0, 1}), Fixed("b", 1.0)]
    result = interleave(timers, IN_SESSIONS, guard)
    assert result.session_of_round == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert result.sessions_used == [0, 0, 0, 1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize(("disturbed", "used"), [(5, 5), (6, 10)])
def test_half_the_plan_clean_is_enough_to_leave_the_rest_out(monkeypatch, disturbed, used):
    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet", lambda *a, **k: None)
    no_retries = NoiseGuard(threshold=0.15, retries=0)
    timers: list[BlockTimer] = [Fixed("a", 1.0, disturbed_rounds=range(disturbed)),
                                Fixed("b", 1.0)]  # fmt: skip
    result = interleave(timers, PLAN, no_retries)
    assert len(result.rounds_used) == used  # 5 clean of 10 are enough; 4 are not


def test_the_guard_records_how_busy_the_machine_was_before_the_rounds(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet",
                        lambda *a, **k: SimpleNamespace(foreign=0.3))  # fmt: skip
    result = interleave([Fixed("a", 1.0), Fixed("b", 1.0)], PLAN, NoiseGuard())
    assert result.settle == 0.3
    assert interleave([Fixed("a", 1.0), Fixed("b", 1.0)], PLAN, NO_GUARD).settle is None


def test_a_side_that_crashes_stops_alone_and_all_crashing_stops_the_rounds():
    crashing: list[BlockTimer] = [Fixed("a", 1.0, fails_at=4), Fixed("b", 1.0)]
    result = interleave(crashing, PLAN, NO_GUARD)
    assert result.failed == {0: "a crashed"} and len(result.blocks[0]) == 4
    assert len(result.blocks[1]) == len(result.rounds_used) == PLAN.rounds  # b went on
    everything = [Fixed("a", 1.0, fails_at=2), Fixed("b", 1.0, fails_at=2)]
    result = interleave(everything, PLAN, NO_GUARD)
    assert set(result.failed) == {0, 1} and result.rounds_used == []  # nothing to compare


def test_progress_says_the_round_every_five_and_each_new_session(monkeypatch):
    monkeypatch.setattr("edgekit.measure.interleave.time.sleep", lambda seconds: None)
    said: list[str] = []
    interleave(sides(1.0), PLAN, NO_GUARD, progress=said.append)
    assert said == ["session 1: 10 round(s) of every side", "round 5", "round 10"]
    said.clear()
    timers: list[BlockTimer] = [Session(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    interleave(timers, IN_SESSIONS, NO_GUARD, progress=said.append)
    sessions = [f"session {k}: 3 round(s) of every side" for k in (1, 2, 3)]
    assert said == [sessions[0], sessions[1], "round 5", sessions[2]]  # no gap, no wait
    said.clear()
    interleave(timers, replace(IN_SESSIONS, session_gap_s=120.0), NO_GUARD, progress=said.append)
    assert said == [sessions[0], "waiting 120 s before session 2", sessions[1], "round 5",
                    "waiting 120 s before session 3", sessions[2]]  # fmt: skip


class Crashes(Session):
    """A side whose first block crashes its session."""

    def block(self, runs: int) -> Block:
        raise EdgekitError(f"{self.label} crashed")


def test_once_every_side_has_crashed_nothing_waits_or_runs_again(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("edgekit.measure.interleave.time.sleep", waits.append)
    said: list[str] = []
    everything = [Crashes(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    gapped = replace(IN_SESSIONS, session_gap_s=120.0)
    result = interleave(everything, gapped, NO_GUARD, progress=said.append)
    assert result.stopped == STOPPED_FAILED and set(result.failed) == {0, 1}
    assert waits == [] and said == ["session 1: 3 round(s) of every side"]
    assert [side.opened for side in everything] == [1, 1]  # neither reopened
    assert result.disturbed == [] and result.session_of_round == []  # no round was completed


def test_a_side_that_crashed_is_not_reopened_and_the_others_still_are():
    rng = np.random.default_rng(0)
    timers: list[BlockTimer] = [Crashes("a", 0.04, rng), Session("b", 0.04, rng)]
    result = interleave(timers, IN_SESSIONS, NO_GUARD)
    assert result.failed == {0: "a crashed"}
    assert [timer.opened for timer in timers] == [1, 3]


def test_min_seconds_rounds_up_from_the_exact_block_count():
    from edgekit.measure.interleave import block_sizes

    ten_ms: list[BlockTimer] = [Fixed("a", 10.0)]
    plan = LatencyProtocol(
        rounds=3, block_seconds=0.01, min_runs=1, min_seconds=0.5, max_seconds=100.0
    )
    assert block_sizes(ten_ms, plan) == ([1], 50)  # 500 ms of 10 ms blocks, exactly
    assert block_sizes(ten_ms, replace(plan, min_seconds=0.5002))[1] == 51  # a bit more: one up


def test_the_rounds_end_at_the_plan_past_two_hundred_and_fifty_six():
    # Python keeps one object per small int; past 256 only value comparisons count rounds right
    many = replace(PLAN, rounds=300, max_seconds=10.0)

    def bounded() -> list[BlockTimer]:  # a loop that missed its end stops at 1000 rounds
        return [Fixed("a", 0.001, fails_at=1000), Fixed("b", 0.001, fails_at=1000)]

    result = interleave(bounded(), many, NO_GUARD)
    assert len(result.rounds_used) == 300 and not result.failed
    once_open = iter([False, True])
    result = interleave(bounded(), many, NO_GUARD, decided=lambda result: next(once_open))
    # the open question earned one more session (of the fewest rounds: nothing scatters), then
    # settled
    assert len(result.rounds_used) == 302 and result.sessions_used[-1] == 1


def test_a_short_session_gap_still_waits(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("edgekit.measure.interleave.time.sleep", waits.append)
    timers: list[BlockTimer] = [Session(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    interleave(timers, replace(IN_SESSIONS, session_gap_s=0.5), NO_GUARD)
    assert waits == [0.5, 0.5]


def test_every_side_goes_first_in_turn():
    went: list[str] = []

    class Logged(Fixed):
        def block(self, runs: int) -> Block:
            went.append(self.label)
            return super().block(runs)

    three: list[BlockTimer] = [Logged(label, 1.0) for label in "abc"]
    interleave(three, replace(PLAN, rounds=3), NO_GUARD)
    assert went == [*"abc", *"bca", *"cab"]  # three rounds, each one side later


def test_a_block_at_the_threshold_is_still_clean(monkeypatch):
    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet", lambda *a, **k: None)
    at_threshold = NoiseGuard(threshold=0.9, retries=1)  # Fixed's disturbed blocks report 0.9
    timers: list[BlockTimer] = [Fixed("a", 1.0, disturbed_rounds={0}), Fixed("b", 1.0)]
    result = interleave(timers, PLAN, at_threshold)
    assert result.disturbed == [False] * PLAN.rounds


def test_an_open_question_past_the_retry_budget_does_not_earn_retries(monkeypatch):
    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet", lambda *a, **k: None)
    no_retries = NoiseGuard(threshold=0.15, retries=0)
    timers: list[BlockTimer] = [Fixed("a", 1.0, disturbed_rounds=range(10, 100)), Fixed("b", 1.0)]
    two = replace(PLAN, max_sessions=2)
    result = interleave(timers, two, no_retries, decided=lambda result: False)
    # the plan's ten rounds and the second session's two, none more for the disturbed ones
    assert len(result.disturbed) == 12


def test_a_side_whose_reopening_fails_stops_there_and_the_others_go_on():
    class CannotReopen(Session):
        def reopen(self) -> BlockTimer:
            from edgekit.errors import EdgekitError

            raise EdgekitError(f"{self.label} did not load again")

    rng = np.random.default_rng(0)
    timers: list[BlockTimer] = [CannotReopen("a", 0.04, rng), Session("b", 0.04, rng)]
    result = interleave(timers, IN_SESSIONS, NO_GUARD)
    assert result.failed == {0: "a did not load again"}
    assert len(result.blocks[0]) == 3 and len(result.blocks[1]) == IN_SESSIONS.rounds


def test_half_of_an_odd_plan_rounds_down(monkeypatch):
    monkeypatch.setattr("edgekit.measure.interleave.wait_for_quiet", lambda *a, **k: None)
    eleven = replace(PLAN, rounds=11)
    timers: list[BlockTimer] = [Fixed("a", 1.0, disturbed_rounds=range(6)), Fixed("b", 1.0)]
    result = interleave(timers, eleven, NoiseGuard(threshold=0.15, retries=0))
    assert result.rounds_used == list(range(6, 11))  # 5 clean of 11 are enough


# --- the stopping rule's bookkeeping, on a simulated machine (seconds are simulated: a block
# takes 0.1 s, reopening a side 1 s; what the intervals then promise is test_intervals.py's) ---

PRECISE = replace(IN_SESSIONS, sessions=2, rounds=6, precision=0.05, budget_s=1e9,
                  max_sessions=60)  # fmt: skip


def simulated(seed: int, true_ms: list[float], session_sd: float = 0.04, wild: float = 0.0):
    """Sides of ``true_ms`` on a seeded simulated machine, the last one's sessions ``wild``
    apart where given (a baseline whose process lands far from its last one)."""
    machine = SimulatedMachine(np.random.default_rng(seed), len(true_ms))
    timers: list[BlockTimer] = [
        SimulatedSide(f"side {index}", ms, wild if wild and index == len(true_ms) - 1
                      else session_sd, 0.01, machine)
        for index, ms in enumerate(true_ms)
    ]  # fmt: skip
    return timers, machine


def test_the_precision_rule_reopens_every_side_until_each_interval_is_within_it():
    timers, machine = simulated(1, [1.0, 1.3, 0.7])
    machine.now = 100.0  # a clock that did not start at zero
    said: list[str] = []
    result = interleave(timers, PRECISE, NO_GUARD, clock=machine.clock, progress=said.append)
    assert result.stopped == STOPPED_PRECISION and result.widest() <= 0.05
    sessions = len(set(result.sessions_used))
    assert sessions > PRECISE.sessions  # the plan alone did not reach 5 %
    # each side counts its sessions 0, 1, 2, ... and every reopening reopened all three
    assert all(sorted(set(result.sessions_of(side))) == list(range(sessions))
               for side in range(3))  # fmt: skip
    assert result.reopens_s == [pytest.approx(3.0)] * (sessions - 1)
    assert result.seconds == pytest.approx(machine.clock() - 100.0)
    numbers = [int(line.split()[1].rstrip(":")) for line in said if line.startswith("session")]
    assert numbers == list(range(1, sessions + 1))


def test_measuring_stops_before_a_session_that_would_overrun_the_budget():
    budget = 30.0
    timers, machine = simulated(2, [1.0, 1.3, 0.7])
    result = interleave(timers, replace(PRECISE, precision=0.001, budget_s=budget), NO_GUARD,
                        clock=machine.clock)  # fmt: skip
    assert result.stopped == STOPPED_BUDGET
    assert len(set(result.sessions_used)) > PRECISE.sessions  # it went on while the budget held
    assert result.seconds <= budget
    # and it stopped for want of time: the shortest session (three reopenings, two rounds of
    # three 0.1 s blocks) no longer fit
    assert result.seconds + 3.0 + 2 * 0.3 > budget


def test_an_open_precision_rule_stops_at_the_most_sessions():
    timers, machine = simulated(3, [1.0, 1.3, 0.7])
    result = interleave(timers, replace(PRECISE, precision=0.001, max_sessions=5), NO_GUARD,
                        clock=machine.clock)  # fmt: skip
    assert result.stopped == STOPPED_SESSIONS and len(set(result.sessions_used)) == 5


def test_a_crashed_side_leaves_the_others_measured_to_the_precision():
    timers, machine = simulated(4, [1.0, 1.3, 0.7])
    crashing: list[BlockTimer] = [Crashes("crashes", 0.04, np.random.default_rng(0)), *timers]
    result = interleave(crashing, PRECISE, NO_GUARD, clock=machine.clock)
    assert result.failed == {0: "crashes crashed"}
    assert result.stopped == STOPPED_PRECISION and result.widest() <= 0.05
    # with one side left there is nothing to compare: the plan, then stop
    lone: list[BlockTimer] = [Crashes(n, 0.04, np.random.default_rng(0)) for n in "ab"]
    lone.append(simulated(5, [1.0])[0][0])
    result = interleave(lone, PRECISE, NO_GUARD, clock=machine.clock)
    assert result.stopped == STOPPED_PLAN


def test_a_wild_side_is_reopened_alone_in_copies_each_counted_as_its_own_session():
    timers, machine = simulated(3, [1.0, 1.2, 0.9, 3.0], session_sd=0.02, wild=0.2)
    said: list[str] = []
    result = interleave(timers, replace(PRECISE, budget_s=200.0), NO_GUARD,
                        clock=machine.clock, progress=said.append)  # fmt: skip
    alone = result.reopened_alone.get(3, 0)
    assert alone > 0 and alone % ALONE_COPIES == 0 and set(result.reopened_alone) == {3}
    calm = len(set(result.sessions_of(0)))
    assert sorted(set(result.sessions_of(3))) == list(range(calm + alone))
    assert result.alone_reopens_s == [pytest.approx(1.0)] * (alone // ALONE_COPIES)
    assert result.seconds == pytest.approx(machine.clock())
    assert result.seconds <= 200.0  # structural: simulated seconds, within the budget
    lines = [line for line in said if line.startswith("session")]
    numbers = [int(line.split()[1].rstrip(":")) for line in lines]
    assert numbers == list(range(1, len(numbers) + 1))
    assert f"side 3 in {ALONE_COPIES} new process(es) at once" in " ".join(lines)
    # its own sessions scatter far more than its rounds: one round each buys the most
    own = [label for label in result.sessions_of(3) if label >= calm]
    assert all(own.count(label) == 1 for label in set(own))


def test_a_gate_never_reopens_a_side_alone():
    timers, machine = simulated(3, [1.0, 1.2, 0.9, 3.0], session_sd=0.02, wild=0.2)
    result = interleave(timers, replace(PRECISE, budget_s=200.0), NO_GUARD,
                        clock=machine.clock, decided=lambda result: False)  # fmt: skip
    assert result.reopened_alone == {} and result.stopped == STOPPED_BUDGET


def test_what_steers_the_rounds_is_named_never_placed():
    with pytest.raises(TypeError):
        interleave(sides(1.0), PLAN, NO_GUARD, print)  # type: ignore[misc]


def test_a_plan_past_the_most_sessions_runs_whole_and_then_stops():
    timers, machine = simulated(6, [1.0, 1.3, 0.7])
    capped = replace(PRECISE, sessions=4, rounds=8, precision=0.001, budget_s=60.0,
                     max_sessions=2)  # fmt: skip
    result = interleave(timers, capped, NO_GUARD, clock=machine.clock)
    assert result.stopped == STOPPED_SESSIONS and len(set(result.sessions_used)) == 4


class Tracked(SimulatedSide):
    """A simulated side that keeps every copy it opened, and whether each was released; one
    that can start only ``at_once`` copies at a time gives that many (as a timer that cannot
    start several processes together gives one)."""

    def __init__(self, label: str, true_ms: float, session_sd: float, machine: SimulatedMachine,
                 *, at_once: int | None = None, opened: list | None = None) -> None:  # fmt: skip
        super().__init__(label, true_ms, session_sd, 0.01, machine)
        self.at_once, self.closed = at_once, False
        self.opened: list[list[Tracked]] = [] if opened is None else opened

    def reopen(self) -> BlockTimer:
        self.machine.now += self.machine.reopen_s
        return Tracked(self.label, self.true_ms, self.session_sd, self.machine,
                       at_once=self.at_once, opened=self.opened)  # fmt: skip

    def reopen_many(self, count: int) -> list[BlockTimer]:
        copies = [self.reopen() for _ in range(min(count, self.at_once or count))]
        self.opened.append(copies)
        return copies

    def close(self) -> None:
        self.closed = True


def test_wild_sides_reopened_alone_in_unequal_copies_each_run_every_copy_and_release_it(
    monkeypatch,
):
    """Two sides reopened alone: one can start three copies at once, the other only one. Each
    copy runs its session in turn; a side's copy is released when its next one takes over."""
    import edgekit.measure.interleave as interleave_module

    monkeypatch.setattr(interleave_module, "ALONE_COPIES", 3)
    machine = SimulatedMachine(np.random.default_rng(11), 4)
    timers: list[BlockTimer] = [
        Tracked("calm a", 1.0, 0.02, machine),
        Tracked("calm b", 1.2, 0.02, machine),
        Tracked("one at a time", 0.9, 0.3, machine, at_once=1),
        Tracked("three at once", 3.0, 0.3, machine),
    ]
    result = interleave(timers, replace(PRECISE, budget_s=300.0), NO_GUARD, clock=machine.clock)
    single, triple = timers[2], timers[3]
    assert isinstance(single, Tracked) and isinstance(triple, Tracked)
    assert single.opened and triple.opened  # both were reopened alone
    assert all(len(copies) == 1 for copies in single.opened)
    assert all(len(copies) == 3 for copies in triple.opened)
    assert result.reopened_alone == {2: len(single.opened), 3: 3 * len(triple.opened)}
    # every copy but a batch's last was released when the next took over
    assert all(copy.closed for copies in triple.opened for copy in copies[:-1])
