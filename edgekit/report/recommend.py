"""Which artifact to ship: the Pareto front of latency against accuracy drop, and the fastest
artifact whose drop stays within the budget, with the reason each other row lost.

One artifact is *faster* than another only when the interval of their latency ratio, from the
rounds in which both ran interleaved, excludes 1. Otherwise they tie, and the tie goes to the
smaller drop, then the smaller file. Rows of different pools (other thread counts) were not
interleaved; they compare by p50 and say so. Rows of devices with no comparable latency
(emulated, software Vulkan) and server rows never compete with on-device rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgekit.common.budget import DropBudget
from edgekit.common.stats import ratio_interval
from edgekit.results import Row


def same_pool(a: Row, b: Row) -> bool:
    """Measured in the same interleaved rounds (same device and threads, paired rounds)."""
    return (
        a.device == b.device
        and a.threads == b.threads
        and bool(a.rounds_ms)
        and len(a.rounds_ms) == len(b.rounds_ms)
        and b.name in a.interleaved_with
    )


def latency_ratio(a: Row, b: Row) -> tuple[float, tuple[float, float]] | None:
    """``a``'s latency over ``b``'s with its 95 % interval, when the two were interleaved."""
    if not same_pool(a, b):
        return None
    band = max(a.noise_band or 0.0, b.noise_band or 0.0)
    return ratio_interval(a.rounds_ms, b.rounds_ms, a.round_sessions or None, band)


def faster(a: Row, b: Row) -> bool:
    ratio = latency_ratio(a, b)
    if ratio is None:
        return (a.p50 or 0.0) < (b.p50 or 0.0)
    return ratio[1][1] < 1.0


def tied(a: Row, b: Row) -> bool:
    return not faster(a, b) and not faster(b, a)


def measured(rows: list[Row]) -> list[Row]:
    """Artifact rows with a comparable latency and an accuracy figure."""
    return [
        row
        for row in rows
        if row.kind == "artifact"
        and row.ok
        and row.latency_comparable
        and row.p50 is not None
        and row.drop is not None
        and row.drop_high is not None
    ]


def pareto_front(rows: list[Row]) -> list[Row]:
    """Rows no other row beats: at least as fast (faster, or a tie) with no larger drop, and
    strictly better on one of the two."""
    candidates = measured(rows)
    front = []
    for row in candidates:
        dominated = any(
            other is not row
            and other.traits.get("where") == row.traits.get("where")
            and (faster(other, row) or tied(other, row))
            and other.drop <= row.drop
            and (faster(other, row) or other.drop < row.drop)
            for other in candidates
        )
        if not dominated:
            front.append(row)
    return sorted(front, key=lambda row: row.p50)


@dataclass
class Recommendation:
    best: Row | None
    budget: float
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (row label, why it lost)
    tie_break: str | None = None  # set when the winner tied with faster-looking rows
    disturbed: list[str] = field(default_factory=list)  # competing rows others' CPU disturbed

    @property
    def summary(self) -> str:
        if (
            self.best is None
            and self.reasons
            and all(why.startswith("no baseline") for _, why in self.reasons)
        ):
            return "nothing to recommend: no baseline in this run to measure a drop against"
        if self.best is None:
            return f"nothing to recommend: {_tally(self.reasons)}"
        best = self.best
        speed = ""
        if best.speedup:
            low, high = best.speedup_ci or (best.speedup, best.speedup)
            speed = f", {best.speedup:.2f}x [{low:.2f}, {high:.2f}] the baseline in this run"
        tie = f"; {self.tie_break}" if self.tie_break else ""
        warning = ""
        if self.disturbed:
            warning = (
                f"; WARNING: other processes disturbed the timing of {len(self.disturbed)} "
                "competing row(s): ranked on their paired per-round ratios, absolute ms "
                "unreliable"
            )
        return (
            f"{best.label}: p50 {best.p50:.3f} ms{speed}, drop {best.drop:+.2f} points (95% "
            f"upper bound {best.drop_high:+.2f} <= {self.budget:g}){_memory(best)}{tie}{warning}"
        )


def _memory(row: Row) -> str:
    """The process's peak and, beside it, the model's own share (where the device tells)."""
    memory = row.memory or {}
    if memory.get("status") != "ok" or memory.get("process_peak_mb") is None:
        return ""
    own = memory.get("model_mb")
    beside = "" if own is None else f", the model's own {own:.1f} MB"
    return f", memory: process peak {memory['process_peak_mb']:.0f} MB{beside}"


def _tally(reasons: list[tuple[str, str]]) -> str:
    """Why every row lost, counted by kind of reason (the drop budget only where it was)."""
    counts: dict[str, int] = {}
    for _, why in reasons:
        kind = why.split(":")[0] if ":" in why else why
        kind = "drop over the budget" if " > budget " in why else kind
        counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return "no artifact row was measured"
    return "; ".join(f"{count} row(s) {kind}" for kind, count in counts.items())


def _why_not(row: Row, max_drop: float, point_estimate: bool) -> str | None:
    if row.status != "ok":
        return f"{row.status}: {row.error}"
    if not row.accuracy:
        return "no accuracy figure"
    if row.p50 is None:
        return "no latency figure"
    if row.drop is None or row.drop_high is None:
        return "no baseline to measure a drop against (a file without a source model)"
    if not row.latency_comparable:
        return f"{row.traits.get('note') or 'its latency is not comparable'}"
    if row.traits.get("where") == "server":
        return "a server row: compared with the baseline, never with on-device rows"
    budget = DropBudget.of(max_drop, point_estimate)
    if budget.over(row.drop, row.drop_high):
        return budget.why_over(row.drop, row.drop_high)
    return None


def recommend(
    rows: list[Row], max_drop: float = 1.0, point_estimate: bool = False
) -> Recommendation:
    """The fastest artifact whose drop's upper confidence bound is within ``max_drop`` points,
    on the first device (in run order) that has eligible rows; ties go to the smaller drop,
    then the smaller file."""
    reasons: list[tuple[str, str]] = []
    eligible: list[Row] = []
    for row in rows:
        if row.kind != "artifact" or row.status == "unavailable":
            continue  # unavailable devices are listed once, in their own section
        why = _why_not(row, max_drop, point_estimate)
        if why:
            reasons.append((row.label, why))
        else:
            eligible.append(row)
    if not eligible:
        return Recommendation(None, max_drop, reasons)
    device = eligible[0].device
    others = [row for row in eligible if row.device != device]
    pool = [row for row in eligible if row.device == device]
    # disturbed rows still compete: their ratios are paired per round, both sides saw the
    # same machine; the fastest by p50 is where ties start (ratios decide beyond it)
    fastest = min(pool, key=lambda row: row.p50)
    ties = [row for row in pool if row is fastest or tied(row, fastest)]
    best = min(ties, key=lambda row: (row.drop, row.size_bytes or 0, row.p50))
    tie_break = None
    if len(ties) > 1:
        tie_break = (
            f"tied on latency with {', '.join(r.label for r in ties if r is not best)} "
            "(ratio intervals include 1): chose the smaller drop, then the smaller file"
        )
    for row in pool:
        if row is best:
            continue
        ratio = latency_ratio(row, best)
        if row in ties:
            reasons.append((row.label, f"tie on latency; lost on drop {row.drop:+.2f} or size"))
        elif ratio is not None:
            value, (low, high) = ratio
            reasons.append((row.label, f"slower: {value:.2f}x [{low:.2f}, {high:.2f}] its p50"))
        else:
            reasons.append(
                (row.label, f"slower: p50 {row.p50:.3f} ms vs {best.p50:.3f} ms (not interleaved)")
            )
    for row in others:
        reasons.append((row.label, f"other device ({row.device}): see its own rows"))
    disturbed = [row.label for row in pool if row.disturbed]
    return Recommendation(best, max_drop, reasons, tie_break, disturbed)


def recommend_each(
    rows: list[Row], max_drop: float = 1.0, point_estimate: bool = False
) -> dict[str, Recommendation]:
    """One recommendation per model of the run, in run order: a model's artifacts only ever
    compete with its own baseline and with each other."""
    models = list(dict.fromkeys(row.model or "" for row in rows))
    return {
        model: recommend([r for r in rows if (r.model or "") == model], max_drop, point_estimate)
        for model in models
    }
