"""What of a .pte runs on the fast path, read from the file itself: the instruction list of the
execution plan, and the XNNPACK subgraph stored in the delegate payload (decoded with the
``flatc`` that executorch ships). Anything outside the delegate runs on ExecuTorch's portable
kernels, which are about 100x slower."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from edgekit.common.fileio import temporary_directory
from edgekit.targets.base import Coverage
from edgekit.targets.manifest import Manifest

XNNPACK_BACKEND = "XnnpackBackend"

# XNNPACK subgraph node types that do arithmetic (the int8 denominator), by their schema name
XNN_COMPUTE_NODES = {
    "XNNConv2d",
    "XNNDepthwiseConv2d",
    "XNNConvTranspose2d",
    "XNNFullyConnected",
    "XNNBatchMatrixMultiply",
    "XNNAdd",
    "XNNSubtract",
    "XNNMultiply",
}
# XNNPACK value types of an int8 activation: static (qint8/quint8) or dynamic (qdint8/qpint8)
XNN_INT8_ACTIVATIONS = {
    "xnn_datatype_qint8",
    "xnn_datatype_quint8",
    "xnn_datatype_qdint8",
    "xnn_datatype_qpint8",
}
# portable/optimized kernels (outside any delegate) that do arithmetic, by operator name
PORTABLE_COMPUTE_OPS = {
    "aten::convolution",
    "aten::linear",
    "aten::addmm",
    "aten::mm",
    "aten::bmm",
    "aten::add",
    "aten::sub",
    "aten::mul",
}


def coverage(path: Path, manifest: Manifest) -> Coverage:
    from executorch.exir._serialize._program import deserialize_pte_binary

    from edgekit.targets.executorch.convert import quiet_library_noise

    quiet_library_noise()
    from executorch.exir.schema import DelegateCall, KernelCall

    program = deserialize_pte_binary(path.read_bytes()).program
    plan = program.execution_plan[0]
    kernels: list[str] = []
    delegate_indices: list[int] = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if isinstance(args, KernelCall):
                operator = plan.operators[args.op_index]
                kernels.append(operator.name)
            elif isinstance(args, DelegateCall):
                delegate_indices.append(args.delegate_index)

    fast_ops = delegate_ops = delegate_transposes = 0
    int8_ops = compute_ops = 0
    inside: Counter = Counter()
    sources: list[str] = []
    for index in delegate_indices:
        delegate = plan.delegates[index]
        graph = None
        if delegate.id == XNNPACK_BACKEND:
            graph = xnnpack_graph(delegate_payload(program, delegate))
        if graph is None:
            # unreadable payload: count the call as one op; the export-time count is in details
            fast_ops += 1
            sources.append(f"{delegate.id} payload not decoded")
            continue
        node_types, int8_compute, compute = _xnnpack_graph_stats(graph)
        inside.update(node_types)
        fast_ops += sum(node_types.values())
        delegate_ops += sum(node_types.values())
        delegate_transposes += node_types.get("XNNStaticTranspose", 0)
        int8_ops += int8_compute
        compute_ops += compute
        sources.append(f"{delegate.id} subgraph decoded from the file")

    compute_ops += sum(1 for name in kernels if name in PORTABLE_COMPUTE_OPS)
    transposes = sum(1 for name in kernels if name == "aten::permute_copy")
    recipe = manifest.recipe
    quantized = recipe.startswith("int8") or int8_ops > 0
    fallback = sorted(set(kernels))
    summary = _coverage_summary(
        len(delegate_indices), delegate_ops, inside, kernels, delegate_transposes, sources
    )
    summary += _details_note(manifest, quantized)
    return Coverage(
        total_ops=fast_ops + len(kernels),
        fast_ops=fast_ops,
        fallback_ops=fallback,
        transposes=transposes,
        int8_ops=int8_ops if quantized else None,
        compute_ops=compute_ops if quantized else None,
        summary=summary,
    )


def delegate_payload(program: Any, delegate: Any) -> bytes | None:
    from executorch.exir.schema import DataLocation

    reference = delegate.processed
    if reference.location == DataLocation.INLINE:
        return bytes(program.backend_delegate_data[reference.index].data)
    return None  # deserialize_pte_binary moves segments inline; anything else is unexpected


def xnnpack_graph(payload: bytes | None) -> dict[str, Any] | None:
    """The XNNPACK subgraph (XNNGraph flatbuffer) of a delegate payload, as JSON via flatc."""
    if not payload:
        return None
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader
    from executorch.exir._serialize._flatbuffer import _get_flatc_path

    flatbuffer = payload
    if payload[4:8] == XNNHeader.EXPECTED_MAGIC:  # header + flatbuffer + constant data
        header = XNNHeader.from_bytes(payload[: XNNHeader.EXPECTED_LENGTH])
        start = header.flatbuffer_offset
        flatbuffer = payload[start : start + header.flatbuffer_size]
    schema = (
        resources.files("executorch.backends.xnnpack.serialization")
        .joinpath("schema.fbs")
        .read_bytes()
    )
    with temporary_directory("edgekit-xnngraph-") as folder:
        tmp = str(folder)
        (folder / "schema.fbs").write_bytes(schema)
        (folder / "graph.bin").write_bytes(flatbuffer)
        command = [_get_flatc_path(), "--json", "--strict-json", "--defaults-json"]
        command += ["--raw-binary", "-o", tmp, str(folder / "schema.fbs"), "--"]
        command.append(str(folder / "graph.bin"))
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=60)
            return json.loads(_strict((folder / "graph.json").read_text()))
        except (OSError, subprocess.SubprocessError, ValueError):
            return None


def _strict(text: str) -> str:
    """flatc writes a fused ReLU's unbounded clamp as a bare ``inf`` (and ``nan``), which
    strict JSON lacks: spell them as Python's json reads them."""
    text = re.sub(r"(?<=[:\[,\s])(-?)inf\b", r"\1Infinity", text)
    return re.sub(r"(?<=[:\[,\s])-?nan\b", "NaN", text)


def _xnnpack_graph_stats(graph: dict[str, Any]) -> tuple[Counter, int, int]:
    """Node types, int8 compute nodes and compute nodes of a decoded XNNGraph."""
    datatypes = {}
    for value in graph.get("xvalues", []):
        tensor = value["xvalue_union"]
        tensor = tensor.get("tensor_value", tensor)  # quantized values wrap the tensor value
        datatypes[tensor["id_out"]] = tensor["datatype"]
    node_types: Counter = Counter()
    compute = int8_compute = 0
    for node in graph.get("xnodes", []):
        kind = node["xnode_union_type"]
        node_types[kind] += 1
        if kind in XNN_COMPUTE_NODES:
            compute += 1
            fields = node["xnode_union"]
            activation = fields.get("input1_id", fields.get("input_id"))
            int8_compute += datatypes.get(activation) in XNN_INT8_ACTIVATIONS
    return node_types, int8_compute, compute


def _coverage_summary(
    delegate_calls: int,
    delegate_ops: int,
    inside: Counter,
    kernels: list[str],
    delegate_transposes: int,
    sources: list[str],
) -> str:
    inside_text = ", ".join(f"{k.removeprefix('XNN')} {v}" for k, v in inside.most_common())
    kernel_text = ", ".join(f"{k} x{v}" for k, v in Counter(kernels).most_common())
    parts = [
        f"{delegate_calls} delegate call(s) holding {delegate_ops} XNNPACK node(s)"
        + (f" ({inside_text})" if inside_text else ""),
        f"{len(kernels)} portable kernel call(s) outside the delegate"
        + (f": {kernel_text}" if kernel_text else ""),
    ]
    if delegate_transposes:
        parts.append(
            f"{delegate_transposes} NCHW/NHWC transpose(s) inside XNNPACK (its layout boundary)"
        )
    parts.append("read from the .pte: " + ("; ".join(sorted(set(sources))) or "no delegates"))
    return "; ".join(parts)


def _details_note(manifest: Manifest, quantized: bool) -> str:
    """Export-time counts from the manifest (the file does not keep the torch graph)."""
    details = manifest.details
    if "delegated_nodes" not in details:
        return ""
    note = f"; export-time (manifest details): {details['delegated_nodes']} edge nodes delegated"
    if quantized and "conv_linear_nodes" in details:
        note += (
            f", {details['quantized_conv_linear_nodes']}/{details['conv_linear_nodes']} "
            "conv/linear with int8 weights"
        )
    return note
