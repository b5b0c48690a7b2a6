"""LiteRT's own per-layer int8 error: ai-edge-quantizer ``static_wi8_ai8`` on the fp32 .tflite,
``validate()`` per tensor (its SNR is a linear ratio; converted to dB), mapped back to torch
module paths through the census of the fp32 file: each tensor is an op's output, the op's
module path is the census's (``edgekit.targets.layermap``), and a layer's figure is its last
tensor's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgekit.common.quiet import quiet_native, quiet_python
from edgekit.targets.base import ExportRequest, LayerErrors
from edgekit.targets.layermap import layer_errors_of
from edgekit.targets.tflite.census import census
from edgekit.targets.tflite.converted import no_progress_bars
from edgekit.targets.tflite.keep_float import signature_input

if TYPE_CHECKING:
    from edgekit.sources.source import SourceModel

TOOL = "ai-edge-quantizer validate() SNR (static_wi8_ai8)"


def layer_errors(source: SourceModel, x: np.ndarray, names: list[str], work: Path) -> LayerErrors:
    from ai_edge_quantizer import quantizer as aeq
    from ai_edge_quantizer import recipe as recipes
    from ai_edge_quantizer.utils.validation_utils import ValidationErrorMetric

    from edgekit.targets import get_target

    fp32 = work / "fp32.tflite"
    info = get_target("tflite").export(ExportRequest(source, "fp32", fp32))
    nhwc = info.input.layout == "NHWC"
    feed_x = np.ascontiguousarray(x.transpose(0, 2, 3, 1) if nhwc else x)
    signature, input_name = signature_input(fp32)
    feed = {signature: [{input_name: sample[None]} for sample in feed_x]}
    quiet = quiet_python(env={"LITERT_TORCH_SHOW_PROGRESS": "n"}, stdout=True)
    with quiet, quiet_native(), no_progress_bars():
        quantizer = aeq.Quantizer(str(fp32))
        quantizer.load_quantization_recipe(recipes.static_wi8_ai8())
        quantizer.quantize(quantizer.calibrate(feed), enable_progress_report=False)
        result = quantizer.validate(test_data=feed, error_metrics=[ValidationErrorMetric.SNR])
    comparison = result.get_signature_comparison_result(signature)
    ops = census(fp32).ops
    tensors = {**comparison.intermediate_tensors, **comparison.output_tensors}
    snrs = [(op.module, tensors.get(op.name, {}).get("snr")) for op in ops]  # execution order
    figures = [
        (module, 10.0 * math.log10(snr) if math.isfinite(snr) else snr)
        for module, snr in snrs
        if snr is not None and snr > 0
    ]
    modules = [op.module for op in ops]
    return layer_errors_of(figures, names, modules, target="tflite", tool=TOOL)
