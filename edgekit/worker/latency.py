"""The latency protocol and what one measurement records.

LatencyProtocol: ``warmup`` untimed invokes per side, then interleaved rounds: in every round each
side (artifact, baseline) runs one block of single timed invokes, sized so a block takes about
``block_seconds``, until every side has at least ``min_runs`` runs and ``min_seconds`` of timed
invokes and at least ``rounds`` rounds (capped by ``max_seconds`` per side). A lone artifact is
the same loop with one side. Defaults sit between the anchors: benchmark_model 1 warm-up/50 runs,
ExecuTorch MiniBench 10/50, Olive 10/20."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.common.stats import LevelFit, latency_summary
from edgekit.errors import renamed
from edgekit.records import MemoryRecord
from edgekit.worker.conditions import summarize

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

HIGH_CV = 0.10  # a coefficient of variation above this gets a noise warning


@dataclass(frozen=True)
class LatencyProtocol:
    warmup: int = 10
    min_runs: int = 50
    min_seconds: float = 1.0
    max_seconds: float = 60.0
    max_runs: int = 100_000
    rounds: int = 9  # planned rounds, split over the planned sessions
    block_seconds: float = 0.1
    # the planned sessions: every side is reopened (a new process for a host worker) between
    # them, and the intervals come from a model with both levels (edgekit.measure.interleave)
    sessions: int = 3
    # seconds to wait before each new session: sessions spread over minutes sample how the
    # machine drifts over them, so their spread (the interval) covers that drift too
    session_gap_s: float = 0.0
    # the stopping rule: after the planned sessions, more are added until every interval the
    # decision needs reaches within this fraction of its ratio (None: the plan is all) ...
    precision: float | None = 0.05
    # ... or another session would not fit in these seconds of measuring (reopening included)
    budget_s: float = 90.0
    max_sessions: int = 24

    def __post_init__(self) -> None:
        # the Python API builds protocols without the CLI's check_session_gap: a negative gap
        # would reach time.sleep between sessions
        if self.session_gap_s < 0:
            check_session_gap(self.session_gap_s, self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_session_gap(gap_s: float, sessions: int) -> None:
    """A gap is seconds >= 0, and waits between sessions: one session has none to wait in."""
    from edgekit.errors import UserInputError

    if gap_s < 0:
        raise UserInputError(f"session gap must be >= 0 seconds, got {gap_s:g}")
    if gap_s > 0 and sessions < 2:
        raise UserInputError(
            f"a session gap of {gap_s:g} s needs --sessions 2 or more (it waits between them)"
        )


@dataclass(frozen=True)
class NoiseGuard:
    threshold: float = 0.15  # other processes' CPU, in cores, above which a block is disturbed
    retries: int = 2  # extra rounds per disturbed round, at most
    settle_max_s: float = 20.0
    enabled: bool = True


@dataclass
class Block:
    """One block of timed invokes of one side, what else ran meanwhile and what state the
    machine was in (``conditions``: edgekit.worker.conditions.block_conditions)."""

    samples_ms: list[float] | None  # None where the runner reports only summary figures
    mean_ms: float
    median_ms: float
    foreign_cpu: float | None = None
    steal: float | None = None
    summary: dict[str, float] = field(default_factory=dict)  # a phone runner's own figures
    edgekit_cpu: float | None = None  # edgekit's other processes (never counted as foreign)
    # MHz, °C and why it ran throttled, read before and after it; None where nothing reads them
    conditions: dict[str, Any] | None = None

    @property
    def throttled(self) -> str | None:
        """Why the machine slowed itself while this block was timed; None if it did not."""
        return (self.conditions or {}).get("throttled")

    @classmethod
    def of(
        cls,
        samples: list[float],
        foreign: float | None,
        steal: float | None,
        edgekit: float | None = None,
        *,
        conditions: dict[str, Any] | None = None,
    ) -> Block:
        values = np.asarray(samples, dtype=np.float64)
        return cls(
            list(samples),
            float(values.mean()),
            float(np.median(values)),
            foreign,
            steal,
            edgekit_cpu=edgekit,
            conditions=conditions,
        )


@dataclass
class LatencyRecord:
    """One measurement: an artifact (or the baseline) on one device with a thread count."""

    label: str
    device: str
    threads: int
    status: str  # ok | failed | unavailable
    artifact: str | None = None
    target: str | None = None
    recipe: str | None = None
    model: str | None = None
    error: str | None = None
    load_ms: float | None = None
    first_ms: float | None = None
    stats: dict[str, float] = field(default_factory=dict)
    samples_ms: list[float] = field(default_factory=list)
    rounds_ms: list[float] = field(default_factory=list)  # per-round block medians (interleaved)
    round_sessions: list[int] = field(default_factory=list)  # the session each round ran in
    block_runs: int | None = None
    peak_rss_mb: float | None = None
    memory: MemoryRecord | None = None  # the session's memory in parts (edgekit.measure.memory)
    size_bytes: int | None = None
    foreign_cpu: float | None = None
    steal: float | None = None
    edgekit_cpu: float | None = None  # cores edgekit's own other processes used meanwhile
    disturbed: bool = False
    rounds_disturbed: int = 0
    # the machine slowed itself (frequency, trip point, firmware) in a round the statistics use
    throttled: bool = False
    rounds_throttled: int = 0  # rounds in which some side's block ran throttled
    # this side's blocks: MHz min/median/max, hottest °C and zone, throttled blocks; or the note
    # that nothing is readable here (edgekit.worker.conditions.summarize)
    conditions: dict[str, Any] | None = None
    attempts: int = 0
    runtime: dict[str, Any] = field(default_factory=dict)
    traits: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    interleaved_with: list[str] = field(default_factory=list)
    # the p50 edgekit tune measured for these options, its interval, and whether this one fell in
    tuned_p50: dict[str, Any] | None = None
    speedup: float | None = None  # baseline / this, interleaved; None when not comparable
    speedup_ci: list[float] | None = None
    noise_band: float | None = None  # results before schema 3 only (a second session's distance)
    # this side's level in the pool's two-level fit (edgekit.common.stats.LevelFit)
    latency_fit: LevelFit | None = None
    pool: dict[str, Any] | None = None  # how the pool's measuring went (sessions, why it stopped)
    warnings: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)  # what was inferred about a foreign file
    hints: list[str] = field(default_factory=list)  # why int8/fp16 is not faster than fp32

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def for_artifact(cls, artifact: Artifact, device: str, threads: int) -> LatencyRecord:
        """A not-yet-measured record of ``artifact`` (an
        ``edgekit.artifacts.artifact.Artifact``)."""
        return cls(
            label=artifact.label,
            device=device,
            threads=threads,
            status="failed",
            artifact=str(artifact.path),
            target=artifact.target,
            recipe=artifact.recipe,
            model=artifact.model_name,
            size_bytes=artifact.size_bytes,
            assumed=artifact.assumed,
        )

    def fill(self, blocks: list[Block], rounds_used: list[int]) -> None:
        """Statistics from the blocks of the rounds that count."""
        kept = [blocks[index] for index in rounds_used]
        samples = [v for block in kept for v in (block.samples_ms or [])]
        self.status = "ok"
        self.rounds_ms = [round(block.median_ms, 5) for block in kept]
        if samples:
            self.samples_ms = [round(float(v), 5) for v in samples]
            self.stats = latency_summary(np.asarray(samples))
        else:  # summary-only runners: the blocks' means stand in for samples
            self.stats = latency_summary(np.asarray([block.mean_ms for block in kept]))
            self.stats.update(kept[-1].summary)
            self.warnings.append("the runner reports only a mean per run: no spread within runs")
        readings = [block.foreign_cpu for block in kept if block.foreign_cpu is not None]
        steals = [block.steal for block in kept if block.steal is not None]
        self.foreign_cpu = float(np.mean(readings)) if readings else None
        self.steal = float(np.mean(steals)) if steals else None
        ours = [block.edgekit_cpu for block in kept if block.edgekit_cpu is not None]
        self.edgekit_cpu = float(np.mean(ours)) if ours else None
        self.conditions = summarize([block.conditions for block in kept])
        if self.stats.get("cv", 0.0) > HIGH_CV:
            self.warnings.append(f"noisy: CV {self.stats['cv']:.1%} (> {HIGH_CV:.0%})")


class BlockTimer:
    """A loaded, warmed-up latency source the interleaver alternates: a host worker, the
    emulated guest, a phone's runner. ``warm_ms`` (mean ms per invoke during warm-up) sizes its
    blocks; ``block(runs)`` times ``runs`` single invokes."""

    label: str = ""
    load_ms: float | None = None
    first_ms: float | None = None
    warm_ms: float = 1.0
    runtime: dict[str, Any]
    peak_rss_mb: float | None = None
    memory: dict[str, Any] | None = None  # the session's phases in kB (edgekit.worker.memory)

    def block(self, runs: int) -> Block:
        raise NotImplementedError

    def reopen(self) -> BlockTimer:
        """The same thing in a new session, this one released. A timer that cannot start
        another session returns itself (its rounds then differ only in time)."""
        return self

    def reopen_many(self, count: int) -> list[BlockTimer]:
        """``count`` new sessions of the same thing open at once, this one released (a timer
        that can start only one at a time gives one)."""
        return [self.reopen()]

    def close(self) -> None:
        """Release the session (and record ``peak_rss_mb`` where known)."""


# the old name, for one release (``Protocol`` read as another thing of the same name)
__getattr__ = renamed(__name__, {"Protocol": "LatencyProtocol"})
