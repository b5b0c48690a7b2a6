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
            CalibrationMethod,
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
            # targets/onnx/quantize.static_options, written out: repro.py copies this file and
            # needs no edgekit (tests/test_target_onnx.py keeps the two equal)
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            calibrate_method=CalibrationMethod.MinMax,
            reduce_range=True,
        )
        path = quantized
    stage("load")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(x: np.ndarray) -> np.ndarray:
        stage("run")
        return np.asarray(session.run(None, {name: x})[0], dtype=np.float32)

    return run
