"""One block to .pte and back, for ``edgekit culprit``: torch.export, PT2E with the XNNPACK
quantizer, ``to_edge_transform_and_lower`` and the ExecuTorch runtime, step by step, each
announced to ``stage`` so a failure is placed. Of edgekit it imports only the quantizer rules
export applies (``edgekit.quantize.pt2e``): a repro folder carries their source and this
file's as they are."""

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
    """Lower ``module`` to XNNPACK (fp32, or int8 through PT2E with ``calibration``), load the
    program in the ExecuTorch runtime, and return a function that runs one input."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    sample = (torch.from_numpy(example),)
    path = folder / "block.pte"
    with torch.no_grad():
        stage("export")
        program = torch.export.export(module, sample)
        if recipe == "int8":
            from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
                XNNPACKQuantizer,
                get_symmetric_quantization_config,
            )
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            stage("quantize")
            config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)
            quantizer = with_runtime_rules(XNNPACKQuantizer().set_global(config))
            prepared = prepare_pt2e(program.module(), quantizer)
            for one in calibration:
                prepared(torch.from_numpy(one))
            program = torch.export.export(convert_pt2e(prepared), sample)
        stage("convert")
        lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        path.write_bytes(lowered.to_executorch().buffer)
    from executorch.runtime import Runtime

    stage("load")
    method = Runtime.get().load_program(str(path)).load_method("forward")

    def run(x: np.ndarray) -> np.ndarray:
        stage("run")
        return np.asarray(method.execute([torch.from_numpy(x)])[0], dtype=np.float32)

    return run
