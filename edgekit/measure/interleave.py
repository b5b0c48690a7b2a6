"""Interleaved measurement: every side (artifacts, the baseline, a candidate and its reference)
runs one block per round, in a rotating order, so that all of them see the same machine state.

On a shared VM, noise that /proc/stat cannot see moves a latency by tens of percent between two
moments; two timings taken at different moments do not give a ratio. Within a round the sides
are seconds apart, so the round's drift is common to all of them and cancels in every ratio.

What rounds cannot see is a session's own state: where a runtime's kernels and buffers landed
moves a latency by several percent from one process to the next. So the rounds run in sessions:
every side is reopened (a new process for a host worker) between them, all in the same rounds,
and a ratio's interval comes from a model with both levels, rounds within sessions and sessions
within sides, each level's variance estimated from the pool's own data
(``edgekit.common.two_levels.fit_two_levels``).

How much to measure is decided as it goes (Kalibera and Jones, 2013): after the planned
sessions, while any interval the decision needs is wider than ``protocol.precision`` of its
ratio, one more session is added, of the number of rounds that buys the most precision per
second given the two measured variances and the measured costs of a round and of reopening
every side, until the precision holds or ``protocol.budget_s`` would be exceeded."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from edgekit.errors import EdgekitError
from edgekit.measure.interleaved import (
    STOPPED_BUDGET,
    STOPPED_DECIDED,
    STOPPED_FAILED,
    STOPPED_PLAN,
    STOPPED_PRECISION,
    STOPPED_SESSIONS,
    Interleaved,
)
from edgekit.measure.sessions import (
    ALONE_COPIES,
    reopen_alone,
    reopen_cost,
    reopen_sides,
    rounds_per_session,
    session_plan,
    wild_sides,
)
from edgekit.worker.interference import wait_for_quiet
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol, NoiseGuard

MIN_CLEAN_ROUNDS = 3


def block_sizes(timers: list[BlockTimer], protocol: LatencyProtocol) -> tuple[list[int], int]:
    """Runs per block for each side (a block lasts about ``block_seconds``) and the number of
    rounds that gives every side ``min_runs`` runs and ``min_seconds`` of timing, within
    ``max_seconds`` per side."""
    runs = [
        max(1, min(protocol.max_runs, round(protocol.block_seconds * 1e3 / timer.warm_ms)))
        for timer in timers
    ]
    needed = protocol.rounds
    cap = None
    for timer, count in zip(timers, runs, strict=True):
        block_ms = count * timer.warm_ms
        needed = max(
            needed,
            math.ceil(protocol.min_runs / count),
            math.ceil(protocol.min_seconds * 1e3 / block_ms),
        )
        side_cap = max(MIN_CLEAN_ROUNDS, math.floor(protocol.max_seconds * 1e3 / block_ms))
        cap = side_cap if cap is None else min(cap, side_cap)
    return runs, min(needed, cap or needed)


def interleave(
    timers: list[BlockTimer],
    protocol: LatencyProtocol,
    guard: NoiseGuard,
    *,
    progress: Callable[[str], None] | None = None,
    decided: Callable[[Interleaved], bool] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Interleaved:
    """Alternate ``timers`` in rounds, in sessions (every side reopened between them); each
    disturbed round earns one more round in its session (at most ``guard.retries`` x the
    session's plan), and disturbed rounds are left out of the statistics while enough clean
    rounds remain.

    After the planned sessions, sessions are added while the answer is open and
    ``protocol.budget_s`` allows another: the answer is ``decided`` (a gate's question) where
    given, else every interval of ``pairs`` (all pairs of sides by default) within
    ``protocol.precision`` of its ratio; with neither, the plan is all."""
    say = progress or (lambda message: None)
    started = clock()
    runs, rounds = block_sizes(timers, protocol)
    result = Interleaved([timer.label for timer in timers], runs, [[] for _ in timers])
    result.side_sessions = [[] for _ in timers]
    result.precision = protocol.precision
    if guard.enabled:
        reading = wait_for_quiet(guard.threshold, max_wait_s=guard.settle_max_s)
        result.settle = None if reading is None else reading.foreign
    plan = session_plan(rounds, protocol.sessions)
    open_question = decided is not None or protocol.precision is not None
    round_costs: list[float] = []
    counters = [0] * len(timers)  # each side's sessions so far
    session = 0
    while True:
        planned = plan[session] if session < len(plan) else None
        alone: list[int] | None = None  # the sides to reopen by themselves (None: every side)
        if planned is None:
            if not open_question:
                result.stopped = STOPPED_PLAN
                break
            _choose_rounds(result, timers, sum(plan))
            why = _stop_reason(result, protocol, decided, pairs)
            if why:
                result.stopped = why
                break
            fit = result.fit()
            # _stop_reason stopped where nothing was fitted or no round ran
            assert fit is not None and round_costs
            if decided is None and result.reopened and protocol.precision is not None:
                alone = wild_sides(result, pairs, protocol.precision)
            session_cost = reopen_cost(result, alone)
            round_cost = statistics.mean(round_costs)
            if alone is None:
                planned = rounds_per_session(fit, session_cost, round_cost)
            else:
                # the wild sides' own session variance decides how long their sessions run
                own = max(result.level(side).variance * result.level(side).sessions
                          for side in alone)  # fmt: skip
                spread = replace(
                    fit, session_var=max(own - fit.round_var / fit.rounds_per_session, 0.0)
                )
                planned = rounds_per_session(spread, session_cost, round_cost, least=1)
            copies = 1 if alone is None else ALONE_COPIES
            needed = protocol.session_gap_s + copies * (session_cost + planned * round_cost)
            if clock() - started + needed > protocol.budget_s:
                result.stopped = STOPPED_BUDGET
                break
            if session >= protocol.max_sessions:
                result.stopped = STOPPED_SESSIONS
                break
        if session > 0 and protocol.session_gap_s > 0:
            say(f"waiting {protocol.session_gap_s:.0f} s before session {session + 1}")
            time.sleep(protocol.session_gap_s)
        reopening = clock()
        if alone is None:
            if session > 0:
                for side in reopen_sides(timers, result):
                    counters[side] += 1
                result.reopens_s.append(clock() - reopening)
            say(f"session {session + 1}: {planned} round(s) of every side")
            _run_session(timers, result, runs=runs, planned=planned, session=session,
                         guard=guard, round_costs=round_costs, counters=counters, clock=clock,
                         say=say)  # fmt: skip
        else:
            opened = reopen_alone(timers, result, alone, ALONE_COPIES)
            started_sessions = sum(len(timers_of) for timers_of in opened.values())
            if started_sessions:
                result.alone_reopens_s.append((clock() - reopening) / started_sessions)
            named = ", ".join(result.labels[side] for side in opened)
            say(f"session {session + 1}: {named} in {ALONE_COPIES} new process(es) at once, "
                f"{planned} round(s) each")  # fmt: skip
            for index in range(max((len(one) for one in opened.values()), default=0)):
                for side, timers_of in opened.items():
                    if index < len(timers_of):
                        if index:
                            timers[side].close()  # the copy before: its rounds are done
                        timers[side] = timers_of[index]
                        counters[side] += 1
                        result.reopened_alone[side] = result.reopened_alone.get(side, 0) + 1
                _run_session(timers, result, runs=runs, planned=planned, session=session,
                             guard=guard, round_costs=round_costs, counters=counters,
                             clock=clock, say=say)  # fmt: skip
        if len(result.failed) == len(timers):
            result.stopped = STOPPED_FAILED
            break
        session += 1
    _choose_rounds(result, timers, sum(plan))
    result.seconds = clock() - started
    return result


def _stop_reason(
    result: Interleaved,
    protocol: LatencyProtocol,
    decided: Callable[[Interleaved], bool] | None,
    pairs: Sequence[tuple[int, int]] | None,
) -> str | None:
    """Why measuring may stop now; None while the answer is open."""
    if len(result.alive) < 2 or not result.rounds_used:
        return STOPPED_PLAN
    if decided is not None:
        return STOPPED_DECIDED if decided(result) else None
    if result.widest(pairs) <= protocol.precision:
        return STOPPED_PRECISION
    return None


def _run_session(
    timers: list[BlockTimer],
    result: Interleaved,
    *,
    runs: list[int],
    planned: int,
    session: int,
    guard: NoiseGuard,
    round_costs: list[float],
    counters: list[int],
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> None:
    """``planned`` counted rounds of session ``session`` (each side in its session
    ``counters[side]``); a disturbed round earns another."""
    counted = extra = 0
    while counted < planned:
        began = clock()
        index = len(result.disturbed)
        order = [(index + offset) % len(timers) for offset in range(len(timers))]
        blocks: dict[int, Block] = {}
        for side in order:
            if side in result.failed:
                continue
            try:
                blocks[side] = timers[side].block(runs[side])
            except EdgekitError as exc:  # a crash or a hang fails that side only
                result.failed[side] = str(exc)
        for side, block in blocks.items():
            result.blocks[side].append(block)
        if len(result.failed) == len(timers):
            return
        disturbed = guard.enabled and any(
            block.foreign_cpu is not None and block.foreign_cpu > guard.threshold
            for block in blocks.values()
        )
        result.disturbed.append(disturbed)
        result.session_of_round.append(session)
        for side, count in enumerate(counters):
            result.side_sessions[side].append(count)
        round_costs.append(clock() - began)
        if disturbed and extra < guard.retries * planned:
            extra += 1  # one more round in this session for each disturbed one
        else:
            counted += 1
        if len(result.disturbed) % 5 == 0:
            say(f"round {len(result.disturbed)}")


def _choose_rounds(result: Interleaved, timers: list[BlockTimer], rounds: int) -> None:
    """The rounds the statistics use: the clean ones, while enough of them remain."""
    alive = [side for side in range(len(timers)) if side not in result.failed]
    complete = min((len(result.blocks[side]) for side in alive), default=0)
    result.disturbed = result.disturbed[:complete]
    result.session_of_round = result.session_of_round[:complete]
    result.side_sessions = [sessions[:complete] for sessions in result.side_sessions]
    clean = [r for r, bad in enumerate(result.disturbed) if not bad]
    enough = max(MIN_CLEAN_ROUNDS, rounds // 2)
    result.rounds_used = clean if len(clean) >= enough else list(range(len(result.disturbed)))
