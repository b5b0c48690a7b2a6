"""One block to .onnx and back, for ``edgekit culprit``: torch.onnx's dynamo exporter and
onnxruntime's own quantizer, step by step, each announced to ``stage`` so a failure is placed.
The int8 graph is quantized as export quantizes it: ORT's ``quant_pre_process`` first, then each
node given its own bias (``edgekit.targets.onnx.biases``), then ``quantize_static`` with the
recipe's settings (``edgekit.targets.onnx.int8_options``): a repro folder carries the source of
both imports and this file's as they are."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from edgekit.targets.onnx.biases import own_biases
from edgekit.targets.onnx.int8_options import static_options


def convert_block(
    module: torch.nn.Module,
    example: np.ndarray,
    recipe: str,
    calibration: np.ndarray | None,
    folder: Path,
    stage: Callable[[str], None],
) -> Callable[[np.ndarray], np.ndarray]:
    """Export ``module`` to ONNX (fp32, or int8 QDQ by onnxruntime's static quantizer with
    ``calibration``), open it in onnxruntime, and return a function that runs one input."""
    import onnxruntime

    sample = (torch.from_numpy(example),)
    path = folder / "block.onnx"
    with torch.no_grad():
        stage("export")
        program = torch.export.export(module, sample)
        stage("convert")
        torch.onnx.export(
            program, sample, str(path), dynamo=True, input_names=["x"], external_data=False
        )
    if recipe == "int8":
        from onnxruntime.quantization import (
            CalibrationDataReader,
            quantize_static,
        )

        class Samples(CalibrationDataReader):
            def __init__(self) -> None:
                self.left = iter(calibration)

            def get_next(self) -> dict | None:
                one = next(self.left, None)
                return None if one is None else {"x": one}

        from onnxruntime.quantization.shape_inference import quant_pre_process

        stage("quantize")
        pre = folder / "block.pre.onnx"
        try:
            quant_pre_process(str(path), str(pre))
        except Exception:  # as export does: the exported graph, quantized as it is
            pre = path
        quantized = folder / "block.int8.onnx"
        quantize_static(
            str(own_biases(pre, folder)),
            str(quantized),
            Samples(),
            **static_options(),
        )
        path = quantized
    stage("load")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(x: np.ndarray) -> np.ndarray:
        stage("run")
        return np.asarray(session.run(None, {name: x})[0], dtype=np.float32)

    return run
