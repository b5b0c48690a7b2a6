"""Interleaved measurement: every side (artifacts, the baseline, a candidate and its reference)
runs one block per round, in a rotating order, so that all of them see the same machine state.

On a shared VM, noise that /proc/stat cannot see moves a latency by tens of percent between two
moments; two timings taken at different moments do not give a ratio. Within a round the sides
are seconds apart, so the per-round ratio cancels what the machine did meanwhile, and the spread
of the per-round ratios gives an honest interval (``edgekit.common.stats.paired_ratio``).

What rounds cannot see is a session's own state: where a runtime's kernels and buffers landed
moves a latency by several percent from one process to the next, and the machine drifts over
minutes. So the rounds are split into ``protocol.sessions`` stretches, every side is reopened (a
new session, a new process for a host worker) between them, and a ratio's interval comes from
the spread between sessions (``edgekit.common.stats.session_ratio``)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from edgekit.common.stats import ratio_interval
from edgekit.errors import EdgekitError
from edgekit.worker.interference import wait_for_quiet
from edgekit.worker.latency import Block, BlockTimer, NoiseGuard, Protocol

MIN_CLEAN_ROUNDS = 3
MIN_ROUNDS_PER_SESSION = 2


@dataclass
class Interleaved:
    labels: list[str]
    block_runs: list[int]
    blocks: list[list[Block]] = field(default_factory=list)  # [side][round]
    disturbed: list[bool] = field(default_factory=list)  # per round
    rounds_used: list[int] = field(default_factory=list)
    settle: float | None = None  # others' CPU (cores) when the rounds began
    failed: dict[int, str] = field(default_factory=dict)  # side -> why it stopped
    session_of_round: list[int] = field(default_factory=list)  # which session each round ran in

    def rounds_ms(self, side: int | Sequence[int]) -> list[float]:
        """Per-round block medians of ``side``; of several sessions of one thing (a list of
        sides), their geometric mean per round."""
        sides = [side] if isinstance(side, int) else list(side)
        if len(sides) == 1:
            return [self.blocks[sides[0]][r].median_ms for r in self.rounds_used]
        logs = [[math.log(self.blocks[s][r].median_ms) for r in self.rounds_used] for s in sides]
        return [math.exp(sum(values) / len(values)) for values in zip(*logs, strict=True)]

    def p50_ms(self, side: int | Sequence[int]) -> float:
        """The median invoke of ``side`` (its sessions' samples pooled) over the rounds used, as
        ``bench`` reports it; the median of the block medians where a runner gives no samples."""
        sides = [side] if isinstance(side, int) else list(side)
        blocks = [self.blocks[s][r] for s in sides for r in self.rounds_used]
        return _median_of(blocks)

    def session_p50s_ms(self, side: int, rounds: Sequence[int] | None = None) -> list[float]:
        """``side``'s p50 in each session the rounds used (or ``rounds``) ran in, in order."""
        sessions: dict[int, list[Block]] = {}
        for r in self.rounds_used if rounds is None else rounds:
            sessions.setdefault(self.session_of_round[r], []).append(self.blocks[side][r])
        return [_median_of(blocks) for _, blocks in sorted(sessions.items())]

    @property
    def sessions_used(self) -> list[int]:
        """The session of each round the statistics use."""
        return [self.session_of_round[r] for r in self.rounds_used]

    def ratio(
        self,
        side: int | Sequence[int],
        reference: int | Sequence[int],
        band: float | None = None,
        confidence: float = 0.95,
    ) -> tuple[float, tuple]:
        """Latency of ``side`` over ``reference``: > 1 means ``side`` is slower. The interval
        comes from the sessions where the rounds ran in several, else from the rounds widened by
        ``band`` (``edgekit.common.stats.ratio_interval``)."""
        return ratio_interval(
            self.rounds_ms(side), self.rounds_ms(reference), self.sessions_used, band, confidence
        )


def _median_of(blocks: list[Block]) -> float:
    samples = [value for block in blocks for value in (block.samples_ms or [])]
    if samples and all(block.samples_ms for block in blocks):
        return float(statistics.median(samples))
    return float(statistics.median(block.median_ms for block in blocks))


def block_sizes(timers: list[BlockTimer], protocol: Protocol) -> tuple[list[int], int]:
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


def session_starts(rounds: int, sessions: int) -> set[int]:
    """The planned rounds before which every side is reopened: ``sessions`` equal stretches, each
    of at least ``MIN_ROUNDS_PER_SESSION`` rounds (fewer sessions where the rounds are few)."""
    count = max(1, min(sessions, rounds // MIN_ROUNDS_PER_SESSION))
    return {round(k * rounds / count) for k in range(1, count)}


def interleave(
    timers: list[BlockTimer],
    protocol: Protocol,
    guard: NoiseGuard,
    progress: Callable[[str], None] | None = None,
    decided: Callable[[Interleaved], bool] | None = None,
    max_rounds: int = 0,
) -> Interleaved:
    """Alternate ``timers`` in rounds; each disturbed round earns one more round (at most
    ``guard.retries`` x the planned rounds), and disturbed rounds are left out of the statistics
    while enough clean rounds remain. With ``decided`` (a gate's question), rounds go on past
    the planned ones, up to ``max_rounds``, while the answer is still open: a regression near
    the threshold needs a narrower interval than one far from it."""
    runs, rounds = block_sizes(timers, protocol)
    result = Interleaved([timer.label for timer in timers], runs, [[] for _ in timers])
    starts, session = session_starts(rounds, protocol.sessions), 0
    # the rounds that count toward the plan: a disturbed round that earns another does not, so
    # the extra round runs in the same session and every session keeps its clean rounds
    counted = 0
    if guard.enabled:
        reading = wait_for_quiet(guard.threshold, max_wait_s=guard.settle_max_s)
        result.settle = None if reading is None else reading.foreign
    extra_budget = 0
    index = 0
    while index < rounds + extra_budget:
        if counted in starts:
            starts.discard(counted)
            session += 1
            if protocol.session_gap_s > 0:
                if progress:
                    progress(f"waiting {protocol.session_gap_s:.0f} s before session {session + 1}")
                time.sleep(protocol.session_gap_s)
            _reopen(timers, result, progress)
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
            break
        disturbed = guard.enabled and any(
            block.foreign_cpu is not None and block.foreign_cpu > guard.threshold
            for block in blocks.values()
        )
        result.disturbed.append(disturbed)
        result.session_of_round.append(session)
        if disturbed and extra_budget < guard.retries * rounds:
            extra_budget += 1  # one more round for each disturbed one, within the budget
        else:
            counted += 1
        index += 1
        if progress and index % 5 == 0:
            progress(f"round {index}/{rounds + extra_budget}")
        if decided and index == rounds + extra_budget and index < max_rounds and not result.failed:
            _choose_rounds(result, timers, rounds)
            if not decided(result):
                extra_budget += 1  # still open: one more round
    _choose_rounds(result, timers, rounds)
    return result


def _reopen(
    timers: list[BlockTimer], result: Interleaved, progress: Callable[[str], None] | None
) -> None:
    """Every live side in a new session, in place (the caller closes what ``timers`` holds)."""
    if progress:
        progress("new sessions")
    for side, timer in enumerate(timers):
        if side in result.failed:
            continue
        try:
            timers[side] = timer.reopen()
        except EdgekitError as exc:
            result.failed[side] = str(exc)


def _choose_rounds(result: Interleaved, timers: list[BlockTimer], rounds: int) -> None:
    """The rounds the statistics use: the clean ones, while enough of them remain."""
    alive = [side for side in range(len(timers)) if side not in result.failed]
    complete = min((len(result.blocks[side]) for side in alive), default=0)
    result.disturbed = result.disturbed[:complete]
    result.session_of_round = result.session_of_round[:complete]
    clean = [r for r, bad in enumerate(result.disturbed) if not bad]
    enough = max(MIN_CLEAN_ROUNDS, rounds // 2)
    result.rounds_used = clean if len(clean) >= enough else list(range(len(result.disturbed)))
