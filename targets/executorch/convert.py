"""torch -> .pte: ``torch.export`` -> ``to_edge_transform_and_lower`` with the
``XnnpackPartitioner`` -> ``to_executorch()``; quantized recipes first go through PT2E with the
XNNPACK quantizer."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from edgekit.common.quiet import drop_log_messages
from edgekit.errors import UnsupportedExport, UserInputError, cause_line
from edgekit.targets.base import ExportRequest
from edgekit.targets.census import clean_module_path

# edge-dialect conv/linear targets, for the export-time quantization count
EDGE_CONV_LINEAR = ("aten.convolution", "aten.linear", "aten.addmm", "aten.mm")
WRAPPER_PREFIX = "inner."  # the fp16 recipe's wrapper module: HalfPrecision.inner


def quiet_library_noise() -> None:
    """Silence the torchao CUDA-extension load failures (a CPU torch cannot load them) and the
    pytree Enum deprecation; every other message of those loggers still gets through."""
    import warnings

    drop_log_messages("torchao", "Failed to load")
    drop_log_messages("torch.utils._pytree", "is an Enum subclass")
    # torch.export's pytree deprecation, raised from copyreg while unpickling tree specs
    warnings.filterwarnings(
        "ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning
    )


def prepare_module(request: ExportRequest, example: np.ndarray) -> tuple[Any, dict[str, Any]]:
    """The module to lower for ``request.recipe``, and details about how it was made."""
    recipe = request.recipe
    module = request.source.module.eval()
    details: dict[str, Any] = {
        "exporter": "torch.export + executorch.exir.to_edge_transform_and_lower",
        "partitioner": "XnnpackPartitioner",
        "recipe": recipe,
    }
    if recipe == "fp32":
        return module, details
    if recipe == "fp16":
        details["precision"] = "fp16 weights and activations inside XNNPACK; fp32 I/O"
        return half_precision_module(module), details
    from edgekit.quantize.pt2e import quantize_pt2e

    dynamic = recipe == "int8-dynamic"
    calibration = request.calibration
    if not dynamic and (calibration is None or len(calibration) == 0):
        raise UnsupportedExport(f"executorch/{recipe}: static int8 needs calibration samples")
    if dynamic:
        # dynamic quantization observes nothing at calibration time; one pass traces the graph
        calibration = example
    if request.keep_float:
        check_keep_float(request, module, example)
    quantizer = xnnpack_quantizer(dynamic=dynamic, keep_float=request.keep_float)
    activations = (
        "dynamic per-tensor int8 activations (scale chosen at run time)"
        if dynamic
        else "static int8 activations"
    )
    details["quantizer"] = f"XNNPACKQuantizer symmetric per-channel int8 weights, {activations}"
    details["calibration_samples"] = 0 if dynamic else len(calibration)
    if request.keep_float:
        details["keep_float"] = list(request.keep_float)
    try:
        converted = quantize_pt2e(module, example, quantizer, calibration)
    except Exception as exc:
        raise UnsupportedExport(
            f"executorch/{recipe}: PT2E quantization failed: {cause_line(exc)}"
        ) from exc
    return converted, details


def check_keep_float(request: ExportRequest, module: Any, example: np.ndarray) -> None:
    """Every kept path must be a module some node of the traced graph runs in: the quantizer's
    module filter matches nodes by module stack, and a filter that matches nothing keeps
    nothing float, silently."""
    from edgekit.quantize.layers import exported_graph
    from edgekit.targets.layermap import ops_from, require_modules, unmapped_reason

    require_modules("executorch", module, request.source.name, request.keep_float)
    modules = [
        clean_module_path(list(stack.values())[-1][0]) if stack else None
        for node in exported_graph(module, example).nodes
        if node.op == "call_function"
        for stack in [node.meta.get("nn_module_stack")]
    ]
    for path in request.keep_float:
        if not ops_from(path, modules):
            reason = unmapped_reason(path, modules, "executorch")
            raise UserInputError(f"executorch: cannot keep {path} float: {reason}")


def verify_kept_float(keep_float: tuple[str, ...], stats: dict[str, Any]) -> None:
    """Never report an exclusion that did not happen: a kept module's conv/linear nodes must
    have float weights in the lowered graph."""
    floats = stats["float_conv_linear_layers"]
    for path in keep_float:
        mine = [name for name in stats["conv_linear_layers"] if _inside(name, path)]
        if mine and not any(_inside(name, path) for name in floats):
            raise UnsupportedExport(
                f"executorch int8: keeping '{path}' float did not happen: its conv/linear "
                f"nodes ({', '.join(mine)}) still have int8 weights"
            )


def _inside(module: str, path: str) -> bool:
    return module == path or module.startswith(path + ".")


def xnnpack_quantizer(*, dynamic: bool, keep_float: tuple[str, ...]) -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=dynamic)
    quantizer = XNNPACKQuantizer().set_global(config)
    if keep_float:
        from torchao.quantization.pt2e.quantizer.utils import get_module_name_filter

        # set_module_name(name, None) asserts in this version; a global filter works
        excluded = [get_module_name_filter(name) for name in keep_float]
        quantizer.set_filter_function(lambda node: not any(f(node) for f in excluded))
    return quantizer


def half_precision_module(module: Any) -> Any:
    import torch

    class HalfPrecision(torch.nn.Module):
        """Runs ``inner`` in float16 behind a float32 interface, so the artifact's I/O stays
        float32 like every other recipe; the two casts are the only ops outside XNNPACK
        (its partitioner does not take dtype-converting copies)."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = copy.deepcopy(inner).half().eval()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x.half()).float()

    return HalfPrecision(module).eval()


def lower(module: Any, example: Any, recipe: str) -> tuple[bytes, dict[str, Any]]:
    """Export, lower to XNNPACK and serialize; the bytes and export-time graph statistics."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from edgekit.targets.executorch.debug_handles import handle_modules, instruction_handles
    from edgekit.targets.executorch.plan import planned_bytes

    try:
        # a failing pass makes torch's fake-tensor logger print its whole traceback first, at
        # ERROR level: the logger is switched off for the block, the cause is in our one line
        with _logger_off("torch._subclasses.fake_tensor"):
            program = torch.export.export(module, (example,))
            edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        stats = edge_graph_stats(edge.exported_program().graph_module)
        # the .pte keeps debug handles, not module paths: the manifest keeps the link
        stats["debug_handles"] = handle_modules(edge, WRAPPER_PREFIX if recipe == "fp16" else "")
        executorch_program = edge.to_executorch()
        stats["instruction_handles"] = instruction_handles(executorch_program)
        # the memory plan, kept so that a session's memory is explained without importing exir
        stats["planned_memory_bytes"] = planned_bytes(executorch_program.executorch_program)
        buffer = executorch_program.buffer
    except Exception as exc:
        raise UnsupportedExport(
            f"executorch/{recipe}: export/lowering failed: {cause_line(exc)}"
        ) from exc
    return bytes(buffer), stats


@contextlib.contextmanager
def _logger_off(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    before, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = before


def edge_graph_stats(graph_module: Any) -> dict[str, Any]:
    """Delegated vs non-delegated nodes, and conv/linear nodes with quantized weights."""
    from executorch.exir.lowered_backend_module import get_lowered_backend_modules

    outside = [
        _edge_op_name(node.target)
        for node in graph_module.graph.nodes
        if node.op == "call_function"
        and "executorch_call_delegate" not in str(node.target)
        and "getitem" not in str(node.target)
    ]
    delegated = 0
    conv_linear = quantized = 0
    float_layers: list[str] = []
    conv_linear_layers: list[str] = []
    backends = set()
    lowered_modules = get_lowered_backend_modules(graph_module)
    for lowered in lowered_modules:
        backends.add(lowered.backend_id)
        for node in lowered.original_module.graph_module.graph.nodes:
            if node.op != "call_function" or "getitem" in str(node.target):
                continue
            delegated += 1
            if any(name in str(node.target) for name in EDGE_CONV_LINEAR):
                conv_linear += 1
                conv_linear_layers.append(_layer_name(node))
                if _has_int8_weight(node):
                    quantized += 1
                else:
                    float_layers.append(_layer_name(node))
    return {
        "delegate_calls": len(lowered_modules),
        "delegate_backends": sorted(backends),
        "delegated_nodes": delegated,
        "non_delegated_ops": sorted(set(outside)),
        "non_delegated_nodes": len(outside),
        "conv_linear_nodes": conv_linear,
        "quantized_conv_linear_nodes": quantized,
        "float_conv_linear_layers": float_layers,
        "conv_linear_layers": conv_linear_layers,
    }


def _layer_name(node: Any) -> str:
    """The torch module path a node came from (``block2.dw.0``), else its node name."""
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path = list(stack.values())[-1][0]
        return clean_module_path(path).removeprefix(WRAPPER_PREFIX)
    return str(node.name)


def _edge_op_name(target: Any) -> str:
    name = getattr(target, "__name__", None) or str(target)
    return str(name).split(":")[0].strip("<> ").removeprefix("EdgeOpOverload ")


def _is_dequantize(node: Any) -> bool:
    return node.op == "call_function" and "dequantize" in str(node.target)


def _has_int8_weight(node: Any) -> bool:
    """Whether a conv/linear node's *weight* comes through a dequantize: a float layer after
    an int8 one still reads a dequantized activation, so any-input would call it int8."""
    # convolution/linear(input, weight, ...), mm(input, weight), addmm(bias, input, weight)
    position = 2 if "addmm" in str(node.target) else 1
    if len(node.args) <= position or not hasattr(node.args[position], "op"):
        return any(_is_dequantize(arg) for arg in node.all_input_nodes)
    weight = node.args[position]
    # a transposed or reshaped weight (permute_copy before mm) is still the weight
    while weight.op == "call_function" and not _is_dequantize(weight) and weight.args:
        if not hasattr(weight.args[0], "op"):
            break
        weight = weight.args[0]
    return _is_dequantize(weight)


def export_warnings(recipe: str, details: dict[str, Any]) -> list[str]:
    """What stayed off the fast path or in float, said plainly."""
    notes = []
    outside = list(details["non_delegated_ops"])
    if recipe == "fp16":
        casts = [op for op in outside if "_to_dim_order_copy" in op]
        if casts:
            notes.append(
                "fp16: the float32->float16 input cast and float16->float32 output cast run on "
                "ExecuTorch portable kernels (XNNPACK's partitioner does not take dtype casts)"
            )
        outside = [op for op in outside if op not in casts]
    if outside:
        notes.append(
            f"{recipe}: ops left on ExecuTorch portable kernels outside XNNPACK: "
            + ", ".join(outside)
        )
    if recipe.startswith("int8"):
        total, quantized = details["conv_linear_nodes"], details["quantized_conv_linear_nodes"]
        if quantized < total:
            names = details["float_conv_linear_layers"]
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            notes.append(
                f"{recipe}: {quantized}/{total} conv/linear layers have int8 weights; these stay "
                f"fp32 inside the XNNPACK delegate: {shown}"
            )
    if recipe == "int8-dynamic":
        notes.append(
            "int8-dynamic: activations stay fp32 between layers (each int8 layer quantizes its "
            "input at run time), so adds and pooling run in fp32"
        )
    return notes
