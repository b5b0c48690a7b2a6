"""Quantize/dequantize round trips left in an executed graph, found by one walk for every
target: each target's census describes its executed ops as an ``OpGraph`` (what each op reads
and writes, and its role), and ``round_trips`` names what leaves int8 and comes back.

What counts, in every runtime alike:
- a quantize read straight by a dequantize: int8 straight back to float;
- a dequantize read straight by a quantize: a requantization through float;
- a dequantize of an activation whose float result passes through ops that compute in float
  (a float island, up to ``ISLAND_LIMIT`` ops, inside or between delegates) into a quantize.
A dequantize of a constant (a weight stored in int8 or fp16) is not a round trip, and a float
island that never reaches a quantize is the model's float tail, not one either."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

QUANTIZE, DEQUANTIZE, INT8 = "q", "dq", "int8"  # roles; None: computes in float
ISLAND_LIMIT = 16  # float ops followed from one dequantize before giving up


@dataclass(frozen=True)
class OpGraph:
    """The executed ops in order: the values each reads and writes, and each op's role."""

    reads: list[list[Hashable]]
    writes: list[list[Hashable]]
    roles: list[str | None]
    inputs: frozenset[Hashable]  # the graph's own inputs (read, never written)


def round_trips(graph: OpGraph, label: Callable[[int], str]) -> list[str]:
    """One line per round trip of ``graph``, each op named by ``label(index)``."""
    readers: dict[Hashable, list[int]] = {}
    for index, reads in enumerate(graph.reads):
        for value in reads:
            readers.setdefault(value, []).append(index)
    makers = {value: index for index, writes in enumerate(graph.writes) for value in writes}

    def after(index: int) -> list[int]:
        return sorted({r for value in graph.writes[index] for r in readers.get(value, [])})

    lines = []
    for index, role in enumerate(graph.roles):
        if role == QUANTIZE:
            lines += [f"{label(index)} -> {label(reader)}: int8 straight back to float"
                      for reader in after(index) if graph.roles[reader] == DEQUANTIZE]  # fmt: skip
        if role != DEQUANTIZE or not graph.reads[index]:
            continue
        source = graph.reads[index][0]
        maker = makers.get(source)
        # a weight's dequantize reads a constant; one reading a quantize is named above
        if (maker is None and source not in graph.inputs) or (
            maker is not None and graph.roles[maker] == QUANTIZE
        ):
            continue
        island, ends, frontier = [], set(), after(index)
        direct = {op for op in frontier if graph.roles[op] == QUANTIZE}
        lines += [f"{label(index)} -> {label(op)}: requantized through float"
                  for op in sorted(direct)]  # fmt: skip
        frontier = [op for op in frontier if op not in direct]
        while frontier and len(island) < ISLAND_LIMIT:
            op = frontier.pop(0)
            if graph.roles[op] == QUANTIZE:
                ends.add(op)
            elif graph.roles[op] is None and op not in island:
                island.append(op)
                frontier += after(op)
        if island and ends:
            middle = " -> ".join(label(i) for i in sorted(island))
            tail = ", ".join(label(i) for i in sorted(ends))
            lines.append(f"{label(index)} int8->float -> {middle} -> {tail} float->int8")
    return lines
