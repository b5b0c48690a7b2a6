"""The one walk that finds quantize/dequantize round trips for every target: small graphs
with what each op reads and writes, as a target's census describes its executed ops."""

from __future__ import annotations

from edgekit.targets.round_trips import DEQUANTIZE, INT8, QUANTIZE, OpGraph, round_trips


def walk(ops: list[tuple[str, str | None, list[str], list[str]]], inputs=("x",)) -> list[str]:
    """``ops``: (name, role, reads, writes) in execution order; each op labelled by its name."""
    graph = OpGraph(
        reads=[list(reads) for _, _, reads, _ in ops],
        writes=[list(writes) for _, _, _, writes in ops],
        roles=[role for _, role, _, _ in ops],
        inputs=frozenset(inputs),
    )
    return round_trips(graph, lambda index: ops[index][0])


def test_a_float_op_between_a_dequantize_and_a_quantize_is_named_with_both_ends():
    lines = walk([
        ("q0", QUANTIZE, ["x"], ["a"]),
        ("conv", INT8, ["a", "w"], ["b"]),
        ("dq1", DEQUANTIZE, ["b"], ["c"]),
        ("mean", None, ["c"], ["d"]),
        ("q2", QUANTIZE, ["d"], ["e"]),
    ])  # fmt: skip
    assert lines == ["dq1 int8->float -> mean -> q2 float->int8"]


def test_a_float_island_of_several_ops_is_followed_to_every_quantize_it_reaches():
    lines = walk([
        ("dq", DEQUANTIZE, ["x"], ["a"]),
        ("add", None, ["a", "r"], ["b"]),
        ("relu", None, ["b"], ["c"]),
        ("q1", QUANTIZE, ["c"], ["d"]),
        ("q2", QUANTIZE, ["b"], ["e"]),
    ])  # fmt: skip
    assert lines == ["dq int8->float -> add -> relu -> q1, q2 float->int8"]


def test_straight_round_trips_each_way_are_named():
    lines = walk([
        ("q", QUANTIZE, ["x"], ["a"]),
        ("dq", DEQUANTIZE, ["a"], ["b"]),
        ("conv", INT8, ["b"], ["c"]),
        ("dq2", DEQUANTIZE, ["c"], ["d"]),
        ("q2", QUANTIZE, ["d"], ["e"]),
    ])  # fmt: skip
    assert lines == ["q -> dq: int8 straight back to float", "dq2 -> q2: requantized through float"]


def test_weights_and_the_float_tail_are_not_round_trips():
    lines = walk([
        ("dq_weight", DEQUANTIZE, ["w8"], ["w"]),  # a constant: no op writes it, not an input
        ("conv", INT8, ["x", "w"], ["a"]),
        ("dq", DEQUANTIZE, ["a"], ["b"]),
        ("softmax", None, ["b"], ["out"]),  # float to the end: the model's tail
    ])  # fmt: skip
    assert lines == []


def test_an_int8_op_ends_a_float_island():
    lines = walk([
        ("dq", DEQUANTIZE, ["x"], ["a"]),
        ("qconv", INT8, ["a"], ["b"]),  # reads float but computes in int8: not the island
        ("q", QUANTIZE, ["b"], ["c"]),
    ])  # fmt: skip
    assert lines == []
