"""The op census of a .tflite file (see ``edgekit.targets.census``), read with LiteRT's own
flatbuffer schema; what the XNNPACK delegate takes comes from an interpreter that applied it.

How dtypes are decided: an op computes in int8 when its activation input is an integer tensor;
a float activation with int8 constant weights is dynamic range (the kernel quantizes the
activation at run time); a float op whose weights come through a DEQUANTIZE of float16
constants has fp16 weights but computes in fp32 (LiteRT's CPU kernels and XNNPACK by default
dequantize fp16 weights once, at load)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UserInputError, first_line
from edgekit.targets.census import Census, CensusOp
from edgekit.targets.manifest import Manifest
from edgekit.targets.round_trips import DEQUANTIZE, QUANTIZE, OpGraph, round_trips
from edgekit.targets.session import TensorSpec

INTEGER = ("int8", "uint8", "int16", "int4")
# TFLiteConverter's dynamic-range rule (its weight quantizer's min_elements): smaller weights
# stay float, on purpose; ai-edge-quantizer's recipes quantize every weight
DYNAMIC_MIN_ELEMENTS = 1024
MAC_OPS = {
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "TRANSPOSE_CONV",
    "CONV_3D",
    "FULLY_CONNECTED",
    "BATCH_MATMUL",
}
QUANT_OPS = {"QUANTIZE", "DEQUANTIZE", "CAST"}
DATA_OPS = {
    "RESHAPE",
    "TRANSPOSE",
    "CONCATENATION",
    "PAD",
    "PADV2",
    "SQUEEZE",
    "EXPAND_DIMS",
    "SLICE",
    "STRIDED_SLICE",
    "GATHER",
    "PACK",
    "UNPACK",
    "SPLIT",
    "SPLIT_V",
    "SHAPE",
    "BROADCAST_TO",
    "TILE",
}
WEIGHT_INPUT = {
    "CONV_2D": 1,
    "DEPTHWISE_CONV_2D": 1,
    "CONV_3D": 1,
    "FULLY_CONNECTED": 1,
    "TRANSPOSE_CONV": 1,
    "BATCH_MATMUL": 1,
}


def census(path: Path, manifest: Manifest | None = None) -> Census:
    """Every op of the file as XNNPACK places it; the manifest adds nothing a .tflite does not
    keep (its tensors carry the module paths)."""
    from edgekit.targets.tflite.session import delegated_nodes, make_interpreter

    graph = _Graph.read(Path(path))
    try:
        replaced, partitions = delegated_nodes(make_interpreter(Path(path), xnnpack=True))
    except Exception as exc:  # a file the interpreter refuses: no delegation to report
        raise UserInputError(f"{path}: LiteRT cannot load it ({first_line(exc)})") from None
    ops = [graph.op(index, delegated=index in replaced) for index in range(graph.count)]
    notes = [
        f"read from the flatbuffer ({graph.count} ops, subgraph 0); XNNPACK took "
        f"{len(replaced)} in {partitions} partition(s)",
        "fp16 weights are dequantized to fp32 at load by LiteRT's CPU kernels and XNNPACK "
        "(compute fp32)",
    ]
    if not any(op.module for op in ops):
        notes.append("no module paths: the file's tensor names do not carry them")
    return Census(
        target="tflite",
        ops=ops,
        inputs=[graph.spec(i) for i in graph.inputs],
        outputs=[graph.spec(i) for i in graph.outputs],
        qdq_pairs=round_trips(graph.op_graph(), lambda i: _label(ops[i], f"#{i}")),
        notes=notes,
        facts={"partitions": partitions},
    )


def _label(op: CensusOp, position: str) -> str:
    return f"{position} {op.op}" + (f" ({op.module})" if op.module else "")


class _Graph:
    """Subgraph 0 of a .tflite flatbuffer: tensors, buffers and operators by index."""

    def __init__(self, model: Any, schema: Any) -> None:
        self.model, self.graph = model, model.Subgraphs(0)
        self.count = self.graph.OperatorsLength()
        builtin = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        self.type_names = {
            v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")
        }
        self.op_names = []
        for position in range(self.count):
            code = model.OperatorCodes(self.graph.Operators(position).OpcodeIndex())
            name = builtin.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
            if name == "CUSTOM":
                name = "CUSTOM:" + (code.CustomCode() or b"?").decode()
            self.op_names.append(name)
        self.inputs = [int(i) for i in self.graph.InputsAsNumpy()]
        self.outputs = [int(i) for i in self.graph.OutputsAsNumpy()]
        self.producer = {}
        for position in range(self.count):
            for tensor in self._outs(position):
                self.producer[tensor] = position

    @classmethod
    def read(cls, path: Path) -> _Graph:
        from ai_edge_litert import schema_py_generated as schema

        if not path.is_file():
            raise UserInputError(f"{path}: model file not found")
        data = path.read_bytes()
        try:
            if len(data) < 8 or data[4:8] != b"TFL3":
                raise ValueError("no TFL3 file identifier")
            graph = cls(schema.Model.GetRootAs(data, 0), schema)
        except Exception as exc:  # flatbuffers raises anything on truncated bytes
            raise UserInputError(
                f"{path}: not a readable .tflite file ({first_line(exc)})"
            ) from None
        return graph

    def _ins(self, position: int) -> list[int]:
        op = self.graph.Operators(position)
        return [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []

    def _outs(self, position: int) -> list[int]:
        op = self.graph.Operators(position)
        return [int(i) for i in op.OutputsAsNumpy() if i >= 0] if op.OutputsLength() else []

    def dtype(self, tensor: int) -> str:
        return self.type_names.get(self.graph.Tensors(tensor).Type(), "?")

    def shape(self, tensor: int) -> list[int]:
        t = self.graph.Tensors(tensor)
        return [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []

    def constant(self, tensor: int) -> bool:
        buffer = self.model.Buffers(self.graph.Tensors(tensor).Buffer())
        return buffer is not None and (buffer.DataLength() > 0 or buffer.Offset() > 1)

    def weight_dtype(self, tensor: int) -> str:
        """The stored dtype of a weight, through a DEQUANTIZE of a constant (fp16, int8)."""
        if self.constant(tensor):
            return self.dtype(tensor)
        producer = self.producer.get(tensor)
        if producer is not None and self.op_names[producer] == "DEQUANTIZE":
            source = self._ins(producer)[0]
            if self.constant(source):
                return self.dtype(source)
        return self.dtype(tensor)

    def stored(self, tensor: int) -> bool:
        """A constant, or a DEQUANTIZE of one (a weight, not an activation)."""
        producer = self.producer.get(tensor)
        if producer is not None and self.op_names[producer] == "DEQUANTIZE":
            tensor = self._ins(producer)[0]
        return self.constant(tensor)

    def stored_name(self, tensor: int) -> str:
        """The name of a weight's constant, through a DEQUANTIZE (fp16, int8 weights)."""
        producer = self.producer.get(tensor)
        if producer is not None and self.op_names[producer] == "DEQUANTIZE":
            tensor = self._ins(producer)[0]
        return (self.graph.Tensors(tensor).Name() or b"").decode()

    def granularity(self, tensor: int) -> str | None:
        quant = self.graph.Tensors(tensor).Quantization()
        if quant is None or quant.ScaleLength() == 0:
            return None
        return "per-channel" if quant.ScaleLength() > 1 else "per-tensor"

    def spec(self, tensor: int) -> TensorSpec:
        t = self.graph.Tensors(tensor)
        quant = t.Quantization()
        params = None
        if quant is not None and quant.ScaleLength() == 1:
            params = {"scale": float(quant.Scale(0)), "zero_point": int(quant.ZeroPoint(0))}
        name = (t.Name() or b"").decode()
        return TensorSpec(name, self.shape(tensor), self.dtype(tensor), "", params)

    def op(self, index: int, *, delegated: bool) -> CensusOp:
        name = self.op_names[index]
        ins, outs = self._ins(index), self._outs(index)
        tensor_name = (self.graph.Tensors(outs[0]).Name() or b"").decode() if outs else ""
        activation = next((t for t in ins if t >= 0 and not self.constant(t)), None)
        act = self.dtype(activation) if activation is not None else "float32"
        entry = CensusOp(
            index,
            name,
            tensor_name,
            module_of(tensor_name),
            fast=delegated,
            where="XNNPACK" if delegated else "builtin kernels",
        )
        if name in QUANT_OPS:
            entry.kind = "quant"
        elif name in DATA_OPS:
            entry.kind = "data"
        else:
            entry.kind = "mac" if name in MAC_OPS else "elementwise"
            entry.compute = "int8" if act in INTEGER else ("fp16" if act == "float16" else "fp32")
        weight_at = WEIGHT_INPUT.get(name)
        if weight_at is not None and len(ins) > weight_at and ins[weight_at] >= 0:
            weight = ins[weight_at]
            # the module that owns the weights and bias, else the output's (see mac_module_of)
            stored = [self.stored_name(t) for t in ins[weight_at:] if t >= 0 and self.stored(t)]
            entry.module = mac_module_of([*stored, tensor_name])
            stored = self.weight_dtype(weight)
            entry.weights = {"float32": "fp32", "float16": "fp16"}.get(stored, stored)
            elements = int(np.prod(self.shape(weight))) if self.constant(weight) else 0
            if stored in ("float32", "float16") and 0 < elements < DYNAMIC_MIN_ELEMENTS:
                entry.float_by_rule = (
                    f"TFLiteConverter's dynamic-range quantization leaves weights under "
                    f"{DYNAMIC_MIN_ELEMENTS} elements float ({elements})"
                )
            if stored in INTEGER:
                entry.granularity = self.granularity(weight)
                # dynamic range: the kernel reads the int8 weight itself (one read through a
                # DEQUANTIZE gets float weights, and computes in float)
                if act not in INTEGER and self.constant(weight):
                    entry.dynamic, entry.compute = True, "int8"
            entry.macs = self.macs(name, ins, outs)
        return entry

    def macs(self, name: str, ins: list[int], outs: list[int]) -> int:
        out = self.shape(outs[0]) if outs else []
        weight = self.shape(ins[1]) if len(ins) > 1 and ins[1] >= 0 else []
        if not out or not weight:
            return 0
        if name == "CONV_2D":  # filter [O, kH, kW, I/groups]
            return int(np.prod(out)) * int(np.prod(weight[1:]))
        if name == "DEPTHWISE_CONV_2D":  # filter [1, kH, kW, O]
            return int(np.prod(out)) * weight[1] * weight[2]
        if name == "TRANSPOSE_CONV":  # inputs: output shape, filter [O, kH, kW, I], input
            source = self.shape(ins[2]) if len(ins) > 2 else []
            return int(np.prod(source)) * weight[0] * weight[1] * weight[2] if source else 0
        if name in ("FULLY_CONNECTED", "BATCH_MATMUL"):  # K is the weight's last dimension
            k = weight[-1] if name == "FULLY_CONNECTED" else self.shape(ins[0])[-1]
            return int(np.prod(out)) * k
        if name == "CONV_3D":
            return int(np.prod(out)) * int(np.prod(weight[:4]))
        return 0

    def op_graph(self) -> OpGraph:
        """The ops as ``edgekit.targets.round_trips`` walks them (a constant tensor has a
        buffer and no producer)."""
        roles = {"QUANTIZE": QUANTIZE, "DEQUANTIZE": DEQUANTIZE}
        return OpGraph(
            reads=[[t for t in self._ins(p) if t >= 0] for p in range(self.count)],
            writes=[self._outs(p) for p in range(self.count)],
            roles=[roles.get(name) for name in self.op_names],
            inputs=frozenset(self.inputs),
        )


def module_of(tensor_name: str) -> str | None:
    """The source module of a tensor from its name: litert-torch writes
    ``pkg.Root/pkg.Cls_attr/.../pkg.Cls_leaf;N``, and the output of a fused op joins the names
    of the ops it absorbed with ``;;``, its own (the last op's output: an activation) first;
    TFLiteConverter writes Keras layer paths ``model/layer/Op;...``."""
    if "/" not in tensor_name:
        return None
    if _is_litert(tensor_name):
        scopes = litert_scopes(tensor_name)
        return (scopes[0][0] or None) if scopes else None
    parts = tensor_name.split(";;")[0].split(";")[0].split("/")
    return "/".join(parts[1:-1]) or None  # Keras: drop the model name and the op name


def mac_module_of(names: list[str]) -> str | None:
    """A conv or matmul's module, from its weight's, bias's and output's tensor names: the
    first scope whose innermost module is a Conv or Linear. The names of a fused op also carry
    its BatchNorm and activation (``F.relu`` of the enclosing block, first), the model's output
    is named after the signature and litert-torch's int8 weights after its export wrapper."""
    for name in names:
        if _is_litert(name):
            for path, leaf in litert_scopes(name):
                if path and _MAC_CLASS.search(leaf):
                    return path
    output = names[-1] if names else ""
    return module_of(output)


def litert_scopes(tensor_name: str) -> list[tuple[str, str]]:
    """(module path, class of its innermost module) of each op a litert-torch tensor name
    joins; the channel-last wrapper and the root model are not part of a path."""
    scopes = []
    for chunk in (c for c in tensor_name.split(";;") if c):
        segments = chunk.split(";")[0].split("/")[1:]
        named = [s.rsplit(".", 1)[-1].split("_", 1) for s in segments]
        attrs = [(parts[1], parts[0]) for parts in named if len(parts) == 2]
        attrs = attrs[1:] if attrs and attrs[0][0] == "wrapped" else attrs
        scopes.append((".".join(a for a, _ in attrs), attrs[-1][1] if attrs else ""))
    return scopes


_MAC_CLASS = re.compile(r"Conv|Linear")


def _is_litert(tensor_name: str) -> bool:
    return "/" in tensor_name and "." in tensor_name.split("/")[0]  # class-qualified segments
