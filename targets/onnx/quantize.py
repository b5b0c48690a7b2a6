"""onnxruntime's quantization and float16 conversion of the exported fp32 graph (measured on x86,
ORT 1.32, see shared/probe/perf):

- ``int8``: ``quant_pre_process`` + ``quantize_static`` (QDQ, per-channel, MinMax). Activations
  are **uint8** and weights int8 (U8S8): on x86 S8S8 is 1.7x slower in QDQ form and 10x slower in
  QOperator form. ORT fuses DQ->Conv->Q into QLinearConv on the CPU EP.
- ``int8-dynamic``: ``quantize_dynamic`` restricted to ``DYNAMIC_OP_TYPES`` (MatMul/Gemm):
  ORT's dynamic int8 convolutions (ConvInteger) take a slow path on x86 (several times
  slower than fp32 in shared/probe/perf on one machine; measure yours with edgekit bench).
- ``fp16``: ``convert_float_to_float16(keep_io_types=True)``, so the I/O stays float32. The CPU
  EP has no fp16 convolutions on x86: it casts back to float32.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UnsupportedExport, UserInputError
from edgekit.targets.base import ExportRequest
from edgekit.targets.layermap import ops_from, unmapped_reason
from edgekit.targets.onnx.biases import own_biases
from edgekit.targets.onnx.convert import one_line
from edgekit.targets.onnx.int8_options import static_options
from edgekit.targets.onnx.names import node_modules, restore_scopes

# Op types int8-dynamic quantizes. None quantizes every type ORT can (convolutions included),
# which makes ConvInteger nodes that run off the fast path on x86; set it to None only to
# study that trade-off (coverage then lists ConvInteger under fallback_ops).
DYNAMIC_OP_TYPES: tuple[str, ...] | None = ("MatMul", "Gemm")
DYNAMIC_WARNING = (
    "int8-dynamic on onnx quantizes MatMul/Gemm only; dynamic int8 convolutions (ConvInteger) "
    "take a slow path in onnxruntime on x86, slower than its fp32 convolutions"
)
DYNAMIC_CONV_WARNING = (
    "int8-dynamic on onnx quantizes convolutions (DYNAMIC_OP_TYPES includes Conv or is None): "
    "dynamic int8 convolutions (ConvInteger) take a slow path in onnxruntime on x86, slower than "
    "its fp32 convolutions (edgekit bench shows by how much on this machine)"
)
FP16_WARNING = (
    "fp16 on onnx halves the file, but onnxruntime's CPU EP has no fp16 convolutions on x86: it "
    "casts them back to float32 (fp16 pays off on GPU execution providers)"
)


def pre_process(fp32: Path, work: Path, warn: list[str]) -> tuple[Path, bool]:
    """ORT's recommended shape inference + optimization before quantization (optional)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = work / "pre.onnx"
    try:
        quant_pre_process(str(fp32), str(pre))
    except Exception as error:
        warn.append(f"quant_pre_process failed, quantized the exported model: {one_line(error)}")
        return fp32, False
    restore_scopes(fp32, pre)  # so that keep_float and the artifact still name modules
    return pre, True


def excluded_nodes(model_path: Path, keep_float: tuple[str, ...]) -> list[str]:
    """ONNX node names that come from the torch modules in ``keep_float``
    (``node_modules``); a path no node comes from is refused
    with the reason."""
    if not keep_float:
        return []
    import onnx

    nodes = list(onnx.load(str(model_path), load_external_data=False).graph.node)
    found = node_modules(nodes)
    modules = [found[id(node)] or None for node in nodes]
    excluded: list[str] = []
    for keep in keep_float:
        chosen = ops_from(keep, modules)
        if not chosen:
            raise UserInputError(
                f"onnx: cannot keep {keep} float: {unmapped_reason(keep, modules, 'onnx')}"
            )
        excluded += [nodes[i].name for i in chosen if nodes[i].name not in excluded]
    return excluded


class CalibrationReader:
    """Feeds calibration samples one at a time (batch-1 model); ORT's CalibrationDataReader is
    duck-typed (``__subclasshook__`` on ``get_next``)."""

    def __init__(self, data: np.ndarray, input_name: str, layout: str = "NCHW") -> None:
        data = data.transpose(0, 2, 3, 1) if layout == "NHWC" else data  # calibration is NCHW
        self.data = np.ascontiguousarray(data, dtype=np.float32)
        self.input_name = input_name
        self.index = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.index >= len(self.data):
            return None
        sample = self.data[self.index : self.index + 1]
        self.index += 1
        return {self.input_name: sample}

    def rewind(self) -> None:
        self.index = 0


def quantize_static_qdq(
    fp32: Path,
    out: Path,
    request: ExportRequest,
    work: Path,
    *,
    warn: list[str],
    input_name: str,
    layout: str = "NCHW",
) -> dict[str, Any]:
    from onnxruntime.quantization import quantize_static

    if request.calibration is None or len(request.calibration) == 0:
        raise UserInputError("onnx int8: static quantization needs calibration data")
    pre, pre_processed = pre_process(fp32, work, warn)
    excluded = excluded_nodes(pre, request.keep_float)
    quantize_static(
        str(own_biases(pre, work)),
        str(out),
        CalibrationReader(request.calibration, input_name, layout),
        nodes_to_exclude=excluded,
        **static_options(),
    )
    return {
        "quantizer": "onnxruntime.quantization.quantize_static",
        "quant_format": "QDQ",
        "activation_type": "uint8 (QUInt8, asymmetric)",
        "weight_type": "int8 (QInt8, symmetric, per-channel, 7-bit range: reduce_range)",
        "calibrate_method": "MinMax",
        "calibration_samples": len(request.calibration),
        "pre_process": pre_processed,
        "nodes_excluded": excluded,
    }


def quantize_dynamic(
    fp32: Path, out: Path, request: ExportRequest, work: Path, warn: list[str]
) -> dict[str, Any]:
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

    pre, pre_processed = pre_process(fp32, work, warn)
    excluded = excluded_nodes(pre, request.keep_float)
    op_types = list(DYNAMIC_OP_TYPES) if DYNAMIC_OP_TYPES is not None else None
    ort_quantize_dynamic(
        str(pre),
        str(out),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=op_types,
        nodes_to_exclude=excluded,
    )
    # either way the user is told about convolutions: left in fp32, or quantized into slow kernels
    warn.append(DYNAMIC_WARNING if op_types and "Conv" not in op_types else DYNAMIC_CONV_WARNING)
    return {
        "quantizer": "onnxruntime.quantization.quantize_dynamic",
        "weight_type": "int8 (QInt8, per-tensor)",
        "activation_type": "uint8, quantized at run time",
        "op_types_to_quantize": op_types or "all",
        "pre_process": pre_processed,
        "nodes_excluded": excluded,
    }


def convert_fp16(fp32: Path, out: Path, request: ExportRequest) -> dict[str, Any]:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    excluded = excluded_nodes(fp32, request.keep_float)
    model = convert_float_to_float16(
        onnx.load(str(fp32)), keep_io_types=True, node_block_list=excluded or None
    )
    sort_topologically(model.graph)  # the converter appends the I/O casts at the end
    onnx.save(model, str(out))
    return {
        "converter": "onnxruntime.transformers.float16.convert_float_to_float16",
        "keep_io_types": True,
        "nodes_excluded": excluded,
    }


def sort_topologically(graph: Any) -> None:
    """Reorder ``graph.node`` so every node comes after the producers of its inputs."""
    available = {value.name for value in graph.input} | {init.name for init in graph.initializer}
    available.add("")  # an omitted optional input
    pending, ordered = list(graph.node), []
    while pending:
        ready = [node for node in pending if all(name in available for name in node.input)]
        if not ready:
            raise UnsupportedExport(
                "onnx fp16: the converted graph has a cycle or a dangling input"
            )
        for node in ready:
            ordered.append(node)
            available.update(node.output)
        done = {id(node) for node in ready}
        pending = [node for node in pending if id(node) not in done]
    copies = [type(node)() for node in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)
