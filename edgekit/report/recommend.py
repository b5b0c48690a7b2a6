"""Which artifact to ship: the Pareto front of latency against accuracy drop, speed groups, and
the fastest artifact whose drop stays within the budget, with the reason each other row lost.

The artifacts of one pool (interleaved in the same rounds and sessions) are ranked into speed
groups (``edgekit.common.ranking``): members of a group cannot be told apart, every member of a
faster group is faster than every member of a slower one, with every pair of the pool tested at
once. The recommendation is the first group holding an artifact within the drop budget: among
its eligible members that are not told apart from its fastest one, the smaller drop, then the
smaller file. Rows of different pools (other thread counts) were not interleaved; they compare
by p50 and say so. Rows of devices with no comparable latency (emulated, software Vulkan) and
server rows never compete with on-device rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgekit.common.budget import DropBudget
from edgekit.common.ranking import compare, cut_groups, group_lines, stopping_line, undecided
from edgekit.common.stats import LevelFit, recorded_ratio
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
    return recorded_ratio(a, b)


def faster(a: Row, b: Row) -> bool:
    ratio = latency_ratio(a, b)
    if ratio is None:
        return (a.p50 or 0.0) < (b.p50 or 0.0)
    return ratio[1][1] < 1.0


def _fitted(rows: list[Row]) -> bool:
    return all(row.latency_fit is not None for row in rows) and all(
        same_pool(a, b) for a in rows for b in rows if a is not b
    )


def _levels(rows: list[Row]) -> list[LevelFit]:
    """The rows' levels in their pool's fit (``_fitted`` rows: each has one)."""
    return [row.latency_fit for row in rows if row.latency_fit is not None]


def speed_groups(rows: list[Row]) -> list[list[Row]]:
    """One pool's rows ranked into speed groups, fastest first (Tukey's simultaneous test over
    every pair of the pool). Rows recorded before the two-level fit, or not all interleaved
    together, are cut where their 95 % intervals exclude 1, pair by pair."""
    if not rows:
        return []
    order = sorted(range(len(rows)), key=lambda index: rows[index].p50 or 0.0)
    if _fitted(rows):
        levels = _levels(rows)
        order = sorted(range(len(rows)), key=lambda index: levels[index].log_level)
        cuts = cut_groups(order, lambda a, b: compare(levels, a, b).distinct)
    else:
        cuts = cut_groups(order, lambda a, b: faster(rows[a], rows[b]) or faster(rows[b], rows[a]))
    return [[rows[index] for index in group] for group in cuts]


def told_apart(a: Row, b: Row, pool: list[Row]) -> bool:
    """Are ``a`` and ``b`` told apart, with every pair of ``pool`` tested at once?"""
    if _fitted(pool):
        levels = _levels(pool)
        index = [next(i for i, row in enumerate(pool) if row is wanted) for wanted in (a, b)]
        return compare(levels, *index).distinct
    return faster(a, b) or faster(b, a)


def measuring_line(pool: dict | None, rows: list[Row]) -> str:
    """How a pool's measuring went and why it stopped, with the pairs still undecided."""
    if not pool:
        return ""
    line = stopping_line(pool)
    if _fitted(rows):
        levels = _levels(rows)
        open_pairs = undecided(levels, pool.get("precision"))
        if open_pairs:
            shown = ", ".join(f"{rows[a].label} vs {rows[b].label}" for a, b in open_pairs[:3])
            more = f" and {len(open_pairs) - 3} more" if len(open_pairs) > 3 else ""
            line += f"; undecided (interval includes 1, wider than the precision): {shown}{more}"
    return line


def decision_lines(advice: Recommendation) -> list[str]:
    """The recommended pool's speed groups in words and how its measuring stopped."""
    rows = [row for group in advice.ranked for row in group]
    lines = []
    if len(rows) > 1 and _fitted(rows):
        levels = _levels(rows)
        lines += group_lines([row.label for row in rows], levels)
    measuring = measuring_line(advice.pool, rows)
    return lines + ([measuring] if measuring else [])


def statement(fast: Row, slow: Row) -> str:
    """``tflite/int8 @ cpu x1 is 1.32x [1.27, 1.37] faster than onnx/int8 @ cpu x1``."""
    ratio = latency_ratio(slow, fast)
    if ratio is None:
        return (
            f"{fast.label} (p50 {fast.p50:.3f} ms) vs {slow.label} ({slow.p50:.3f} ms, "
            "not interleaved)"
        )
    value, (low, high) = ratio
    return f"{fast.label} is {value:.2f}x [{low:.2f}, {high:.2f}] faster than {slow.label}"


def tied(a: Row, b: Row) -> bool:
    return not faster(a, b) and not faster(b, a)


def _among(row: Row, rows: list[Row]) -> bool:
    return any(row is other for other in rows)


def timed(rows: list[Row]) -> list[Row]:
    """Artifact rows with a comparable latency (what speed groups rank)."""
    return [
        row
        for row in rows
        if row.kind == "artifact" and row.ok and row.latency_comparable and row.p50 is not None
    ]


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
    tie_break: str | None = None  # set when the winner shares its speed group
    disturbed: list[str] = field(default_factory=list)  # competing rows others' CPU disturbed
    ranked: list[list[Row]] = field(default_factory=list)  # its pool's speed groups, fastest first
    versus: str | None = None  # the winner against the first eligible row of a slower group
    pool: dict | None = None  # how its pool's measuring went (sessions, why it stopped)

    @property
    def groups(self) -> list[list[str]]:
        """The speed groups' labels, fastest first."""
        return [[row.label for row in group] for group in self.ranked]

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
        tie += f"; {self.versus}" if self.versus else ""
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
    memory = row.memory
    if memory is None or memory.status != "ok" or memory.process_peak_mb is None:
        return ""
    own = memory.model_mb
    beside = "" if own is None else f", the model's own {own:.1f} MB"
    return f", memory: process peak {memory.process_peak_mb:.0f} MB{beside}"


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


def _why_not(row: Row, budget: DropBudget) -> str | None:
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
    if budget.over(row.drop, row.drop_high):
        return budget.why_over(row.drop, row.drop_high)
    return None


def recommend(
    rows: list[Row], max_drop: float = 1.0, *, point_estimate: bool = False
) -> Recommendation:
    """The first speed group holding an artifact whose drop's upper confidence bound is within
    ``max_drop`` points, on the first device (in run order) that has eligible rows and, of its
    thread counts, the pool whose fastest eligible row has the lowest p50; within the group,
    of the eligible rows not told apart from its fastest eligible one, the smaller drop, then
    the smaller file."""
    budget = DropBudget.of(max_drop, point_estimate=point_estimate)
    reasons: list[tuple[str, str]] = []
    eligible: list[Row] = []
    for row in rows:
        if row.kind != "artifact" or row.status == "unavailable":
            continue  # unavailable devices are listed once, in their own section
        why = _why_not(row, budget)
        if why:
            reasons.append((row.label, why))
        else:
            eligible.append(row)
    if not eligible:
        return Recommendation(None, max_drop, reasons)
    device = eligible[0].device
    others = [row for row in eligible if row.device != device]
    mine = [row for row in eligible if row.device == device]
    threads = min(mine, key=lambda row: row.p50).threads
    pool = [row for row in mine if row.threads == threads]
    rivals = [row for row in timed(rows) if row.device == device and row.threads == threads]
    groups = speed_groups(rivals)
    first = next(group for group in groups if any(_among(row, pool) for row in group))
    fastest = next(row for row in first if _among(row, pool))  # groups list fastest first
    ties = [row for row in first if _among(row, pool) and not told_apart(row, fastest, rivals)]
    best = min(ties, key=lambda row: (row.drop, row.size_bytes or 0, row.p50))
    tie_break = None
    if len(ties) > 1:
        tie_break = (
            f"in one speed group with {', '.join(r.label for r in ties if r is not best)} "
            "(not told apart): chose the smaller drop, then the smaller file"
        )
    later = groups[groups.index(first) + 1 :]
    runner_up = next((row for group in later for row in group if _among(row, pool)), None)
    for row in mine:
        if row is best:
            continue
        if _among(row, ties):
            reasons.append((row.label, f"same speed group; lost on drop {row.drop:+.2f} or size"))
        elif (ratio := latency_ratio(row, best)) is None:
            # another thread count, or a row of another pool (a resumed run's): no shared rounds
            reasons.append(
                (row.label, f"slower: p50 {row.p50:.3f} ms vs {best.p50:.3f} ms (not interleaved)")
            )
        else:
            value, (low, high) = ratio
            reasons.append((row.label, f"slower: {value:.2f}x [{low:.2f}, {high:.2f}] its p50"))
    for row in others:
        reasons.append((row.label, f"other device ({row.device}): see its own rows"))
    disturbed = [row.label for row in pool if row.disturbed]
    return Recommendation(
        best,
        max_drop,
        reasons,
        tie_break,
        disturbed,
        ranked=groups,
        versus=statement(best, runner_up) if runner_up is not None else None,
        pool=best.pool,
    )


def recommend_each(
    rows: list[Row], max_drop: float = 1.0, *, point_estimate: bool = False
) -> dict[str, Recommendation]:
    """One recommendation per model of the run, in run order: a model's artifacts only ever
    compete with its own baseline and with each other."""
    models = list(dict.fromkeys(row.model or "" for row in rows))
    return {
        model: recommend(
            [r for r in rows if (r.model or "") == model],
            max_drop,
            point_estimate=point_estimate,
        )
        for model in models
    }
