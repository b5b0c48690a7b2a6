"""ExecuTorch target: a ``.pte`` program whose graph is lowered to the XNNPACK delegate.

Export is ``torch.export`` -> ``to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])``
-> ``to_executorch()``; quantized recipes first go through PT2E with the XNNPACK quantizer. The
artifact runs with the ``executorch.runtime`` Python bindings, whose pip build has XNNPACK
compiled in. Anything the partitioner leaves outside the delegate runs on ExecuTorch's portable
kernels, which are about 100x slower, so :meth:`ExecuTorchTarget.coverage` reads the ``.pte``
file itself: the instruction list of the execution plan, and the XNNPACK subgraph stored in the
delegate payload (decoded with the ``flatc`` that executorch ships).
"""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import tempfile
import warnings
import weakref
from collections import Counter
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import DeviceUnavailable, UnsupportedExport
from edgekit.models import SourceModel
from edgekit.native import quiet_native
from edgekit.targets import register
from edgekit.targets.base import (
    Coverage,
    ExportInfo,
    ExportRequest,
    Session,
    Target,
    TensorSpec,
)

RECIPES = ("fp32", "fp16", "int8", "int8-dynamic")
XNNPACK_BACKEND = "XnnpackBackend"

# XNNPACK subgraph node types that do arithmetic (the int8 denominator), by their schema name
XNN_COMPUTE_NODES = {
    "XNNConv2d",
    "XNNDepthwiseConv2d",
    "XNNConvTranspose2d",
    "XNNFullyConnected",
    "XNNBatchMatrixMultiply",
    "XNNAdd",
    "XNNSubtract",
    "XNNMultiply",
}
# XNNPACK value types of an int8 activation: static (qint8/quint8) or dynamic (qdint8/qpint8)
XNN_INT8_ACTIVATIONS = {
    "xnn_datatype_qint8",
    "xnn_datatype_quint8",
    "xnn_datatype_qdint8",
    "xnn_datatype_qpint8",
}
# portable/optimized kernels (outside any delegate) that do arithmetic, by operator name
PORTABLE_COMPUTE_OPS = {
    "aten::convolution",
    "aten::linear",
    "aten::addmm",
    "aten::mm",
    "aten::bmm",
    "aten::add",
    "aten::sub",
    "aten::mul",
}
# edge-dialect conv/linear targets, for the export-time quantization count
EDGE_CONV_LINEAR = ("aten.convolution", "aten.linear", "aten.addmm", "aten.mm")

# sessions whose XNNPACK runtime shares the process-wide threadpool (see _set_threads)
_OPEN_SESSIONS: weakref.WeakSet = weakref.WeakSet()


class _DropMessages(logging.Filter):
    """Drops log records whose message contains one of ``fragments`` (known-harmless noise)."""

    def __init__(self, *fragments: str) -> None:
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(fragment in message for fragment in self.fragments)


def _quiet_library_noise() -> None:
    """Silence the torchao CUDA-extension load failures (a CPU torch cannot load them) and the
    pytree Enum deprecation; every other message of those loggers still gets through."""
    for name, fragments in (
        ("torchao", ("Failed to load",)),
        ("torch.utils._pytree", ("is an Enum subclass",)),
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) for f in logger.filters):
            logger.addFilter(_DropMessages(*fragments))
    # torch.export's pytree deprecation, raised from copyreg while unpickling tree specs
    warnings.filterwarnings(
        "ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning
    )


@register
class ExecuTorchTarget(Target):
    name = "executorch"
    suffix = ".pte"
    runtime = "ExecuTorch (XNNPACK delegate)"

    def unsupported_reason(
        self, recipe: str, source: SourceModel, io_dtype: str = "float32"
    ) -> str | None:
        if recipe not in RECIPES:
            return f"executorch: unknown recipe '{recipe}' (have {', '.join(RECIPES)})"
        if source.framework != "torch":
            return (
                f"executorch/{recipe}: {source.name} is a {source.framework} model; ExecuTorch "
                "exports torch.nn.Module models only (torch.export)"
            )
        if io_dtype != "float32":
            return (
                f"executorch/{recipe}: io_dtype {io_dtype} is not supported; the .pte takes "
                "float32 input and returns float32 logits (quantize/dequantize run inside the "
                "XNNPACK delegate)"
            )
        return None

    def export(self, request: ExportRequest) -> ExportInfo:
        reason = self.unsupported_reason(request.recipe, request.source, request.io_dtype)
        if reason:
            raise UnsupportedExport(reason)
        _quiet_library_noise()
        import torch

        source = request.source
        example = source.example_input()
        module, details = _prepare_module(request, example)
        buffer, graph_stats = _lower(module, torch.from_numpy(example), request.recipe)
        request.output.write_bytes(buffer)
        details.update(graph_stats)
        notes = _export_warnings(request.recipe, details)
        channels, (height, width) = source.preprocess.channels, source.preprocess.input_size
        classes = len(source.preprocess.class_names)
        return ExportInfo(
            input=TensorSpec("input", [1, channels, height, width], "float32", "NCHW"),
            output=TensorSpec("logits", [1, classes], "float32", "NC"),
            details=details,
            warnings=notes,
        )

    def open(
        self, path: Path, manifest: dict[str, Any], device: str = "cpu", threads: int = 1
    ) -> Session:
        _quiet_library_noise()
        if device == "gpu":
            raise DeviceUnavailable(_no_gpu_reason())
        if device != "cpu":
            raise DeviceUnavailable(f"executorch: unknown device '{device}' (cpu or gpu)")
        return ExecuTorchSession(Path(path), manifest, threads)

    def coverage(self, path: Path, manifest: dict[str, Any]) -> Coverage:
        _quiet_library_noise()
        return _coverage(Path(path), manifest)

    def versions(self) -> dict[str, str]:
        found = {}
        for package in ("executorch", "torch", "torchao"):
            try:
                found[package] = metadata.version(package)
            except metadata.PackageNotFoundError:
                found[package] = "not installed"
        return found


# ---------------------------------------------------------------- export


def _prepare_module(request: ExportRequest, example: np.ndarray) -> tuple[Any, dict[str, Any]]:
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
        return _half_precision_module(module), details
    from edgekit.quantize.pt2e import quantize_pt2e

    dynamic = recipe == "int8-dynamic"
    calibration = request.calibration
    if not dynamic and (calibration is None or len(calibration) == 0):
        raise UnsupportedExport(f"executorch/{recipe}: static int8 needs calibration samples")
    if dynamic:
        # dynamic quantization observes nothing at calibration time; one pass traces the graph
        calibration = example
    quantizer = _xnnpack_quantizer(dynamic, request.keep_float)
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
            f"executorch/{recipe}: PT2E quantization failed: {_first_line(exc)}"
        ) from exc
    return converted, details


def _xnnpack_quantizer(dynamic: bool, keep_float: tuple[str, ...]) -> Any:
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


def _half_precision_module(module: Any) -> Any:
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


def _lower(module: Any, example: Any, recipe: str) -> tuple[bytes, dict[str, Any]]:
    """Export, lower to XNNPACK and serialize; the bytes and export-time graph statistics."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    try:
        program = torch.export.export(module, (example,))
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        stats = _edge_graph_stats(edge.exported_program().graph_module)
        buffer = edge.to_executorch().buffer
    except Exception as exc:
        raise UnsupportedExport(
            f"executorch/{recipe}: export/lowering failed: {_first_line(exc)}"
        ) from exc
    return bytes(buffer), stats


def _first_line(exc: Exception) -> str:
    """The exception type and its first message line (torch.export's errors run to pages)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def _edge_graph_stats(graph_module: Any) -> dict[str, Any]:
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
                if any(_is_dequantize(arg) for arg in node.all_input_nodes):
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
    }


def _layer_name(node: Any) -> str:
    """The torch module path a node came from (``block2.dw.0``), else its node name."""
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path = list(stack.values())[-1][0]
        return str(path).removeprefix("L['self'].").removeprefix("inner.")
    return str(node.name)


def _edge_op_name(target: Any) -> str:
    name = getattr(target, "__name__", None) or str(target)
    return str(name).split(":")[0].strip("<> ").removeprefix("EdgeOpOverload ")


def _is_dequantize(node: Any) -> bool:
    return node.op == "call_function" and "dequantize" in str(node.target)


def _export_warnings(recipe: str, details: dict[str, Any]) -> list[str]:
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


# ---------------------------------------------------------------- runtime


def _runtime() -> Any:
    from executorch.runtime import Runtime

    return Runtime.get()


def _no_gpu_reason() -> str:
    backends = _runtime().backend_registry.registered_backend_names
    return (
        "executorch: no GPU backend in the installed runtime (registered backends: "
        f"{', '.join(backends) or 'none'}); the pip executorch build has no Vulkan/CUDA/Metal "
        "delegate, so only device cpu (XNNPACK) is available"
    )


def _set_threads(threads: int) -> int:
    """Size ExecuTorch's process-wide threadpool (XNNPACK uses it); the count in effect.

    Resetting it under a loaded XNNPACK method is "unsafe" by its name, so it is done before
    loading, only when the count changes, and other open sessions are told they now share it.
    """
    from executorch.extension.pybindings import portable_lib

    current = portable_lib._threadpool_get_thread_count()
    if threads > 0 and threads != current:
        others = [s for s in _OPEN_SESSIONS if s.info.get("threads") != threads]
        if others:
            warnings.warn(
                f"executorch: the threadpool is process-wide; resetting it to {threads} threads "
                f"also changes {len(others)} open session(s)",
                RuntimeWarning,
                stacklevel=3,
            )
        portable_lib._unsafe_reset_threadpool(threads)
    return int(portable_lib._threadpool_get_thread_count())


def _delegate_applied(manifest: dict[str, Any]) -> bool | None:
    """From the export-time count; None when the manifest does not say (coverage reads the file)."""
    calls = (manifest.get("details") or {}).get("delegate_calls")
    return None if calls is None else calls > 0


class ExecuTorchSession(Session):
    """One loaded ``forward`` method of a ``.pte`` on the XNNPACK CPU path."""

    def __init__(self, path: Path, manifest: dict[str, Any], threads: int) -> None:
        import torch
        from executorch.runtime import Verification

        if not path.exists():
            raise FileNotFoundError(path)
        with quiet_native():  # the runtime logs its CPU probing and threadpool size on fd 2
            effective = _set_threads(threads)
            runtime = _runtime()
            program = runtime.load_program(path, verification=Verification.Minimal)
        self._method = program.load_method("forward")
        self._program = program
        spec = manifest.get("input", {})
        self._dtype = getattr(torch, spec.get("dtype", "float32"))
        backends = list(runtime.backend_registry.registered_backend_names)
        self.info = {
            "runtime": "executorch.runtime (pybindings)",
            "device": "cpu",
            "delegate": "XNNPACK",
            "delegate_applied": _delegate_applied(manifest),
            "threads": effective,
            "threads_requested": threads,
            "threadpool": "process-wide",
            "backends": backends,
        }
        _OPEN_SESSIONS.add(self)

    def stage(self, sample: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(sample)).to(self._dtype).contiguous()

    def invoke(self, staged: Any) -> Any:
        return self._method.execute([staged])[0]

    def output(self, raw: Any) -> np.ndarray:
        import torch

        # copy: the runtime may reuse the output buffer on the next execute
        return raw.detach().to(torch.float32).numpy().copy()

    def close(self) -> None:
        _OPEN_SESSIONS.discard(self)
        self._method = None
        self._program = None


# ---------------------------------------------------------------- coverage


def _coverage(path: Path, manifest: dict[str, Any]) -> Coverage:
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DelegateCall, KernelCall

    program = deserialize_pte_binary(path.read_bytes()).program
    plan = program.execution_plan[0]
    kernels: list[str] = []
    delegate_indices: list[int] = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if isinstance(args, KernelCall):
                operator = plan.operators[args.op_index]
                kernels.append(operator.name)
            elif isinstance(args, DelegateCall):
                delegate_indices.append(args.delegate_index)

    fast_ops = delegate_ops = delegate_transposes = 0
    int8_ops = compute_ops = 0
    inside: Counter = Counter()
    sources: list[str] = []
    for index in delegate_indices:
        delegate = plan.delegates[index]
        graph = None
        if delegate.id == XNNPACK_BACKEND:
            graph = _xnnpack_graph(_delegate_payload(program, delegate))
        if graph is None:
            # unreadable payload: count the call as one op; the export-time count is in details
            fast_ops += 1
            sources.append(f"{delegate.id} payload not decoded")
            continue
        node_types, int8_compute, compute = _xnnpack_graph_stats(graph)
        inside.update(node_types)
        fast_ops += sum(node_types.values())
        delegate_ops += sum(node_types.values())
        delegate_transposes += node_types.get("XNNStaticTranspose", 0)
        int8_ops += int8_compute
        compute_ops += compute
        sources.append(f"{delegate.id} subgraph decoded from the file")

    compute_ops += sum(1 for name in kernels if name in PORTABLE_COMPUTE_OPS)
    transposes = sum(1 for name in kernels if name == "aten::permute_copy")
    recipe = str(manifest.get("recipe", ""))
    quantized = recipe.startswith("int8") or int8_ops > 0
    fallback = sorted(set(kernels))
    summary = _coverage_summary(
        len(delegate_indices), delegate_ops, inside, kernels, delegate_transposes, sources
    )
    summary += _details_note(manifest, quantized)
    return Coverage(
        total_ops=fast_ops + len(kernels),
        fast_ops=fast_ops,
        fallback_ops=fallback,
        transposes=transposes,
        int8_ops=int8_ops if quantized else None,
        compute_ops=compute_ops if quantized else None,
        summary=summary,
    )


def _delegate_payload(program: Any, delegate: Any) -> bytes | None:
    from executorch.exir.schema import DataLocation

    reference = delegate.processed
    if reference.location == DataLocation.INLINE:
        return bytes(program.backend_delegate_data[reference.index].data)
    return None  # deserialize_pte_binary moves segments inline; anything else is unexpected


def _xnnpack_graph(payload: bytes | None) -> dict[str, Any] | None:
    """The XNNPACK subgraph (XNNGraph flatbuffer) of a delegate payload, as JSON via flatc."""
    if not payload:
        return None
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader
    from executorch.exir._serialize._flatbuffer import _get_flatc_path

    flatbuffer = payload
    if payload[4:8] == XNNHeader.EXPECTED_MAGIC:  # header + flatbuffer + constant data
        header = XNNHeader.from_bytes(payload[: XNNHeader.EXPECTED_LENGTH])
        start = header.flatbuffer_offset
        flatbuffer = payload[start : start + header.flatbuffer_size]
    schema = (
        resources.files("executorch.backends.xnnpack.serialization")
        .joinpath("schema.fbs")
        .read_bytes()
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "schema.fbs").write_bytes(schema)
        (folder / "graph.bin").write_bytes(flatbuffer)
        command = [_get_flatc_path(), "--json", "--strict-json", "--defaults-json"]
        command += ["--raw-binary", "-o", tmp, str(folder / "schema.fbs"), "--"]
        command.append(str(folder / "graph.bin"))
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=60)
            return json.loads((folder / "graph.json").read_text())
        except (OSError, subprocess.SubprocessError, ValueError):
            return None


def _xnnpack_graph_stats(graph: dict[str, Any]) -> tuple[Counter, int, int]:
    """Node types, int8 compute nodes and compute nodes of a decoded XNNGraph."""
    datatypes = {}
    for value in graph.get("xvalues", []):
        tensor = value["xvalue_union"]
        tensor = tensor.get("tensor_value", tensor)  # quantized values wrap the tensor value
        datatypes[tensor["id_out"]] = tensor["datatype"]
    node_types: Counter = Counter()
    compute = int8_compute = 0
    for node in graph.get("xnodes", []):
        kind = node["xnode_union_type"]
        node_types[kind] += 1
        if kind in XNN_COMPUTE_NODES:
            compute += 1
            fields = node["xnode_union"]
            activation = fields.get("input1_id", fields.get("input_id"))
            int8_compute += datatypes.get(activation) in XNN_INT8_ACTIVATIONS
    return node_types, int8_compute, compute


def _coverage_summary(
    delegate_calls: int,
    delegate_ops: int,
    inside: Counter,
    kernels: list[str],
    delegate_transposes: int,
    sources: list[str],
) -> str:
    inside_text = ", ".join(f"{k.removeprefix('XNN')} {v}" for k, v in inside.most_common())
    kernel_text = ", ".join(f"{k} x{v}" for k, v in Counter(kernels).most_common())
    parts = [
        f"{delegate_calls} delegate call(s) holding {delegate_ops} XNNPACK node(s)"
        + (f" ({inside_text})" if inside_text else ""),
        f"{len(kernels)} portable kernel call(s) outside the delegate"
        + (f": {kernel_text}" if kernel_text else ""),
    ]
    if delegate_transposes:
        parts.append(
            f"{delegate_transposes} NCHW/NHWC transpose(s) inside XNNPACK (its layout boundary)"
        )
    parts.append("read from the .pte: " + ("; ".join(sorted(set(sources))) or "no delegates"))
    return "; ".join(parts)


def _details_note(manifest: dict[str, Any], quantized: bool) -> str:
    """Export-time counts from the manifest (the file does not keep the torch graph)."""
    details = manifest.get("details") or {}
    if "delegated_nodes" not in details:
        return ""
    note = f"; export-time (manifest details): {details['delegated_nodes']} edge nodes delegated"
    if quantized and "conv_linear_nodes" in details:
        note += (
            f", {details['quantized_conv_linear_nodes']}/{details['conv_linear_nodes']} "
            "conv/linear with int8 weights"
        )
    return note
