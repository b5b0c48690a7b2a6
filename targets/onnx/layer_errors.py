"""onnxruntime's own per-layer int8 error: ``qdq_loss_debug`` on the model the onnx target
quantizes, ``xmodel_err`` (float model vs QDQ model, cumulative) at each layer's last tensor.
``qdq_err`` is not used: ORT drops a Conv's Relu and renames the Conv output after it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgekit.common.quiet import quiet_python
from edgekit.targets.base import ExportRequest, LayerErrors
from edgekit.targets.layermap import layer_errors_of
from edgekit.targets.onnx.convert import INPUT_NAME, QUIET, export_fp32
from edgekit.targets.onnx.names import node_modules
from edgekit.targets.onnx.quantize import quantize_static_qdq

if TYPE_CHECKING:
    from edgekit.sources.source import SourceModel

TOOL = "onnxruntime qdq_loss_debug xmodel_err"


def layer_errors(source: SourceModel, x: np.ndarray, names: list[str], work: Path) -> LayerErrors:
    import onnx
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    fp32, quantized = work / "fp32.onnx", work / "int8.onnx"
    request = ExportRequest(source, "int8", quantized, calibration=x)
    with quiet_python(**QUIET):
        export_fp32(source, fp32)
        quantize_static_qdq(fp32, quantized, request, work, warn=[], input_name=INPUT_NAME)
        # quantize_static_qdq leaves the pre-processed float model it quantized as pre.onnx
        pre = work / "pre.onnx" if (work / "pre.onnx").exists() else fp32
        modify_model_output_intermediate_tensors(str(pre), str(work / "f_aug.onnx"))
        modify_model_output_intermediate_tensors(str(quantized), str(work / "q_aug.onnx"))
        # collect_activations iterates its reader; a list of feeds is one
        feeds = [{INPUT_NAME: sample[None]} for sample in x]
        floats = collect_activations(str(work / "f_aug.onnx"), iter(feeds))
        ints = collect_activations(str(work / "q_aug.onnx"), iter(feeds))
        errors = compute_activation_error(create_activation_matching(ints, floats))
    nodes = list(onnx.load(str(pre), load_external_data=False).graph.node)
    modules = node_modules(nodes)  # the census's mapping: a folded Relu is its conv's
    producer = {output: modules[id(node)] or None for node in nodes for output in node.output}
    figures = [  # graph order
        (producer.get(tensor), float(error["xmodel_err"]))
        for tensor, error in errors.items()
        if "xmodel_err" in error
    ]
    known = [modules[id(node)] or None for node in nodes]
    return layer_errors_of(figures, names, known, target="onnx", tool=TOOL)
