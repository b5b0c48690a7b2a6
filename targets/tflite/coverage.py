"""What of a .tflite runs on the fast path: ops from the file; fast ops are those XNNPACK's
partitions replace in the interpreter; int8 ops are compute ops with integer activations (or,
dynamic range, int8 weights)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from edgekit.targets.base import Coverage
from edgekit.targets.manifest import Manifest
from edgekit.targets.tflite.flatbuffer import Op, graph_ops
from edgekit.targets.tflite.session import INTEGER_TYPES, delegated_nodes, make_interpreter

# Ops that do arithmetic on activations: the denominator of Coverage.int8_ops.
COMPUTE_OPS = frozenset(
    {
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "TRANSPOSE_CONV",
        "CONV_3D",
        "FULLY_CONNECTED",
        "BATCH_MATMUL",
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "MEAN",
        "SUM",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
    }
)


def runs_int8(op: Op) -> bool:
    """Integer activations (static), or int8 weights on float activations (dynamic range: the
    kernel quantizes the activations at run time and computes in int8)."""
    activation = op.inputs[0] if op.inputs else None
    if activation in INTEGER_TYPES:
        return True
    weight = op.inputs[1] if len(op.inputs) > 1 else None
    return activation == "float32" and weight == "int8" and op.name not in ("ADD", "SUB", "MUL")


def summarize(ops: list[Op], replaced: set[int], partitions: int, quantized: bool) -> str:
    fallback = Counter(op.name for index, op in enumerate(ops) if index not in replaced)
    parts = [f"{len(replaced)}/{len(ops)} ops in {partitions} XNNPACK partition(s)"]
    if fallback:
        parts.append("not delegated: " + ", ".join(f"{n} x{c}" for n, c in fallback.items()))
    if quantized:
        floats = Counter(op.name for op in ops if op.name in COMPUTE_OPS and not runs_int8(op))
        if floats:
            parts.append("float compute ops: " + ", ".join(f"{n} x{c}" for n, c in floats.items()))
        boundary = sum(op.name in ("QUANTIZE", "DEQUANTIZE") for op in ops)
        parts.append(f"{boundary} QUANTIZE/DEQUANTIZE ops")
    return "; ".join(parts)


def coverage(path: Path, manifest: Manifest) -> Coverage:
    ops = graph_ops(Path(path))
    replaced, partitions = delegated_nodes(make_interpreter(Path(path), xnnpack=True))
    compute = [op for op in ops if op.name in COMPUTE_OPS]
    quantized = manifest.recipe.startswith("int8") or any(runs_int8(op) for op in compute)
    return Coverage(
        total_ops=len(ops),
        fast_ops=len(replaced),
        fallback_ops=sorted({op.name for i, op in enumerate(ops) if i not in replaced}),
        transposes=sum(op.name == "TRANSPOSE" for op in ops),
        int8_ops=sum(runs_int8(op) for op in compute) if quantized else None,
        compute_ops=len(compute) if quantized else None,
        summary=summarize(ops, replaced, partitions, quantized),
    )
