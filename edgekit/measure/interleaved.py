"""What interleaved measuring gives: every side's blocks, round by round, the sessions they
ran in, why the measuring stopped, and each side's level in the two-level fit
(``edgekit.measure.interleave`` fills it)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from edgekit.common.stats import LevelFit, TwoLevelFit, combined, level_ratio, relative_half_width
from edgekit.common.two_levels import fit_two_levels
from edgekit.errors import EdgekitError
from edgekit.worker.latency import Block

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
