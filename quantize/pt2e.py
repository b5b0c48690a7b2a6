"""The PT2E flow shared by the tflite and executorch targets: export, prepare with a quantizer,
calibrate, convert."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
    from torchao.quantization.pt2e.quantizer import Quantizer


def quantize_pt2e(
    module: torch.nn.Module,
    example: np.ndarray,
    quantizer: Quantizer,
    calibration: np.ndarray,
    *,
    fold: bool = True,
) -> Any:
    """A converted (quantize/dequantize annotated) GraphModule for ``module``.

    ``calibration`` is NCHW float32; it is fed one sample at a time, as the artifact will run.
    """
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    graph = torch.export.export(module, (torch.from_numpy(example),)).module()
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for sample in calibration:
            prepared(torch.from_numpy(sample[None]))
    return convert_pt2e(prepared, fold_quantize=fold)
