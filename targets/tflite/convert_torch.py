"""torch source -> .tflite through litert-torch (and ai-edge-quantizer for three recipes).

- The module is first wrapped with ``litert_torch.to_channel_last_io(module, args=[0])`` so that
  the artifact takes NHWC input: without it the graph starts with an NCHW->NHWC TRANSPOSE (a
  RESHAPE when C == 1). The input TensorSpec says which layout the file really has.
- ``int8``: litert-torch's ``PT2EQuantizer`` with per-channel symmetric weights, calibrated by
  ``edgekit.quantize.pt2e.quantize_pt2e`` (``fold=False``), converted with
  ``QuantConfig(pt2e_quantizer=...)``. litert-torch always gives such a model **int8** input and
  output and has no option to keep them float, so for the default float I/O the flatbuffer is
  rewritten (``add_float_io``). ai-edge-quantizer's
  ``static_wi8_ai8`` on the fp32 .tflite was tried instead: int8 I/O too, and 7 dB less output
  SQNR on digits-mobilenet (18 vs 26 dB).
- ``int8`` with ``keep_float``: litert-torch's converter re-quantizes an op the PT2E graph left
  float (and its module-name filter never matches in torch 2.13), so the fp32 .tflite goes
  through ai-edge-quantizer ``static_wi8_ai8`` with one ``NO_QUANTIZE`` entry per kept module
  (``keep_float``).
- ``int8-dynamic``: ai-edge-quantizer ``recipe.dynamic_wi8_afp32()`` on the fp32 file. XNNPACK
  runs the dynamically quantized CONV_2D/FULLY_CONNECTED, but not DEPTHWISE_CONV_2D with int8
  weights: those stay on the builtin hybrid kernels (coverage lists them as fallback).
- ``fp16``: ai-edge-quantizer's weight-only recipe with the ``FLOAT_CASTING`` algorithm and 16
  bits (0.10.0 has no ready-made fp16 recipe): fp16 weights behind DEQUANTIZE ops, which XNNPACK
  folds into fp32 weights at load time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UnsupportedExport, first_line
from edgekit.targets.base import ExportRequest
from edgekit.targets.tflite.converted import Converted, no_progress_bars, version
from edgekit.targets.tflite.flatbuffer import add_float_io


def aeq_quantize(float_model: Path, destination: Path, recipe: str) -> str:
    """Apply an ai-edge-quantizer recipe to a float .tflite; returns the recipe's name."""
    from ai_edge_quantizer import qtyping, recipe_manager
    from ai_edge_quantizer import quantizer as aeq
    from ai_edge_quantizer import recipe as recipes
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    if recipe == "int8-dynamic":
        name, quant_recipe = "dynamic_wi8_afp32", recipes.dynamic_wi8_afp32()
    else:  # fp16: weight-only float casting, 0.10.0 ships no ready-made recipe for it
        manager = recipe_manager.RecipeManager()
        manager.add_weight_only_config(
            regex=".*",
            operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
            num_bits=16,
            algorithm_key=AlgorithmName.FLOAT_CASTING,
        )
        name, quant_recipe = "weight_only float_casting 16-bit", manager.get_quantization_recipe()
    quantizer = aeq.Quantizer(str(float_model))
    quantizer.load_quantization_recipe(quant_recipe)
    with no_progress_bars():
        result = quantizer.quantize(enable_progress_bar=False, enable_progress_report=False)
    destination.write_bytes(bytes(result.quantized_model))
    return f"ai-edge-quantizer {version('ai-edge-quantizer')} {name}"


def export_float(module: Any, example: np.ndarray, destination: Path) -> None:
    import litert_torch
    import torch

    with torch.no_grad():
        litert_torch.convert(module, (torch.from_numpy(example),)).export(str(destination))


class TorchConverter:
    """torch source -> .tflite through litert-torch."""

    def __init__(self, request: ExportRequest, scratch: Path):
        self.request = request
        self.scratch = scratch

    def run(self) -> Converted:
        try:
            return self._convert(channel_last=True)
        except UnsupportedExport:
            raise
        except Exception as exc:  # the wrapper is an optimisation: retry without it
            converted = self._convert(channel_last=False)
            converted.warnings.append(
                f"to_channel_last_io failed ({first_line(exc)}); the input stays NCHW and the "
                "graph starts with a layout transpose"
            )
            return converted

    def _convert(self, *, channel_last: bool) -> Converted:
        import litert_torch

        request = self.request
        module = request.source.module.eval()

        def to_layout(batch: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(batch.transpose(0, 2, 3, 1) if channel_last else batch)

        if channel_last:
            module = litert_torch.to_channel_last_io(module, args=[0]).eval()
        example = to_layout(request.source.example_input())
        layout = "NHWC" if channel_last else "NCHW"
        details: dict[str, Any] = {
            "converter": f"litert-torch {version('litert-torch')}",
            "channel_last_io": channel_last,
            "io_dtype": request.io_dtype,
            "quantizer": None,
        }
        float_file = self.scratch / "fp32.tflite"
        if request.recipe == "int8" and request.keep_float:
            from edgekit.targets.tflite.keep_float import int8_keep_float

            export_float(module, example, float_file)
            return int8_keep_float(request, float_file, to_layout, layout, details, self.scratch)
        if request.recipe == "int8":
            return self._int8(module, example, to_layout, layout, details)
        export_float(module, example, float_file)
        result = float_file
        if request.recipe in ("int8-dynamic", "fp16"):
            result = self.scratch / "quantized.tflite"
            details["quantizer"] = aeq_quantize(float_file, result, request.recipe)
        return Converted(result, layout, details)

    def _int8(
        self, module: Any, example: np.ndarray, to_layout: Any, layout: str, details: dict
    ) -> Converted:
        import litert_torch
        import torch
        from litert_torch.quantize.pt2e_quantizer import (
            PT2EQuantizer,
            get_symmetric_quantization_config,
        )
        from litert_torch.quantize.quant_config import QuantConfig

        from edgekit.quantize.pt2e import quantize_pt2e

        request = self.request
        quantizer = PT2EQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)
        )
        converted = quantize_pt2e(
            module, example, quantizer, to_layout(request.calibration), fold=False
        )
        # the graph was traced from the eval-mode module; the flag is stale and only makes
        # litert-torch warn "converted in training mode"
        for submodule in converted.modules():
            submodule.training = False
        edge = litert_torch.convert(
            converted,
            (torch.from_numpy(example),),
            quant_config=QuantConfig(pt2e_quantizer=quantizer),
        )
        integer_file = self.scratch / "int8_io.tflite"
        edge.export(str(integer_file))
        details["quantizer"] = (
            "litert-torch PT2EQuantizer (per-channel symmetric int8 weights, per-tensor "
            f"int8 activations, {len(request.calibration)} calibration samples)"
        )
        if request.io_dtype == "int8":
            details["float_io"] = "none: int8 input and output"
            return Converted(integer_file, layout, details)
        float_file = self.scratch / "fp32.tflite"
        add_float_io(integer_file, float_file)
        details["float_io"] = "QUANTIZE/DEQUANTIZE ops added at the boundary"
        return Converted(float_file, layout, details)
