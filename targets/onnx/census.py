"""The op census of an .onnx file (see ``edgekit.targets.census``): the graph onnxruntime
runs on CPU after ORT_ENABLE_ALL fusion, in the order of one profiled run, with each node's
execution provider (the session of ``edgekit.targets.onnx.coverage``).

Why two graphs: only the runtime graph says what runs in int8 (a Q/DQ Conv onnxruntime fused is
a QLinearConv; one it did not fuse computes in float); only the file keeps module paths, stored
weight dtypes (fp16 weights the CPU EP casts back to fp32) and shapes onnx can infer. Runtime
nodes are tied to file nodes by name: onnxruntime keeps node or output names, adding ``_nchwc``,
``_token_N`` or ``InsertedPrecisionFreeCast_``."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.fileio import temporary_directory
from edgekit.errors import EdgekitError, UserInputError, first_line
from edgekit.targets.census import Census, CensusOp
from edgekit.targets.manifest import Manifest
from edgekit.targets.onnx import coverage as ort_graph
from edgekit.targets.onnx.describe import describe
from edgekit.targets.onnx.names import node_modules, weight_owner
from edgekit.targets.onnx.session import CPU_PROVIDER, providers
from edgekit.targets.round_trips import DEQUANTIZE, INT8, QUANTIZE, OpGraph, round_trips
from edgekit.targets.session import Accelerator

# MAC op -> index of its weight input (activations first, as in ONNX and onnxruntime's contribs)
MAC_WEIGHT = {**dict.fromkeys(ort_graph.CONV_OPS | ort_graph.MATMUL_OPS, 1), "ConvInteger": 1,
              "MatMulInteger": 1, "MatMulIntegerToFloat": 1, "DynamicQuantizeMatMul": 1,
              "QLinearConv": 3, "QGemm": 3, "QLinearMatMul": 3}  # fmt: skip
CONV_LIKE = ort_graph.CONV_OPS | {"QLinearConv", "ConvInteger"}
DYNAMIC_OPS = {"ConvInteger", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
# int8 op -> index of its weight scale (ConvInteger/MatMulInteger: zero point; a Mul scales)
WEIGHT_SCALE = {"QLinearConv": 4, "QGemm": 4, "QLinearMatMul": 4, "DynamicQuantizeMatMul": 2,
                "MatMulIntegerToFloat": 3, "ConvInteger": 3, "MatMulInteger": 3}  # fmt: skip
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast", "CastLike"}
DATA_OPS = {"Reshape", "Transpose", "Concat", "Flatten", "Pad", "Squeeze", "Unsqueeze", "Gather",
            "GatherElements", "GatherND", "Slice", "Split", "Shape", "Size", "Expand", "Identity",
            "Tile", "ReorderInput", "ReorderOutput", "Constant", "ConstantOfShape", "Dropout",
            "DepthToSpace", "SpaceToDepth", "QLinearConcat", "ScatterND", "Range"}  # fmt: skip
CONSTANT_OPS = {"Constant", "ConstantOfShape"}
# what onnxruntime fuses into the conv or matmul before it (the fused node takes its name)
FUSED_AFTER = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "HardSwish",
               "BatchNormalization", "Add", "Mul", "Sum", "QuantizeLinear"}  # fmt: skip
PASS_THROUGH = {"DequantizeLinear", "Cast", "Identity", "Reshape", "Transpose", "Unsqueeze"}
DTYPES = {1: "fp32", 11: "fp32", 10: "fp16", 16: "fp16", 2: "int8", 3: "int8"}  # onnx types
_ORT_PREFIX = re.compile(r"^(InsertedPrecisionFreeCast_)+")
_ORT_SUFFIX = re.compile(r"(_nchwc|_token_\d+|/\w+Fusion)+$")  # /MatMulAddFusion...
_ORT_MADE = re.compile(r"_(bn|mul)$")  # a BatchNormalization or Mul made a 1x1 NCHWc conv


def census(path: Path, manifest: Manifest | None = None) -> Census:
    """Every node onnxruntime runs on CPU, in execution order, with the dtype it computes in;
    a file onnx or onnxruntime cannot read raises UserInputError naming it."""
    import onnx
    import onnxruntime

    path = Path(path)
    facts = describe(path)  # UserInputError for a file that is not ONNX
    chosen = providers(Accelerator.CPU)
    with temporary_directory("edgekit-onnx-census-") as tmp:
        try:
            runtime = ort_graph.runtime_graph(path, chosen, tmp)
        except EdgekitError:
            raise
        except Exception as exc:  # onnxruntime refuses to run the file (an input it cannot feed)
            raise UserInputError(f"{path}: onnxruntime cannot run it ({first_line(exc)})") from None
        optimized = onnx.load(str(tmp / "optimized.onnx"), load_external_data=False)
    rt = _Graph(_infer(optimized))
    stored = onnx.load(str(path), load_external_data=False)
    source = _Graph(_infer(stored))
    nodes = rt.nodes  # saved in the order the sequential executor runs them (as profiled)
    ops = [_op(i, node, rt, source, runtime.placement.get(node.name, chosen[0]))
           for i, node in enumerate(nodes)]  # fmt: skip
    return Census(
        target="onnx",
        ops=ops,
        inputs=facts.inputs,
        outputs=facts.outputs,
        qdq_pairs=round_trips(_op_graph(rt), lambda i: _label(ops[i])),
        notes=_notes(ops, len(source.nodes), onnxruntime.__version__, chosen[0]),
        facts={"file_ops": dict(Counter(node.op_type for node in source.nodes)),
               "file_fp16": any(i.data_type == onnx.TensorProto.FLOAT16
                                for i in stored.graph.initializer)},
    )  # fmt: skip


class _Graph:
    """One graph's nodes by name and by output, its constants, and each tensor's known type."""

    def __init__(self, graph: Any) -> None:
        self.nodes = list(graph.node)
        self.by_name = {node.name: node for node in self.nodes if node.name}
        self.producer = {out: node for node in self.nodes for out in node.output if out}
        self.consumers: dict[str, list[Any]] = defaultdict(list)
        for node in self.nodes:
            for name in node.input:
                self.consumers[name].append(node)
        self.constants = {init.name for init in graph.initializer}
        self.inputs = {value.name for value in graph.input} - self.constants
        self.modules = node_modules(self.nodes)  # id(node) -> torch module path, "" unknown
        self.types: dict[str, tuple[int, list[int | None]]] = {
            init.name: (init.data_type, list(init.dims)) for init in graph.initializer
        }
        for value in [*graph.value_info, *graph.input, *graph.output]:
            kind = value.type.tensor_type
            if value.type.HasField("tensor_type") and value.name not in self.types:
                dims = [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]
                self.types[value.name] = (kind.elem_type, dims if kind.HasField("shape") else [])

    def shape(self, name: str) -> list[int] | None:
        """Known dims (a dynamic batch dim taken as 1), or None where any is unknown."""
        if name not in self.types or (not self.types[name][1] and name not in self.constants):
            return None
        dims = [1 if d is None and i == 0 else d for i, d in enumerate(self.types[name][1])]
        return None if None in dims else dims  # type: ignore[return-value]

    def root(self, name: str) -> tuple[str, Any]:
        """The tensor ``name`` is read from, back through dequantize, casts and reshapes, and
        the DequantizeLinear on the way (None if none)."""
        dequantize = None
        for _ in range(4):
            node = self.producer.get(name)
            if node is None or node.op_type not in PASS_THROUGH:
                break
            dequantize = dequantize or (node if node.op_type == "DequantizeLinear" else None)
            name = node.input[0]
        return name, dequantize

    def constant(self, name: str) -> bool:
        root = self.root(name)[0]
        return root in self.constants or getattr(self.producer.get(root), "op_type", 0) in (
            CONSTANT_OPS
        )

    def weight(self, name: str) -> tuple[str | None, str | None]:
        """(dtype stored, granularity) of a weight; (None, None) for an activation."""
        if not self.constant(name):
            return None, None
        root, dequantize = self.root(name)
        stored = DTYPES.get(self.types.get(root, (0, []))[0])
        if dequantize is None:
            return stored, None
        return stored or "int8", _granularity(self.shape(dequantize.input[1]))

    def activations(self, node: Any) -> list[str]:
        return [name for name in node.input if name in self.producer and not self.constant(name)]


def _infer(model: Any) -> Any:
    """The graph with the shapes onnx infers (each input's dynamic batch dim taken as 1), and
    those of the contrib ops it does not know (QLinearAdd, QGemm...), by rounds: a contrib
    op's output shape as a hint, then onnx again for the standard ops after it."""
    from onnx import helper, shape_inference

    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = 1
    graph = model.graph
    for _ in range(64):
        try:
            graph = shape_inference.infer_shapes(model).graph
        except Exception:  # an op or a size shape inference refuses: what it had so far
            return graph
        known = _Graph(graph)
        hints = []
        for node in graph.node:
            if node.domain in ("", "ai.onnx") or not node.output or node.output[0] in known.types:
                continue
            dims = _contrib_shape(node, known.shape)
            if dims is not None:
                floats = node.op_type in DYNAMIC_OPS or (  # QGemm without y_scale too
                    node.op_type == "QGemm" and len(node.input) < 8
                )
                elem = 1 if floats else known.types.get(node.input[0], (1, []))[0]
                hints.append(helper.make_tensor_value_info(node.output[0], elem, dims))
                known.types[node.output[0]] = (elem, dims)
        if not hints:
            break
        model.graph.value_info.extend(hints)
    return graph


def _contrib_shape(node: Any, shape: Any) -> list[int] | None:
    """The output shape of the onnxruntime contrib ops quantization tools write."""
    op, inputs = node.op_type, node.input
    attrs = {a.name: a.i for a in node.attribute}
    first = shape(inputs[0])
    if first is None:
        return None
    if op == "QLinearGlobalAveragePool":
        ones = [1] * (len(first) - 2)
        return [first[0], *ones, first[-1]] if attrs.get("channels_last") else [*first[:2], *ones]
    if op in ("QGemm", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"):
        weight = shape(inputs[MAC_WEIGHT[op]])
        if weight is None:
            return None
        rows = [first[-1]] if attrs.get("transA") else first[:-1]
        return [*rows, weight[0] if attrs.get("transB") else weight[-1]]
    if op in ("QLinearAdd", "QLinearMul"):
        other = shape(inputs[3])
        return None if other is None else list(np.broadcast_shapes(first, other))
    if op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"):
        return first
    return None


def _op(index: int, node: Any, rt: _Graph, source: _Graph, provider: str) -> CensusOp:
    op = node.op_type
    origin = _source(node, source)
    kind = "mac" if op in MAC_WEIGHT else "quant" if op in QUANT_OPS else "elementwise"
    kind = "data" if op in DATA_OPS else kind
    census_op = CensusOp(index, op, node.name, kind=kind, where=provider)
    census_op.fast = provider == CPU_PROVIDER and op not in ort_graph.SLOW_KERNELS
    if kind == "mac":
        origin = _walk_to_mac(origin, source)
        _mac_facts(census_op, node, rt, origin, source)
    elif kind == "elementwise":
        census_op.compute = "int8" if _is_int8_op(op) else _dtype(node.output[0], rt, source)
    if origin is not None:
        same = kind == "mac" or origin.op_type == op  # else a node onnxruntime added after it
        census_op.name = (origin.name or origin.output[0]) if same else node.name
        census_op.module = source.modules.get(id(origin)) or census_op.module
    return census_op


def _is_int8_op(op: str) -> bool:
    return op.startswith("QLinear") or op in ort_graph.INT8_COMPUTE_OPS


def _mac_facts(census_op: CensusOp, node: Any, rt: _Graph, origin: Any, source: _Graph) -> None:
    """Compute dtype from what runs (int8 kernels, the dtype of the weight the kernel reads);
    weights and granularity from what the file stores; MACs from the file's shapes; a module
    from the weight's state-dict name, for nodes a quantizer rewrote without metadata."""
    op, weight = node.op_type, node.input[MAC_WEIGHT[node.op_type]]
    stored, granularity = rt.weight(weight)
    mac_origin = origin is not None and origin.op_type in MAC_WEIGHT
    weights = [(rt, weight)]
    if mac_origin:
        weights.append((source, origin.input[MAC_WEIGHT[origin.op_type]]))
        found = source.weight(weights[1][1])
        stored, granularity = found[0] or stored, found[1] or granularity
    # a node onnxruntime or the quantizer made, with no metadata: its weight's module
    owners = [weight_owner(graph.root(name)[0]) for graph, name in reversed(weights)]
    census_op.module = next((owner for owner in owners if owner), None)
    if _is_int8_op(op):
        census_op.compute, census_op.dynamic = "int8", op in DYNAMIC_OPS
        if rt.constant(weight):
            scale = node.input[WEIGHT_SCALE[op]] if len(node.input) > WEIGHT_SCALE[op] else ""
            census_op.weights = "int8"
            census_op.granularity = _granularity(rt.shape(scale)) if scale else granularity
    else:
        read = rt.producer.get(weight)
        if weight in rt.constants:
            census_op.compute = DTYPES.get(rt.types[weight][0], "fp32")
        elif read is not None and read.op_type == "DequantizeLinear":
            census_op.compute = DTYPES.get(rt.types.get(read.input[1], (1, []))[0], "fp32")
        else:  # two activations (attention), or a weight computed at run time
            census_op.compute = _dtype(node.input[0], rt, source)
        census_op.weights, census_op.granularity = stored, granularity if stored == "int8" else None
    macs = None
    if mac_origin:  # from the file's shapes
        shapes = [source.shape(n) for n in (origin.output[0], weights[1][1], origin.input[0])]
        macs = _macs(origin, *shapes)
    if macs is None:  # a conv onnxruntime made (a BatchNormalization as NCHWc 1x1 conv...)
        out = rt.shape(node.output[0]) or (source.shape(origin.output[0]) if origin else None)
        macs = _macs(node, out, rt.shape(weight), rt.shape(node.input[0]))
    census_op.macs = macs or 0


def _macs(node: Any, out: Any, weight: Any, left: Any) -> int | None:
    """Conv: outputs x (C_in/group x kH x kW), ConvTranspose: inputs x (C_out/group x kH x kW);
    matmul: outputs x K. None where a shape is unknown."""
    if node.op_type in CONV_LIKE:
        out = left if node.op_type == "ConvTranspose" else out
        return None if out is None or weight is None else math.prod(out) * math.prod(weight[1:])
    if out is None or not left:
        return None
    trans = any(a.name == "transA" and a.i for a in node.attribute)
    return math.prod(out) * (left[-2] if trans and len(left) > 1 else left[-1])


def _granularity(scale: list[int] | None) -> str | None:
    return None if scale is None else ("per-channel" if math.prod(scale) > 1 else "per-tensor")


def _dtype(name: str, rt: _Graph, source: _Graph) -> str:
    """What a runtime tensor holds: its inferred type, the file's for a name the runtime kept,
    else what its producer makes (int8 after a quantize, float after a dequantize...)."""
    for _ in range(16):
        known = rt.types.get(name) or (source.types.get(name) if name in source.producer else None)
        if known and known[0]:
            return DTYPES.get(known[0], "none")
        node = rt.producer.get(name)
        if node is None:
            return "fp32"
        if node.op_type in ("QuantizeLinear", "DynamicQuantizeLinear") or _is_int8_op(node.op_type):
            return "int8"
        if node.op_type == "Cast":
            return DTYPES.get(next(a.i for a in node.attribute if a.name == "to"), "none")
        if node.op_type == "DequantizeLinear" or not rt.activations(node):
            return "fp32"
        name = rt.activations(node)[0]
    return "fp32"


def _source(node: Any, source: _Graph) -> Any | None:
    """The file node a runtime node comes from: the same name, the producer of an output it
    kept, or either once onnxruntime's prefixes and suffixes are taken off."""
    if node.name in source.by_name:
        return source.by_name[node.name]
    cleaned = [_ORT_SUFFIX.sub("", _ORT_PREFIX.sub("", n)) for n in (node.name, *node.output)]
    for name in [*node.output, *cleaned, *(_ORT_MADE.sub("", n) for n in cleaned)]:
        if name in source.producer:
            return source.producer[name]
        if name in source.by_name:
            return source.by_name[name]
    return None


def _walk_to_mac(node: Any | None, source: _Graph) -> Any | None:
    """A fused conv or matmul is named after the last node it swallowed (its activation, the
    QuantizeLinear after it): back through single-activation nodes to the MAC node."""
    start = node
    for _ in range(6):
        if node is None or node.op_type in MAC_WEIGHT:
            return node
        inputs = source.activations(node)
        if len(inputs) != 1 or node.op_type not in FUSED_AFTER:
            break
        node = source.producer[inputs[0]]
    return start


def _label(op: CensusOp) -> str:
    return f"{op.op} {op.name}" + (f" ({op.module})" if op.module else "")


def _op_graph(rt: _Graph) -> OpGraph:
    """The executed nodes as ``edgekit.targets.round_trips`` walks them: initializers and
    Constant nodes' outputs are constants (no maker), int8 kernels stop a float island."""

    def role(op_type: str) -> str | None:
        if op_type in ("QuantizeLinear", "DequantizeLinear"):
            return QUANTIZE if op_type == "QuantizeLinear" else DEQUANTIZE
        return INT8 if op_type == "DynamicQuantizeLinear" or _is_int8_op(op_type) else None

    return OpGraph(
        reads=[[name for name in node.input if name] for node in rt.nodes],
        writes=[
            [out for out in node.output if out and node.op_type not in CONSTANT_OPS]
            for node in rt.nodes
        ],
        roles=[role(node.op_type) for node in rt.nodes],
        inputs=frozenset(rt.inputs),
    )


def _notes(ops: list[CensusOp], file_nodes: int, version: str, provider: str) -> list[str]:
    macs = [op for op in ops if op.kind == "mac"]
    unknown = [op.name for op in macs if not op.macs]
    cast = sum(op.weights == "fp16" and op.compute == "fp32" for op in macs)
    named = sum(op.module is not None for op in macs)
    notes = [
        f"onnxruntime {version} {provider} graph after ORT_ENABLE_ALL optimisation: {len(ops)} "
        f"nodes (the file has {file_nodes}); order and placement from one profiled run",
        "MACs from onnx shape inference on the file (batch 1), mapped to the fused nodes",
        f"module paths for {named} of {len(macs)} conv/matmul ops" if named else
        "no module paths: the file's node names and metadata do not carry them",
    ]  # fmt: skip
    if unknown:
        notes.append(f"MACs unknown (shape not inferred) for {len(unknown)} of {len(macs)} "
                     f"conv/matmul ops: {', '.join(unknown[:4])}")  # fmt: skip
    if cast:
        notes.append(f"{cast} conv/matmul ops store fp16 weights but compute in fp32: "
                     "onnxruntime's CPU EP has no fp16 kernel for them and casts back")  # fmt: skip
    return notes
