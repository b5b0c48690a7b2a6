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
    prepared = prepare_pt2e(graph, float_edges_only(quantizer))
    with torch.no_grad():
        for sample in calibration:
            prepared(torch.from_numpy(sample[None]))
    return convert_pt2e(prepared, fold_quantize=fold)


def float_edges_only(quantizer: Quantizer) -> Quantizer:
    """``quantizer``, its annotations kept to float tensors. A quantizer that annotates an
    integer tensor as an activation (BEiT's and SwinV2's relative-position index feeding a
    gather) gives it a histogram observer, which fails at calibration: "histogram_cpu" not
    implemented for 'Long'. An integer index needs no observer: it is exact."""
    from torchao.quantization.pt2e.quantizer import Quantizer as Base

    class FloatEdgesOnly(Base):
        def __init__(self, inner: Quantizer) -> None:
            super().__init__()
            self.inner = inner

        def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            return self.inner.transform_for_annotation(model)

        def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            model = self.inner.annotate(model)
            for node in model.graph.nodes:
                annotation = node.meta.get("quantization_annotation")
                if annotation is None:
                    continue
                for edge in [e for e in annotation.input_qspec_map if not _floating(e)]:
                    del annotation.input_qspec_map[edge]
                if annotation.output_qspec is not None and not _floating(node):
                    annotation.output_qspec = None
            return model

        def validate(self, model: torch.fx.GraphModule) -> None:
            self.inner.validate(model)

    return FloatEdgesOnly(quantizer)


def _floating(node: Any) -> bool:
    import torch

    value = node.meta.get("val")
    return not isinstance(value, torch.Tensor) or value.is_floating_point()
