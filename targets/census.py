"""The op census of a model file, read from the file itself: every op in execution order with
the dtype it computes in, its weights, its multiply-accumulates and whether it runs on the fast
path (the delegate, or onnxruntime's optimised CPU kernels). Each target reads its own format
(``targets/<name>/census.py``); ``edgekit audit`` and ``edgekit profile`` read only this.

Vocabulary:

- ``compute``: the arithmetic an op does: ``int8`` (integer activations and weights, or
  dynamic range: int8 weights, activations quantized at run time), ``fp16``, ``fp32``, or
  ``none`` for ops that only move or convert data (reshape, transpose, quantize).
- ``kind``: ``mac`` (convolutions, matmuls: where the multiply-accumulates are),
  ``elementwise`` (add, mul, pooling, activations), ``quant`` (quantize/dequantize/casts),
  ``data`` (reshape, concat, transpose, pad...).
- ``module``: the source torch module the op came from, as a module path (``block2.dw.0``),
  where the file keeps it (litert-torch op scopes and tensor names, torch.onnx name scopes and
  state-dict weight names, the legacy exporter's node names; for a .pte, the debug handles
  edgekit's manifest records at export); None where it does not. A conv or matmul is named
  after the module that owns its weights: a converter that folds a BatchNorm into the conv
  names the fused op after the BatchNorm, and a module that calls another's weights in its own
  forward (``nn.MultiheadAttention`` and its ``out_proj``) names the op after itself.
  ``edgekit.targets.layermap`` maps these paths to the layers quantize-debug names.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from edgekit.records import Coverage
from edgekit.targets.manifest import Manifest
from edgekit.targets.session import TensorSpec

COMPUTE_DTYPES = ("int8", "fp16", "fp32", "none")
KINDS = ("mac", "elementwise", "quant", "data")
# the ops an int8 share counts: those with the multiply-accumulates (conv, matmul). Formats split
# activations and requantization into elementwise ops differently (XNNPACK's separate clamps,
# onnxruntime's dequantize arithmetic: 24, 37 and 94 "arithmetic" ops for one model), so only
# these counts compare across targets; the summaries name the float elementwise ops
COMPUTING = ("mac",)


@dataclass
class CensusOp:
    index: int  # position in the order the runtime executes
    op: str  # the format's own op name: CONV_2D, QLinearConv, XNNConv2d, aten::add
    name: str = ""  # the node or output tensor name the file gives it
    module: str | None = None
    kind: str = "data"
    compute: str = "none"
    weights: str | None = None  # dtype of the constant weights it reads: int8, fp16, fp32
    granularity: str | None = None  # int8 weights: per-channel or per-tensor
    dynamic: bool = False  # int8 weights on float activations quantized at run time
    macs: int = 0  # multiply-accumulates of one inference (batch 1)
    # why the converter's own documented rule leaves this op float in a dynamic-range file (a
    # TFLiteConverter weight under 1024 elements), None where no rule does
    float_by_rule: str | None = None
    fast: bool = True  # inside the delegate / on the runtime's fast path
    where: str = (
        ""  # what runs it: XNNPACK, builtin kernels, portable kernels, CPUExecutionProvider
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Census:
    target: str
    ops: list[CensusOp]
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    # quantize->dequantize (or dequantize->quantize) pairs left in the executed graph: each a
    # round trip through float between two int8 ops, described in one line
    qdq_pairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how the file was read
    # what the reader saw beside the ops, for the format's coverage words (a .tflite's XNNPACK
    # partitions, an .onnx file's own node counts, a .pte's delegate calls)
    facts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "ops": [op.to_dict() for op in self.ops],
            "inputs": [spec.to_dict() for spec in self.inputs],
            "outputs": [spec.to_dict() for spec in self.outputs],
            "qdq_pairs": list(self.qdq_pairs),
            "notes": list(self.notes),
        }


# torch.export's module stack names a module ``L['self'].b1.se`` (strict) or ``b1.se``, the n-th
# call of a reused module ``b1.se@1``, an item of a container ``getattr(L['self'].x, '0')`` or
# ``L['self']._modules['x']``
_SELF = re.compile(r"^L\[['\"]self['\"]\]")
_GETATTR = re.compile(r"getattr\(([^()]*?), ?['\"](\w+)['\"]\)")
_ITEM = re.compile(r"(?:\._modules)?\[['\"]?(\w+)['\"]?\]")
_CALL_COUNT = re.compile(r"@\d+$")


def clean_module_path(name: str) -> str:
    """A module path as ``named_modules()`` spells it, from torch's module-stack spellings."""
    name = _SELF.sub("", str(name).strip())
    while _GETATTR.search(name):
        name = _GETATTR.sub(lambda match: f"{match.group(1)}.{match.group(2)}", name)
    name = _ITEM.sub(lambda match: f".{match.group(1)}", _SELF.sub("", name))
    return _CALL_COUNT.sub("", name).strip(".")


def coverage_of(
    census: Census,
    manifest: Manifest,
    summary: Callable[[Census, bool], list[str]],
    *,
    transpose: Callable[[CensusOp], bool],
    fallback: Callable[[CensusOp], str] = lambda op: op.op,
    quantized: bool = False,
) -> Coverage:
    """What of the file runs on the fast path, from its census (the file is read once per
    export, for census, coverage and audit alike): every op counts once; the compute ops are
    the census's MAC ops (``COMPUTING``), and int8 is the census's own ``compute``. The format gives
    its words: which ops are layout transposes, what a slow op is called, its summary lines,
    and (an .onnx) whether the file holds quantization markers. int8 counts are given for a
    quantized file: an int8 recipe, int8 compute, or ``quantized``."""
    ops = census.ops
    compute = [op for op in ops if op.kind in COMPUTING]
    int8 = [op for op in compute if op.compute == "int8"]
    quantized = quantized or manifest.recipe.startswith("int8") or bool(int8)
    return Coverage(
        total_ops=len(ops),
        fast_ops=sum(op.fast for op in ops),
        fallback_ops=sorted({fallback(op) for op in ops if not op.fast}),
        transposes=sum(transpose(op) for op in ops),
        int8_ops=len(int8) if quantized else None,
        compute_ops=len(compute) if quantized else None,
        summary="; ".join(summary(census, quantized)),
    )


def counted(names: Iterable[str], *, most_common: bool = False, times: str = " x") -> str:
    """``CONV_2D x3, ADD x1``: names with their counts, in first-seen order (or most first)."""
    counts = Counter(names)
    pairs = counts.most_common() if most_common else counts.items()
    return ", ".join(f"{name}{times}{count}" for name, count in pairs)
