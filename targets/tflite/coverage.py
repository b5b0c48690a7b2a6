"""What of a .tflite runs on the fast path, from its census (one read of the file: the
flatbuffer and the ops XNNPACK's partitions replace in the interpreter); the generic counts are
``edgekit.targets.census.coverage_of``, this module gives the format's words."""

from __future__ import annotations

from pathlib import Path

from edgekit.targets.base import Coverage
from edgekit.targets.census import Census, counted, coverage_of
from edgekit.targets.manifest import Manifest

ARITHMETIC = ("mac", "elementwise")  # the summary names every arithmetic op left in float


def coverage(path: Path, manifest: Manifest, census: Census) -> Coverage:
    """The coverage of the file ``census`` was read from."""
    return coverage_of(census, manifest, summary, transpose=lambda op: op.op == "TRANSPOSE")


def summary(census: Census, quantized: bool) -> list[str]:  # noqa: FBT001 (coverage_of calls it positionally)
    ops = census.ops
    partitions = census.facts.get("partitions", 0)
    lines = [f"{sum(op.fast for op in ops)}/{len(ops)} ops in {partitions} XNNPACK partition(s)"]
    slow = [op.op for op in ops if not op.fast]
    if slow:
        lines.append("not delegated: " + counted(slow))
    if quantized:
        # every arithmetic op left in float, the elementwise ones too (ADD, MEAN)
        floats = [op.op for op in ops if op.kind in ARITHMETIC and op.compute != "int8"]
        if floats:
            lines.append("float compute ops: " + counted(floats))
        boundary = sum(op.op in ("QUANTIZE", "DEQUANTIZE") for op in ops)
        lines.append(f"{boundary} QUANTIZE/DEQUANTIZE ops")
    return lines
