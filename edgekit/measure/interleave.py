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
from dataclasses import dataclass, field, replace

import numpy as np

from edgekit.common.stats import (
    LevelFit,
    TwoLevelFit,
    combined,
    level_ratio,
    relative_half_width,
)
from edgekit.common.two_levels import fit_two_levels
from edgekit.errors import EdgekitError
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

# why the measuring stopped (``Interleaved.stopped``)
STOPPED_PLAN = "plan"  # no stopping rule: the planned sessions
STOPPED_PRECISION = "precision"  # every interval the decision needs is within the precision
STOPPED_DECIDED = "decided"  # a gate's question has its answer
STOPPED_BUDGET = "budget"  # another session would not fit in the budget
STOPPED_SESSIONS = "sessions"  # the most sessions a pool may take
STOPPED_FAILED = "failed"  # every side failed


@dataclass
class Interleaved:
    labels: list[str]
    block_runs: list[int]
    blocks: list[list[Block]] = field(default_factory=list)  # [side][round]
    disturbed: list[bool] = field(default_factory=list)  # per round
    rounds_used: list[int] = field(default_factory=list)
    settle: float | None = None  # others' CPU (cores) when the rounds began
    failed: dict[int, str] = field(default_factory=dict)  # side -> why it stopped
    session_of_round: list[int] = field(default_factory=list)  # the pool's reopenings before it
    # [side][round]: which of its own sessions a side ran each round in (a side whose sessions
    # spread far beyond the pool's may be reopened alone, so sides' counts differ)
    side_sessions: list[list[int]] = field(default_factory=list)
    stopped: str = STOPPED_PLAN
    seconds: float = 0.0  # the measuring's wall time, reopening included
    reopens_s: list[float] = field(default_factory=list)  # each reopening of every side
    reopened_alone: dict[int, int] = field(default_factory=dict)  # side -> sessions it had alone
    alone_reopens_s: list[float] = field(default_factory=list)  # per side, each reopening alone
    precision: float | None = None
    reopened: bool = True  # False: a side cannot start another session (its rounds differ
    # only in time, and the intervals cannot see a session's own offset)

    def rounds_ms(self, side: int | Sequence[int]) -> list[float]:
        """Per-round block medians of ``side``; of several sides, their geometric mean per
        round."""
        sides = [side] if isinstance(side, int) else list(side)
        if len(sides) == 1:
            return [self.blocks[sides[0]][r].median_ms for r in self.rounds_used]
        logs = [[math.log(self.blocks[s][r].median_ms) for r in self.rounds_used] for s in sides]
        return [math.exp(sum(values) / len(values)) for values in zip(*logs, strict=True)]

    def p50_ms(self, side: int | Sequence[int]) -> float:
        """The median invoke of ``side`` (several sides' samples pooled) over the rounds used, as
        ``bench`` reports it; the median of the block medians where a runner gives no samples."""
        sides = [side] if isinstance(side, int) else list(side)
        blocks = [self.blocks[s][r] for s in sides for r in self.rounds_used]
        return _median_of(blocks)

    def session_p50s_ms(self, side: int, rounds: Sequence[int] | None = None) -> list[float]:
        """``side``'s p50 in each session the rounds used (or ``rounds``) ran in, in order."""
        sessions: dict[int, list[Block]] = {}
        for r in self.rounds_used if rounds is None else rounds:
            label = (self.side_sessions[side] if self.side_sessions else self.session_of_round)[r]
            sessions.setdefault(label, []).append(self.blocks[side][r])
        return [_median_of(blocks) for _, blocks in sorted(sessions.items())]

    @property
    def sessions_used(self) -> list[int]:
        """The pool's reopening each round the statistics use ran after."""
        return [self.session_of_round[r] for r in self.rounds_used]

    def sessions_of(self, side: int) -> list[int]:
        """``side``'s own session of each round the statistics use (the pool's, where no side
        was reopened alone)."""
        sessions = self.side_sessions[side] if self.side_sessions else self.session_of_round
        return [sessions[r] for r in self.rounds_used]

    @property
    def alive(self) -> list[int]:
        return [side for side in range(len(self.labels)) if side not in self.failed]

    def fit(self) -> TwoLevelFit | None:
        """The two-level fit of the live sides over the rounds used (None: nothing to fit)."""
        alive = self.alive
        if not alive or not self.rounds_used:
            return None
        key = (tuple(alive), tuple(self.rounds_used), len(self.session_of_round))
        if getattr(self, "_fit_key", None) != key:
            logs = np.log([[self.blocks[s][r].median_ms for r in self.rounds_used] for s in alive])
            self._fit = fit_two_levels(logs, [self.sessions_of(s) for s in alive])
            self._fit_key = key
        return self._fit

    def level(self, side: int | Sequence[int]) -> LevelFit:
        """``side``'s level in the fit; of several sides of one thing (sessions of it open at
        once), their combined level."""
        sides = [side] if isinstance(side, int) else list(side)
        fit = self.fit()
        for one in sides:
            if fit is None or one in self.failed:
                raise EdgekitError(f"{self.labels[one]}: no latency figure to compare")
        levels = [fit.sides[self.alive.index(one)] for one in sides]
        return levels[0] if len(levels) == 1 else combined(levels)

    def ratio(
        self, side: int | Sequence[int], reference: int | Sequence[int], confidence: float = 0.95
    ) -> tuple[float, tuple[float, float]]:
        """Latency of ``side`` over ``reference``: > 1 means ``side`` is slower, with its
        interval from the two-level fit."""
        return level_ratio(self.level(side), self.level(reference), confidence)

    def widest(self, pairs: Sequence[tuple[int, int]] | None = None) -> float:
        """The widest relative half-width among ``pairs`` of live sides (all pairs by default)."""
        alive = self.alive
        chosen = pairs or [(a, b) for i, a in enumerate(alive) for b in alive[i + 1 :]]
        live = [(a, b) for a, b in chosen if a not in self.failed and b not in self.failed]
        widths = [
            relative_half_width(interval, ratio)
            for ratio, interval in (self.ratio(a, b) for a, b in live)
        ]
        return max(widths, default=0.0)

    def summary(self) -> dict[str, object]:
        """How the measuring went, as a results file keeps it for the pool."""
        fit = self.fit()
        alive = self.alive or range(len(self.labels))
        every = min(len(set(self.sessions_of(side))) for side in alive) if self.side_sessions else 0
        return {
            "sessions": every,
            "reopened_alone": {
                self.labels[side]: count for side, count in sorted(self.reopened_alone.items())
            },
            "rounds": len(self.rounds_used),
            "stopped": self.stopped,
            "precision": self.precision,
            "seconds": round(self.seconds, 2),
            "reopened": self.reopened,
            "session_sd": None if fit is None else round(math.sqrt(fit.session_var), 5),
            "round_sd": None if fit is None else round(math.sqrt(fit.round_var), 5),
        }


def _median_of(blocks: list[Block]) -> float:
    samples = [value for block in blocks for value in (block.samples_ms or [])]
    if samples and all(block.samples_ms for block in blocks):
        return float(statistics.median(samples))
    return float(statistics.median(block.median_ms for block in blocks))


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
            if decided is None and result.reopened and protocol.precision is not None:
                alone = wild_sides(result, pairs, protocol.precision)
            session_cost = reopen_cost(result, alone)
            round_cost = statistics.mean(round_costs) if round_costs else 0.0
            if fit is None:
                planned = plan[-1]
            elif alone is None:
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
