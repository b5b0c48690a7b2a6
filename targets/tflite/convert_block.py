"""One block to .tflite and back, for ``edgekit culprit``: litert-torch's own calls, step by
step, each announced to ``stage`` so a failure is placed. Of edgekit it imports only the
quantizer rules export applies (``edgekit.quantize.pt2e``): a repro folder carries their source
and this file's as they are."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from edgekit.quantize.pt2e import with_runtime_rules


def convert_block(
    module: torch.nn.Module,
    example: np.ndarray,
    recipe: str,
    calibration: np.ndarray | None,
    folder: Path,
    stage: Callable[[str], None],
) -> Callable[[np.ndarray], np.ndarray]:
    """Export ``module`` (fp32, or int8 through PT2E with ``calibration``), load the file in
    LiteRT, and return a function that runs one input through it."""
    import litert_torch

    sample = (torch.from_numpy(example),)
    path = folder / "block.tflite"
    with torch.no_grad():
        stage("export")
        program = torch.export.export(module, sample)
        if recipe == "int8":
            from litert_torch.quantize.pt2e_quantizer import (
                PT2EQuantizer,
                get_symmetric_quantization_config,
            )
            from litert_torch.quantize.quant_config import QuantConfig
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            stage("quantize")
            config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)
            quantizer = PT2EQuantizer().set_global(config)
            prepared = prepare_pt2e(program.module(), with_runtime_rules(quantizer))
            for one in calibration:
                prepared(torch.from_numpy(one))
            quantized = convert_pt2e(prepared, fold_quantize=False)
            stage("convert")
            edge = litert_torch.convert(
                quantized, sample, quant_config=QuantConfig(pt2e_quantizer=quantizer)
            )
        else:
            stage("convert")
            edge = litert_torch.convert(module, sample)
        edge.export(str(path))
    from ai_edge_litert.interpreter import Interpreter

    stage("load")
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    given = interpreter.get_input_details()[0]
    taken = interpreter.get_output_details()[0]

    def run(x: np.ndarray) -> np.ndarray:
        stage("run")
        scale, zero = given["quantization"]
        if given["dtype"] != np.float32 and scale:  # an int8 boundary: quantized as LiteRT asks
            x = np.clip(np.round(x / scale + zero), -128, 127)
        interpreter.set_tensor(given["index"], x.astype(given["dtype"]))
        interpreter.invoke()
        out = interpreter.get_tensor(taken["index"])
        scale, zero = taken["quantization"]
        if taken["dtype"] != np.float32 and scale:
            out = (out.astype(np.float32) - zero) * scale
        return np.asarray(out, dtype=np.float32)

    return run
