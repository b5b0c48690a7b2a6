"""Which torch module an ONNX node comes from, read from the file: the dynamo exporter's
``name_scopes`` metadata, the legacy exporter's node names (``/b2/dw/dw.0/Conv``) and, for a conv
or matmul, the state-dict name of its weight (``b2.dw.0.weight``). The census, ``keep_float``'s
node exclusion and the per-layer error all read ``node_modules``.

Why the weight decides for a conv or matmul: onnxscript folds a BatchNorm into the conv before
it and the fused node keeps the BatchNorm's scopes (``b1.bn1``), and a module that uses another
module's weights in its own forward (``nn.MultiheadAttention`` and ``out_proj``) scopes the node
to itself. The scope still decides where the weight's module lies outside it: the exporter
shares identical initializers between modules (two LayerNorms made the same way)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgekit.targets.census import clean_module_path

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
REWRITE_RULE = "pkg.onnxscript.rewriter.rule_name"  # set on a node an onnxscript rule made
MAC_WEIGHT = {
    "Conv": 1,
    "ConvTranspose": 1,
    "Gemm": 1,
    "MatMul": 1,
    "ConvInteger": 1,
    "MatMulInteger": 1,
    "QLinearConv": 3,
    "QGemm": 3,
    "QLinearMatMul": 3,
}
# activations every quantizer and onnxruntime fold into the conv or matmul before them
FOLDED_ACTIVATIONS = {"Relu", "Clip"}
# what a weight is read through on its way to a conv or matmul
WEIGHT_PATH = {"DequantizeLinear", "Transpose", "Cast", "Identity", "Reshape"}
# a state-dict key in a weight's name (b1.dw.0.weight, FusedBack_..., ..._quantized)
STATE_KEY = re.compile(r"^(?:FusedBack_)?([A-Za-z_]\w*(?:\.\w+)*)\.weight(?:_|$)")
# onnxruntime's names for what it made of a node: fusions and layout copies of it
_ORT_SUFFIX = re.compile(r"(_nchwc|_token_\d+|/\w+Fusion)+$")
_ORT_PREFIX = re.compile(r"^(InsertedPrecisionFreeCast_)+")


def scope_path(node: Any) -> str:
    """The torch module a node's ops ran in: the deepest module of its dynamo name scopes
    (``['', 'b1', 'b1.se', 'b1.se.fc1', 'linear']``: modules outermost first, then the fx
    node), else the legacy exporter's scope in its name; "" where neither says."""
    for prop in node.metadata_props:
        if prop.key == NAME_SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                break
            modules = [clean_module_path(str(s)) for s in scopes[:-1]] if scopes else []
            return next((module for module in reversed(modules) if module), "")
    return legacy_scope(node.name)


def legacy_scope(name: str) -> str:
    """torch.onnx's legacy exporter names nodes by scope, one attribute per level and a
    container's item after its container: /layer1/layer1.0/conv1/Conv, /b1/dw/dw.0/Conv."""
    if not name.startswith("/"):
        return ""
    path, last = "", ""
    for part in name.split("/")[1:-1]:
        if last and part.startswith(last + "."):  # dw.0 inside dw: item 0 of the container
            path, last = path + part[len(last) :], part
        else:
            path, last = f"{path}.{part}" if path else part, part
    return path


def weight_owner(name: str) -> str | None:
    """The module whose state-dict weight ``name`` is (``b1.dw.0.weight_quantized``)."""
    match = STATE_KEY.match(name)
    return match.group(1) if match else None


def mac_module(node: Any, weight: str | None) -> str:
    """A conv or matmul's module: its weight's owner, unless that lies outside the node's
    scope on a node no rewrite made (an initializer the exporter shared between modules)."""
    scope = scope_path(node)
    owner = weight_owner(weight) if weight else None
    if owner is None:
        return scope
    rewritten = any(prop.key == REWRITE_RULE for prop in node.metadata_props)
    if not scope or rewritten or owner == scope or owner.startswith(scope + "."):
        return owner
    return scope


def node_modules(nodes: Sequence[Any]) -> dict[int, str]:
    """id(node) -> module path for every node of a graph ("" where the file says nothing).
    A Relu or Clip that reads only a conv or matmul's output and runs in an enclosing module
    (``F.relu`` in a block's forward) belongs to the conv: it is fused into it."""
    producer = {out: node for node in nodes for out in node.output if out}
    readers: dict[str, int] = {}
    for node in nodes:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    found = {}
    for node in nodes:
        if node.op_type in MAC_WEIGHT and len(node.input) > MAC_WEIGHT[node.op_type]:
            found[id(node)] = mac_module(node, weight_root(node, producer))
        else:
            found[id(node)] = scope_path(node)
    for node in nodes:
        source = producer.get(node.input[0]) if node.input else None
        if node.op_type not in FOLDED_ACTIVATIONS or source is None:
            continue
        mine, mac = found[id(node)], found[id(source)]
        enclosing = not mine or mac.startswith(mine + ".")
        if source.op_type in MAC_WEIGHT and readers.get(node.input[0]) == 1 and enclosing:
            found[id(node)] = mac
    return found


def weight_root(node: Any, producer: dict[str, Any]) -> str:
    """The name a conv or matmul's weight is stored under, back through its dequantize."""
    name = node.input[MAC_WEIGHT[node.op_type]]
    for _ in range(4):
        source = producer.get(name)
        if source is None or source.op_type not in WEIGHT_PATH or not source.input:
            break
        name = source.input[0]
    return name


def ort_origin_names(name: str) -> list[str]:
    """The names a node onnxruntime rewrote may have had in the file (``node_MatMul_6``
    for ``node_MatMul_6/MatMulAddFusion``)."""
    cleaned = _ORT_SUFFIX.sub("", _ORT_PREFIX.sub("", name))
    return [cleaned] if cleaned != name else []


def restore_scopes(source: Path, rewritten: Path) -> int:
    """Copy each node's torch metadata from ``source`` onto the nodes of ``rewritten`` that
    lost it (onnxruntime's optimiser, which quant_pre_process runs, may drop every node's
    metadata), by node name; returns how many nodes got it back."""
    import onnx

    original = onnx.load(str(source), load_external_data=False)
    by_name = {node.name: node for node in original.graph.node if node.name}
    model = onnx.load(str(rewritten), load_external_data=False)
    restored = 0
    for node in model.graph.node:
        if any(prop.key == NAME_SCOPES for prop in node.metadata_props):
            continue
        origin = next(
            (by_name[n] for n in [node.name, *ort_origin_names(node.name)] if n in by_name), None
        )
        if origin is not None and origin.metadata_props:
            node.metadata_props.extend(origin.metadata_props)
            restored += 1
    if restored:
        onnx.save(model, str(rewritten))
    return restored
