"""One block to .onnx and back, for ``edgekit culprit``: torch.onnx's dynamo exporter and
onnxruntime's own quantizer, step by step, each announced to ``stage`` so a failure is placed.
Imports nothing of edgekit: a repro folder carries this file's source as it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch


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
            QuantFormat,
            QuantType,
            quantize_static,
        )

        class Samples(CalibrationDataReader):
            def __init__(self) -> None:
                self.left = iter(calibration)

            def get_next(self) -> dict | None:
                one = next(self.left, None)
                return None if one is None else {"x": one}

        stage("quantize")
        quantized = folder / "block.int8.onnx"
        quantize_static(
            str(path),
            str(quantized),
            Samples(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
        )
        path = quantized
    stage("load")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(x: np.ndarray) -> np.ndarray:
        stage("run")
        return np.asarray(session.run(None, {name: x})[0], dtype=np.float32)

    return run
