"""Speed groups: the artifacts of one pool ranked into groups that a user can act on.

Members of one group cannot be told apart; every member of a faster group is faster than every
member of a slower one. "Told apart" is Tukey's simultaneous test over every pair of the pool
(``edgekit.common.stats.simultaneous_quantile``), so that, over all the pairs at once, the chance
of splitting two artifacts that are equally fast stays within 1 - ``confidence``, however many
artifacts there are. Each ratio's own interval, as printed beside it, is a plain 95 % one."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from edgekit.common.stats import (
    LevelFit,
    level_ratio,
    pair_df,
    relative_half_width,
    simultaneous_quantile,
)


@dataclass(frozen=True)
class Comparison:
    """``slower`` over ``faster``: the ratio, its 95 % interval, and whether the simultaneous
    test tells them apart."""

    faster: int
    slower: int
    ratio: float
    interval: tuple[float, float]
    distinct: bool


def compare(levels: list[LevelFit], a: int, b: int, confidence: float = 0.95) -> Comparison:
    """``a`` against ``b`` among ``levels`` (one pool): which one is faster, by how much, and
    whether that holds with every pair of the pool tested at once."""
    faster, slower = (a, b) if levels[a].log_level <= levels[b].log_level else (b, a)
    ratio, interval = level_ratio(levels[slower], levels[faster], confidence)
    critical = simultaneous_quantile(
        len(levels), pair_df(levels[slower], levels[faster]), confidence
    )
    _, simultaneous = level_ratio(levels[slower], levels[faster], confidence, critical)
    return Comparison(faster, slower, ratio, interval, simultaneous[0] > 1.0)


def speed_groups(levels: list[LevelFit], confidence: float = 0.95) -> list[list[int]]:
    """Indices of ``levels``, fastest first, cut into groups by Tukey's simultaneous test."""
    order = sorted(range(len(levels)), key=lambda index: levels[index].log_level)
    return cut_groups(order, lambda a, b: compare(levels, a, b, confidence).distinct)


def cut_groups(order: list[int], distinct: Callable[[int, int], bool]) -> list[list[int]]:
    """``order`` (fastest first) cut into groups: a cut falls only where every member before it
    is told apart (``distinct``) from every member after it. Members of one group are not all
    told apart from each other where the data chain them (a ~ b, b ~ c, a < c): they stay
    together, since no cut between them would hold."""
    groups: list[list[int]] = []
    current: list[int] = []
    for position, index in enumerate(order):
        current.append(index)
        later = order[position + 1 :]
        if later and all(distinct(a, b) for a in current for b in later):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def undecided(levels: list[LevelFit], precision: float | None) -> list[tuple[int, int]]:
    """The pairs whose 95 % interval includes 1 yet reaches beyond ``precision`` of their
    ratio: neither told apart nor shown to be within the precision of each other."""
    pairs = []
    for a in range(len(levels)):
        for b in range(a + 1, len(levels)):
            ratio, (low, high) = level_ratio(levels[a], levels[b])
            wide = precision is None or relative_half_width((low, high), ratio) > precision
            if low <= 1.0 <= high and wide:
                pairs.append((a, b))
    return pairs


def group_lines(labels: list[str], levels: list[LevelFit]) -> list[str]:
    """The speed groups in words: the groups, fastest first, then each group against the next
    (its slowest member against the next group's fastest: the closest pair across the cut)."""
    groups = speed_groups(levels)
    listed = "  ".join(
        f"{number}) {', '.join(labels[index] for index in group)}"
        for number, group in enumerate(groups, start=1)
    )
    lines = [f"speed groups, fastest first: {listed}"]
    for faster, slower in itertools.pairwise(groups):
        ratio, (low, high) = level_ratio(levels[slower[0]], levels[faster[-1]])
        lines.append(
            f"{labels[faster[-1]]} is {ratio:.2f}x [{low:.2f}, {high:.2f}] faster than "
            f"{labels[slower[0]]}"
        )
    return lines


def stopping_line(pool: dict) -> str:
    """How a pool's measuring went and why it stopped (``Interleaved.summary``)."""
    why = {
        "precision": f"every interval within {100 * (pool.get('precision') or 0):g} % of its ratio",
        "budget": "the time budget (another session would not fit)",
        "sessions": "the most sessions a pool may take",
        "plan": "the planned sessions",
        "decided": "the question was decided",
        "failed": "every side failed",
    }.get(str(pool.get("stopped")), str(pool.get("stopped")))
    line = (
        f"measured in {pool.get('sessions')} session(s) of every side, {pool.get('rounds')} "
        f"interleaved rounds, {pool.get('seconds') or 0:.0f} s; stopped on {why}"
    )
    alone = pool.get("reopened_alone") or {}
    if alone:
        named = ", ".join(f"{label} {count} more" for label, count in alone.items())
        line += f"; sessions of a side whose own spread is wider, reopened by itself: {named}"
    if not pool.get("reopened", True):
        line += "; the device cannot reopen a session, so its sessions differ only in time"
    return line
