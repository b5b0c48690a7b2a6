"""How much to measure, and what to reopen: the planned sessions, the rounds a new session
should run (Kalibera and Jones, 2013), and the sides worth reopening by themselves.

A side whose own sessions spread far beyond the pool's (torch eager's process is often 50 %
slower or faster than the last one) is what keeps its ratios wide; reopening every side to
sample it again costs a whole pool's start-up. Such a side is reopened alone, in
``ALONE_COPIES`` processes started at once (their imports overlap on a machine with cores to
spare), each a session of its own, while the other sides stay open for the rounds' drift."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from edgekit.common.stats import TwoLevelFit, relative_half_width
from edgekit.errors import EdgekitError
from edgekit.worker.latency import BlockTimer

if TYPE_CHECKING:
    from edgekit.measure.interleaved import Interleaved

MIN_ROUNDS_PER_SESSION = 2
MAX_ROUNDS_PER_SESSION = 40
# new processes of a side reopened alone, started at once: one per core, up to four
ALONE_COPIES = max(1, min(4, os.cpu_count() or 1))


def session_plan(rounds: int, sessions: int) -> list[int]:
    """The planned rounds of each session: ``rounds`` split into ``sessions`` near-equal
    stretches, each of at least ``MIN_ROUNDS_PER_SESSION`` (fewer sessions where the rounds are
    few)."""
    count = max(1, min(sessions, rounds // MIN_ROUNDS_PER_SESSION))
    edges = [round(k * rounds / count) for k in range(count + 1)]
    return [edges[k + 1] - edges[k] for k in range(count)]


def rounds_per_session(
    fit: TwoLevelFit,
    session_cost_s: float,
    round_cost_s: float,
    *,
    least: int = MIN_ROUNDS_PER_SESSION,
) -> int:
    """The rounds of a new session that buy the most precision per second (Kalibera and Jones):
    sqrt(session cost / round cost x round variance / session variance), at least ``least``
    (a side reopened by itself may run one: the pool's sessions show the rounds' spread)."""
    if fit.session_var <= 0.0 or round_cost_s <= 0.0:
        return MAX_ROUNDS_PER_SESSION if fit.round_var > 0.0 else least
    best = math.sqrt(session_cost_s / round_cost_s * fit.round_var / fit.session_var)
    return int(min(MAX_ROUNDS_PER_SESSION, max(least, round(best))))


def wild_sides(
    result: Interleaved, pairs: Sequence[tuple[int, int]] | None, precision: float
) -> list[int] | None:
    """The sides worth reopening by themselves: where every interval still wider than
    ``precision`` has a side whose own sessions spread beyond the pool's and whose level is the
    less certain of the two, those sides (a new process of one side costs a fraction of
    reopening all); None: every side."""
    alive = result.alive
    chosen = pairs or [(a, b) for i, a in enumerate(alive) for b in alive[i + 1 :]]
    wild: set[int] = set()
    for a, b in chosen:
        if a in result.failed or b in result.failed:
            continue
        ratio, interval = result.ratio(a, b)
        if relative_half_width(interval, ratio) <= precision:
            continue
        levels = {side: result.level(side) for side in (a, b)}
        worst = max(levels, key=lambda side: levels[side].variance)
        if not levels[worst].own_variance:
            return None
        wild.add(worst)
    return sorted(wild) or None


def reopen_cost(result: Interleaved, alone: list[int] | None) -> float:
    """Seconds the next reopening should take: of every side, as the last one did; of
    ``alone``, as the last side reopened alone did (a share of every side's, before one)."""
    everyone = result.reopens_s[-1] if result.reopens_s else 0.0
    if alone is None:
        return everyone
    each = result.alone_reopens_s[-1] if result.alone_reopens_s else everyone / len(result.alive)
    return each * len(alone)


def reopen_sides(timers: list[BlockTimer], result: Interleaved) -> list[int]:
    """Every live side in a new session, in place (the caller closes what ``timers`` holds),
    all at once: no block is timed meanwhile, and starting a process is mostly waiting.
    Returns the sides reopened."""
    live = [side for side in range(len(timers)) if side not in result.failed]

    def reopen(side: int) -> BlockTimer | EdgekitError:
        try:
            return timers[side].reopen()
        except EdgekitError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, len(live))) as pool:
        reopened = list(pool.map(reopen, live))
    done = []
    for side, timer in zip(live, reopened, strict=True):
        if isinstance(timer, EdgekitError):
            result.failed[side] = str(timer)
            continue
        if timer is timers[side]:
            result.reopened = False
        timers[side] = timer
        done.append(side)
    return done


def reopen_alone(
    timers: list[BlockTimer], result: Interleaved, alone: list[int], copies: int
) -> dict[int, list[BlockTimer]]:
    """``copies`` new sessions of each side of ``alone``, started at once (each side's old
    one released); a side that cannot start them fails. The caller runs each in turn."""
    live = [side for side in alone if side not in result.failed]

    def start(side: int) -> list[BlockTimer] | EdgekitError:
        try:
            return timers[side].reopen_many(copies)
        except EdgekitError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, len(live))) as pool:
        started = list(pool.map(start, live))
    opened = {}
    for side, new in zip(live, started, strict=True):
        if isinstance(new, EdgekitError):
            result.failed[side] = str(new)
            continue
        opened[side] = new
    return opened
