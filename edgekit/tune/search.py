"""The search: stage by stage (the thread count first, then each knob in the target's order),
the stage's candidates run interleaved in rounds and sessions with the incumbent, as ``edgekit
bench`` runs artifacts: every side is reopened between sessions, since where a process lands
moves its latency by a few percent, and each ratio's interval comes from the two-level fit
(rounds within sessions, sessions within sides). The incumbent runs in two processes at once,
and a candidate is compared with both (their combined level). A candidate wins only when its
interval lies below 1; otherwise it is a tie (or slower), and the incumbent, simpler and nearer
the default, stays. A candidate the runtime refuses is that candidate's failure, and the search
goes on. The stages run their planned sessions only: the search's own budget decides how many
stages run.

Last, one interleaved run in ``FINAL_SESSIONS`` sessions (every side reopened between them): the
stages' winner against the start, or the start alone where it won every stage. Its sessions give
the p50 tune reports a prediction interval: where the p50 of another session of the tuned file,
a later ``bench``, should fall."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from edgekit.common.stats import session_prediction
from edgekit.errors import EdgekitError
from edgekit.measure.interleave import interleave
from edgekit.measure.interleaved import Interleaved
from edgekit.targets.knobs import Knob
from edgekit.worker.latency import BlockTimer, LatencyProtocol, NoiseGuard

# the final run's rounds in three sessions: with the start's two sides and the winner, six
# degrees of freedom for how far a session's p50 moves from another's
FINAL_SESSIONS = 3

OpenTimer = Callable[[dict[str, Any]], BlockTimer]  # options (threads included) -> a session


@dataclass
class Trial:
    """One candidate against its stage's incumbent: ``ratio`` > 1 means slower."""

    knob: str
    value: Any
    options: dict[str, Any]
    verdict: str  # faster, tie, slower or failed
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    error: str | None = None
    p50_ms: float | None = None  # the candidate's median round
    incumbent_p50_ms: float | None = None  # the incumbent's, over its two sessions


@dataclass
class Tuned:
    """What the search found for one artifact."""

    label: str
    default: dict[str, Any]
    best: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)
    untried: list[str] = field(default_factory=list)  # knobs the budget left out
    # the stages' winner against the start, interleaved after the search: "faster" (it stays
    # best), "tie" (the start stays best), "failed: ..." or None (the start won every stage)
    final: str | None = None
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    default_p50_ms: float | None = None
    best_p50_ms: float | None = None
    # where another session's p50 should fall (95 % prediction), from the final run's sessions
    default_p50_interval: tuple[float, float] | None = None
    best_p50_interval: tuple[float, float] | None = None  # of the stages' winner
    rejected: dict[str, Any] | None = None  # the stages' winner a final tie sent back
    elapsed_s: float = 0.0
    budget_s: float = 0.0

    @property
    def changed(self) -> dict[str, Any]:
        return {k: v for k, v in self.best.items() if self.default.get(k) != v}

    @property
    def tied(self) -> dict[str, Any]:
        """What the stages' winner changed, where a final tie sent it back ({} otherwise)."""
        return {k: v for k, v in (self.rejected or {}).items() if self.default.get(k) != v}

    @property
    def written_p50(self) -> tuple[float | None, tuple[float, float] | None]:
        """The p50 of what tune writes (the best, or the start a final tie kept) and where
        another session's p50 of it should fall."""
        if self.rejected is not None:
            return self.default_p50_ms, self.default_p50_interval
        return self.best_p50_ms, self.best_p50_interval

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"changed": self.changed, "tied": self.tied}


def verdict(interval: tuple[float, float]) -> str:
    low, high = interval
    return "faster" if high < 1.0 else "slower" if low > 1.0 else "tie"


def stages(knobs: tuple[Knob, ...], cores: int) -> list[Knob]:
    """The thread count (1 to ``cores``) first, then the target's knobs in their order."""
    threads = Knob("threads", tuple(range(1, cores + 1)), "intra-op threads")
    return [threads, *knobs]


def run_stage(
    knob: Knob,
    incumbent: dict[str, Any],
    open_timer: OpenTimer,
    protocol: LatencyProtocol,
    guard: NoiseGuard,
) -> tuple[dict[str, Any], list[Trial]]:
    """The stage's candidates (the knob's other values) interleaved with ``incumbent``; the
    fastest one whose interval lies below 1 becomes the incumbent."""
    others = [value for value in knob.values if value != incumbent[knob.name]]
    candidates = [knob.candidate(incumbent, value) for value in others]
    trials: list[Trial] = []
    timers: list[BlockTimer] = []
    sides: list[Trial] = []
    try:
        timers += [open_timer(incumbent), open_timer(incumbent)]  # two sessions at once
        for options in candidates:
            trial = Trial(knob.name, options[knob.name], options, "failed")
            try:
                timers.append(open_timer(options))
                sides.append(trial)
            except EdgekitError as exc:  # the runtime refused this value: this candidate only
                trial.error = str(exc).splitlines()[0]
            trials.append(trial)
        if sides:
            result = interleave(timers, replace(protocol, precision=None), guard)
            for side, trial in enumerate(sides, start=2):
                if side in result.failed:
                    trial.error = result.failed[side].splitlines()[0]
                    continue
                trial.ratio, trial.interval = against_incumbent(result, side)
                trial.verdict = verdict(trial.interval)
                trial.p50_ms = result.p50_ms(side)
                trial.incumbent_p50_ms = result.p50_ms([0, 1])
    finally:
        for timer in timers:
            timer.close()
    faster = [t for t in trials if t.verdict == "faster"]
    if not faster:
        return incumbent, trials
    best = min(faster, key=lambda trial: trial.ratio or 1.0)
    return dict(best.options), trials


def against_incumbent(result: Interleaved, side: int) -> tuple[float, tuple[float, float]]:
    """``side``'s time over the incumbent's two sessions (sides 0 and 1, their combined level),
    its interval from the two-level fit."""
    if 0 in result.failed or 1 in result.failed:
        failed = result.failed.get(0) or result.failed[1]
        raise EdgekitError(f"the incumbent failed: {failed.splitlines()[0]}")
    return result.ratio(side, [0, 1])


def search(
    label: str,
    default: dict[str, Any],
    knobs: list[Knob],
    open_timer: OpenTimer,
    *,
    protocol: LatencyProtocol,
    guard: NoiseGuard,
    budget_s: float,
    progress: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Tuned:
    """Stage after stage within ``budget_s``: the first stage always runs; a later one starts
    only when it and the final comparison still fit, each counted at the slowest stage so far.
    Then the stages' winner against ``default`` (the start), interleaved once more."""
    say = progress or (lambda message: None)
    started = clock()
    tuned = Tuned(label, dict(default), dict(default), budget_s=budget_s)
    longest = 0.0
    for index, knob in enumerate(knobs):
        if not knob.applies(tuned.best) or len(knob.values) < 2:
            continue
        if longest and clock() - started + 2 * longest > budget_s:
            tuned.untried = [k.name for k in knobs[index:] if k.applies(tuned.best)]
            say(f"{label}: the budget leaves out {', '.join(tuned.untried)}")
            break
        say(f"{label}: {knob.name}")
        stage_started = clock()
        tuned.best, trials = run_stage(knob, tuned.best, open_timer, protocol, guard)
        tuned.trials += trials
        longest = max(longest, clock() - stage_started)
    moved = tuned.best != tuned.default
    say(f"{label}: {'best against the start' if moved else 'the start'}, {FINAL_SESSIONS} sessions")
    tuned.final = _final(tuned, open_timer, protocol, guard)
    if moved and tuned.final != "faster":  # a tie (or no figure) in the end: the start stays
        tuned.rejected, tuned.best = tuned.best, dict(tuned.default)
    if tuned.default_p50_ms is None and not moved:  # the final run failed: the first stage's
        start = next((t.incumbent_p50_ms for t in tuned.trials if t.incumbent_p50_ms), None)
        tuned.default_p50_ms = tuned.best_p50_ms = start
    tuned.elapsed_s = clock() - started
    return tuned


def final_protocol(protocol: LatencyProtocol) -> LatencyProtocol:
    """The final run's: the stages' protocol in ``FINAL_SESSIONS`` sessions, each of at least
    two rounds."""
    rounds = max(protocol.rounds, 2 * FINAL_SESSIONS)
    return replace(protocol, sessions=FINAL_SESSIONS, rounds=rounds, precision=None)


def _final(
    tuned: Tuned, open_timer: OpenTimer, protocol: LatencyProtocol, guard: NoiseGuard
) -> str | None:
    """The final run: the start (two sides) and, where the stages moved, their winner, in
    ``FINAL_SESSIONS`` sessions: the figures tune reports. The winner's verdict, or why there is
    none; None where the start won every stage (it is only measured then)."""
    moved = tuned.best != tuned.default
    timers: list[BlockTimer] = []
    try:
        for options in (tuned.default, tuned.default, *([tuned.best] if moved else [])):
            timers.append(open_timer(options))
        result = interleave(timers, final_protocol(protocol), guard)
        if moved and 2 in result.failed:
            return f"failed: {result.failed[2].splitlines()[0]}"
        if moved:
            tuned.ratio, tuned.interval = against_incumbent(result, 2)
        elif result.failed:
            raise EdgekitError(next(iter(result.failed.values())))
        best = [2] if moved else [0, 1]
        tuned.default_p50_ms = result.p50_ms([0, 1])
        tuned.default_p50_interval = p50_interval(result, [0, 1])
        tuned.best_p50_ms = result.p50_ms(best)
        tuned.best_p50_interval = p50_interval(result, best)
        return verdict(tuned.interval) if moved else None
    except EdgekitError as exc:
        return f"failed: {str(exc).splitlines()[0]}" if moved else None
    finally:
        for timer in timers:
            timer.close()


def p50_interval(result: Interleaved, sides: list[int]) -> tuple[float, float] | None:
    """Where another session's p50 of ``sides`` (one configuration) should fall: its p50 times
    the prediction factors of the run's sessions, every side's spread pooled."""
    alive = [side for side in range(len(result.blocks)) if side not in result.failed]
    rounds: list[int] = result.rounds_used
    # the clean rounds all in one session (the guard's extra rounds spent before the others
    # had theirs): a prediction needs every session, disturbed rounds and all
    if len(set(result.sessions_used)) < 2:
        rounds = list(range(len(result.session_of_round)))
    sessions = len({result.session_of_round[r] for r in rounds})
    factors = session_prediction([result.session_p50s_ms(s, rounds) for s in alive], sessions)
    if factors is None:
        return None
    p50 = result.p50_ms(sides)
    return p50 * factors[0], p50 * factors[1]
