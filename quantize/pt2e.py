"""The PT2E flow shared by the tflite and executorch targets: export, prepare with a quantizer,
calibrate, convert."""

from __future__ import annotations

from operator import getitem
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
    prepared = prepare_pt2e(graph, with_runtime_rules(quantizer))
    with torch.no_grad():
        for sample in calibration:
            prepared(torch.from_numpy(sample[None]))
    return convert_pt2e(prepared, fold_quantize=fold)


def with_runtime_rules(quantizer: Quantizer) -> Quantizer:
    """``quantizer``, its annotations made to what the runtimes take:

    - kept to float tensors. A quantizer that annotates an integer tensor as an activation
      (BEiT's and SwinV2's relative-position index feeding a gather) gives it a histogram
      observer, which fails at calibration: "histogram_cpu" not implemented for 'Long'. An
      integer index needs no observer: it is exact.
    - an integer op's scalar kept an integer. XNNPACKQuantizer's transform turns every scalar
      operand into a float32 constant, which makes integer index arithmetic float (Perceiver's
      ``arange + 0`` feeding an index: "tensors used as indices must be long, ...").
    - a pad or max-pool after an int8 tensor kept int8 at its input's scale. Both only copy
      values; left float, XNNPACK still delegates them with an int8 input and a float output,
      and the program does not load (BiT's stem: "Failed to create StaticConstantPad node").
    - a sigmoid's or softmax's int8 output at scale 1/256, zero point -128, where a consumer
      quantizes it. TFLite's LOGISTIC and SOFTMAX and XNNPACK's int8 sigmoid take no other
      (SwinV2's position-bias sigmoid: "output->params.scale == 1. / 256 was not true"), and
      [0, 1] needs no other.
    - a piece cut from an int8 tensor (a slice, a split's part) quantized at the whole tensor's
      scale where a consumer quantizes it. TFLite's SLICE takes no other ("'tfl.slice' op
      quantization parameters violate the same scale constraint", FocalNet's split of one
      projection into query, context and gates), and XNNPACK delegates a quantized slice only
      when its input and output match."""
    from torchao.quantization.pt2e.quantizer import Quantizer as Base

    class WithRuntimeRules(Base):
        def __init__(self, inner: Quantizer) -> None:
            super().__init__()
            self.inner = inner

        def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            return _integer_scalars_kept(self.inner.transform_for_annotation(model))

        def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            model = self.inner.annotate(model)
            for node in model.graph.nodes:
                annotation = node.meta.get("quantization_annotation")
                if annotation is None:
                    continue
                for edge in [e for e in annotation.input_qspec_map if not _floating(e, model)]:
                    del annotation.input_qspec_map[edge]
                if annotation.output_qspec is not None and not _floating(node, model):
                    annotation.output_qspec = None
            for node in model.graph.nodes:
                _fix_unit_range_output(node)
                _share_through_copying_op(node)
            for node in model.graph.nodes:
                _pieces_at_whole_scale(node)
            return model

        def validate(self, model: torch.fx.GraphModule) -> None:
            self.inner.validate(model)

    return WithRuntimeRules(quantizer)


def _integer_scalars_kept(model: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Where a constant the quantizer's transform made from a scalar is float and the op it
    feeds gave an integer (as traced), the constant takes the op's dtype again."""
    import torch

    for node in list(model.graph.nodes):
        value = node.meta.get("val")
        if node.op != "call_function" or not isinstance(value, torch.Tensor):
            continue
        if value.is_floating_point():
            continue
        for given in [a for a in node.args if getattr(a, "op", None) == "get_attr"]:
            constant = _attribute(model, given.target)
            if not isinstance(constant, torch.Tensor) or not constant.is_floating_point():
                continue
            name = f"{given.target.replace('.', '_')}_{str(value.dtype).removeprefix('torch.')}"
            model.register_buffer(name, constant.to(value.dtype))
            with model.graph.inserting_before(node):
                node.replace_input_with(given, model.graph.get_attr(name))
            if not given.users:
                model.graph.erase_node(given)
    model.recompile()
    return model


def _share_through_copying_op(node: Any) -> None:
    """Annotate an unannotated pad or max-pool whose input is quantized: input and output share
    the input's quantization, as the int8 kernels of both runtimes require."""
    import torch
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, SharedQuantizationSpec

    copying = (
        torch.ops.aten.pad.default,
        torch.ops.aten.constant_pad_nd.default,
        torch.ops.aten.max_pool2d.default,
    )
    if node.op != "call_function" or node.target not in copying:
        return
    if node.meta.get("quantization_annotation") is not None:
        return
    given = node.args[0]
    produced = getattr(given, "meta", {}).get("quantization_annotation")
    if produced is None or produced.output_qspec is None:
        return
    node.meta["quantization_annotation"] = QuantizationAnnotation(
        input_qspec_map={given: SharedQuantizationSpec(given)},
        output_qspec=SharedQuantizationSpec((given, node)),
        _annotated=True,
    )


def _pieces_at_whole_scale(consumer: Any) -> None:
    """Where ``consumer`` quantizes an input that unannotated slices or splits cut from a
    quantized tensor, that input shares the tensor's quantization."""
    import torch

    cutting = (
        torch.ops.aten.slice.Tensor,
        torch.ops.aten.split.Tensor,
        torch.ops.aten.split_with_sizes.default,
        torch.ops.aten.narrow.default,
    )
    passing = (*cutting, torch.ops.aten.contiguous.default, getitem)
    annotation = consumer.meta.get("quantization_annotation")
    if annotation is None:
        return
    for given, spec in list(annotation.input_qspec_map.items()):
        if not _static_int8(spec):
            continue
        source, cut = given, False
        while (
            getattr(source, "op", None) == "call_function"
            and source.target in passing
            and source.meta.get("quantization_annotation") is None
        ):
            cut = cut or source.target in cutting
            source = source.args[0]
        whole = getattr(source, "meta", {}).get("quantization_annotation")
        if cut and whole is not None and _static_int8(whole.output_qspec):
            from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

            annotation.input_qspec_map[given] = SharedQuantizationSpec(source)


def _static_int8(spec: Any) -> bool:
    """Whether ``spec`` quantizes to int8 ahead of time. A shared spec counts as such: the
    rules share only with tensors a static int8 config annotated."""
    import torch

    if spec is None:
        return False
    return getattr(spec, "dtype", torch.int8) == torch.int8 and not getattr(
        spec, "is_dynamic", False
    )


def _fix_unit_range_output(node: Any) -> None:
    """Give a sigmoid's or softmax's output, where an int8 consumer quantizes it, the one
    quantization its int8 kernels take; the consumers share it."""
    import torch
    from torchao.quantization.pt2e.quantizer import (
        FixedQParamsQuantizationSpec,
        QuantizationAnnotation,
        SharedQuantizationSpec,
    )

    if node.op != "call_function" or node.target not in (
        torch.ops.aten.sigmoid.default,
        torch.ops.aten._softmax.default,
        torch.ops.aten.softmax.int,
    ):
        return
    consumers = [
        user.meta["quantization_annotation"]
        for user in node.users
        if "quantization_annotation" in user.meta
        and node in user.meta["quantization_annotation"].input_qspec_map
    ]
    own = node.meta.get("quantization_annotation")
    specs = [c.input_qspec_map[node] for c in consumers]
    if own is not None and own.output_qspec is not None:
        specs.append(own.output_qspec)
    if not specs or not all(_static_int8(s) for s in specs):
        return
    fixed = FixedQParamsQuantizationSpec(
        dtype=torch.int8,
        scale=1 / 256,
        zero_point=-128,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
    )
    if own is None:
        node.meta["quantization_annotation"] = own = QuantizationAnnotation(_annotated=True)
    own.output_qspec = fixed
    for consumer in consumers:
        consumer.input_qspec_map[node] = SharedQuantizationSpec(node)


def _floating(node: Any, model: torch.fx.GraphModule) -> bool:
    """Whether ``node`` carries a float tensor (or no tensor at all). A constant the export
    lifted into an attribute (SwinV2's relative-position index) has no ``val`` in its meta: its
    dtype is the attribute's own."""
    import torch

    value = node.meta.get("val")
    if value is None and node.op == "get_attr":
        value = _attribute(model, node.target)
    return not isinstance(value, torch.Tensor) or value.is_floating_point()


def _attribute(model: torch.fx.GraphModule, target: str) -> Any:
    """What a ``get_attr`` node reads (a dotted path into the module)."""
    from operator import attrgetter

    return attrgetter(target)(model)
