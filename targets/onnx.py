"""ONNX target: torch.onnx (dynamo) export, onnxruntime quantization, onnxruntime sessions.

Recipes and why they look the way they do (measured on x86, ORT 1.32, see shared/probe/perf):

- ``fp32``: ``torch.onnx.export(dynamo=True, opset 18)``, static batch 1; the legacy TorchScript
  exporter is used only when the dynamo exporter fails, and the details say so.
- ``int8``: ``quant_pre_process`` + ``quantize_static`` (QDQ, per-channel, MinMax). Activations are
  **uint8** and weights int8 (U8S8): on x86 S8S8 is 1.7x slower in QDQ form and 10x slower in
  QOperator form. ORT fuses DQ->Conv->Q into QLinearConv on the CPU EP.
- ``int8-dynamic``: ``quantize_dynamic`` restricted to :data:`DYNAMIC_OP_TYPES` (MatMul/Gemm):
  ORT's dynamic int8 convolutions (ConvInteger) are ~7.6x slower than fp32 on x86.
- ``fp16``: ``onnxruntime.transformers.float16.convert_float_to_float16(keep_io_types=True)``, so
  the I/O stays float32. The CPU EP has no fp16 convolutions on x86: it casts back to float32.

Sessions run with ``ORT_ENABLE_ALL`` (a lower level is 2x slower on MobileNetV2).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import logging
import re
import shutil
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import DeviceUnavailable, UnsupportedExport, UserInputError
from edgekit.models import SourceModel
from edgekit.targets import register
from edgekit.targets.base import Coverage, ExportInfo, ExportRequest, Session, Target, TensorSpec

OPSET = 18
INPUT_NAME = "input"
OUTPUT_NAME = "logits"

# Op types int8-dynamic quantizes. None quantizes every type ORT can (convolutions included),
# which makes ConvInteger nodes that run ~7.6x slower than fp32 on x86; set it to None only to
# study that trade-off (coverage() then lists ConvInteger under fallback_ops).
DYNAMIC_OP_TYPES: tuple[str, ...] | None = ("MatMul", "Gemm")
DYNAMIC_WARNING = (
    "int8-dynamic on onnx quantizes MatMul/Gemm only; dynamic int8 convolutions are ~7.6x slower "
    "than fp32 in onnxruntime on x86"
)
DYNAMIC_CONV_WARNING = (
    "int8-dynamic on onnx quantizes convolutions (DYNAMIC_OP_TYPES includes Conv or is None): "
    "dynamic int8 convolutions (ConvInteger) are ~7.6x slower than fp32 in onnxruntime on x86"
)
FP16_WARNING = (
    "fp16 on onnx halves the file, but onnxruntime's CPU EP has no fp16 convolutions on x86: it "
    "casts them back to float32 (fp16 pays off on GPU execution providers)"
)

# Kernels that run on the CPU EP but are known to be slower than the fp32 they replace.
SLOW_KERNELS = {"ConvInteger": "dynamic int8 convolution, ~7.6x slower than fp32 on x86"}

# Compute ops of the graph onnxruntime runs (after fusion): convolutions, matmuls, residual adds.
CONV_OPS = {"Conv", "FusedConv", "ConvTranspose", "NhwcFusedConv"}
MATMUL_OPS = {"Gemm", "MatMul", "FusedGemm", "FusedMatMul"}
ADD_OPS = {"Add", "Sum"}
INT8_COMPUTE_OPS = {
    "QLinearConv",
    "ConvInteger",
    "QGemm",
    "QLinearMatMul",
    "MatMulInteger",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "QLinearAdd",
    "QLinearSum",
}
COMPUTE_OPS = CONV_OPS | MATMUL_OPS | ADD_OPS | INT8_COMPUTE_OPS
# The GPU providers onnxruntime-gpu offers, in order of preference (CUDA first: TensorRT builds
# engines for minutes on the first run).
GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
CPU_PROVIDER = "CPUExecutionProvider"


@register
class OnnxTarget(Target):
    name = "onnx"
    suffix = ".onnx"
    runtime = "onnxruntime"

    def unsupported_reason(
        self, recipe: str, source: SourceModel, io_dtype: str = "float32"
    ) -> str | None:
        if source.framework != "torch":
            return (
                f"onnx: {source.framework} models are not supported (tf2onnx is not installed); "
                "use the tflite target for Keras models"
            )
        if recipe not in ("fp32", "fp16", "int8", "int8-dynamic"):
            return f"onnx: unknown recipe '{recipe}'"
        if io_dtype != "float32":
            return (
                f"onnx: io_dtype {io_dtype} is not supported; onnx artifacts keep float32 input "
                "and output (integer I/O is tflite-only)"
            )
        return None

    def export(self, request: ExportRequest) -> ExportInfo:
        reason = self.unsupported_reason(request.recipe, request.source, request.io_dtype)
        if reason:
            raise UnsupportedExport(reason)
        source = request.source
        details: dict[str, Any] = {"recipe": request.recipe}
        warn: list[str] = []
        with tempfile.TemporaryDirectory(prefix=".onnx-", dir=request.output.parent) as tmp:
            work = Path(tmp)
            fp32 = work / "fp32.onnx"
            details.update(export_fp32(source, fp32))
            if details.get("fallback_reason"):
                warn.append(
                    f"dynamo exporter failed, used the legacy exporter: "
                    f"{details['fallback_reason']}"
                )
                warn += [f"legacy exporter: {line}" for line in details["tracer_warnings"]]
            final = work / "final.onnx"
            if request.recipe == "fp32":
                final = fp32
            elif request.recipe == "int8":
                details.update(quantize_static_qdq(fp32, final, request, work, warn))
            elif request.recipe == "int8-dynamic":
                details.update(_quantize_dynamic(fp32, final, request, work, warn))
            else:
                details.update(_convert_fp16(fp32, final, request))
                warn.append(FP16_WARNING)
            _check(final)
            shutil.move(str(final), str(request.output))
        batch, channels, height, width = source.preprocess.input_shape(1)
        return ExportInfo(
            input=TensorSpec(INPUT_NAME, [batch, channels, height, width], "float32", "NCHW"),
            output=TensorSpec(OUTPUT_NAME, [1, source.preprocess.num_classes], "float32", "NC"),
            details=details,
            warnings=warn,
        )

    def open(
        self, path: Path, manifest: dict[str, Any], device: str = "cpu", threads: int = 1
    ) -> Session:
        return OnnxSession(Path(path), manifest, device, threads)

    def coverage(self, path: Path, manifest: dict[str, Any]) -> Coverage:
        return _coverage(Path(path), manifest)

    def versions(self) -> dict[str, str]:
        names = ("torch", "onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu")
        found = {}
        for name in names:
            try:
                found[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
        return found


# ---------------------------------------------------------------------------------------------
# export


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's harmless noise (torchvision op registration, legacy deprecation)."""
    logger = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", message=".*torch.onnx.*deprecated.*")
            yield
    finally:
        logger.setLevel(level)


@contextmanager
def _without_graph_dumps() -> Iterator[None]:
    """The legacy exporter (torch 2.13) turns its C++ log on whatever ``verbose`` says (it tests
    ``_jit_is_onnx_log_enabled`` without calling it) and dumps whole TorchScript graphs to stderr.
    Discard the process's stdout/stderr for that call; its errors still arrive as exceptions."""
    import os
    import sys

    import torch

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as devnull:
        try:
            os.dup2(devnull.fileno(), 1)
            os.dup2(devnull.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            torch._C._jit_set_onnx_log_enabled(False)  # and it never turns the log off


def export_fp32(source: SourceModel, path: Path) -> dict[str, Any]:
    """Export with the dynamo exporter; fall back to the legacy one only if it fails."""
    import torch

    example = (torch.from_numpy(source.example_input()),)
    names = {"input_names": [INPUT_NAME], "output_names": [OUTPUT_NAME]}
    with _quiet_exporter(), torch.no_grad():
        try:
            torch.onnx.export(
                source.module, example, str(path), dynamo=True, opset_version=OPSET,
                external_data=False, verbose=False, **names,
            )  # fmt: skip
            return {"exporter": f"torch.onnx dynamo (torch {torch.__version__})", "opset": OPSET}
        except Exception as dynamo_error:
            dynamo_failure = dynamo_error
        try:
            with _without_graph_dumps(), warnings.catch_warnings(record=True) as caught:
                # a TracerWarning means the trace froze a data-dependent value: the user must know
                warnings.simplefilter("always", torch.jit.TracerWarning)
                torch.onnx.export(
                    source.module, example, str(path), dynamo=False, opset_version=OPSET,
                    verbose=False, **names,
                )  # fmt: skip
        except Exception as legacy_error:
            raise UnsupportedExport(_export_failure(source, dynamo_failure, legacy_error)) from None
    tracer = [
        str(w.message).splitlines()[0] for w in caught if w.category is torch.jit.TracerWarning
    ]
    return {
        "exporter": f"torch.onnx legacy TorchScript (torch {torch.__version__})",
        "opset": OPSET,
        "fallback_reason": _one_line(dynamo_failure),
        "tracer_warnings": list(dict.fromkeys(tracer)),
    }


_OP_PATTERNS = (
    re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)', overload='([^']+)'\)>"),
    re.compile(r"target=torch\.ops\.([\w.]+)\]"),
    re.compile(r"Exporting the operator '?([\w:.]+)'? to ONNX"),
    re.compile(r"unrecognized namespace ([\w:.]+)"),
)


def _unsupported_op(error: BaseException) -> str | None:
    """The operator an exporter error is about, from its message or its causes."""
    seen = 0
    while error is not None and seen < 8:
        text = str(error)
        for pattern in _OP_PATTERNS:
            match = pattern.search(text)
            if match:
                return ".".join(group for group in match.groups() if group)
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def _one_line(error: BaseException) -> str:
    """``Type: first line`` of the innermost cause (the exporters wrap the real error)."""
    root, depth = error, 0
    while depth < 8 and (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
        depth += 1
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(root)).strip()
    line = next((line for line in text.splitlines() if line.strip()), "")
    prefix = type(error).__name__ if root is error else f"{type(error).__name__} <- "
    return f"{prefix}{'' if root is error else type(root).__name__}: {line[:300]}"


def _export_failure(source: SourceModel, dynamo: BaseException, legacy: BaseException) -> str:
    op = _unsupported_op(dynamo) or _unsupported_op(legacy)
    if op:
        return (
            f"onnx: cannot export {source.name}: operator {op} has no ONNX translation in "
            f"torch.onnx (opset {OPSET}, dynamo and legacy exporters)"
        )
    return (
        f"onnx: cannot export {source.name}: dynamo exporter: {_one_line(dynamo)}; "
        f"legacy exporter: {_one_line(legacy)}"
    )


def _check(path: Path) -> None:
    import onnx

    onnx.checker.check_model(str(path))


def _pre_process(fp32: Path, work: Path, warn: list[str]) -> tuple[Path, bool]:
    """ORT's recommended shape inference + optimization before quantization (optional)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = work / "pre.onnx"
    try:
        quant_pre_process(str(fp32), str(pre))
        return pre, True
    except Exception as error:
        warn.append(f"quant_pre_process failed, quantized the exported model: {_one_line(error)}")
        return fp32, False


def _excluded_nodes(model_path: Path, keep_float: tuple[str, ...]) -> list[str]:
    """ONNX node names produced by the torch modules in ``keep_float`` (dynamo metadata)."""
    if not keep_float:
        return []
    import onnx

    nodes = onnx.load(str(model_path), load_external_data=False).graph.node
    excluded, matched = [], set()
    for node in nodes:
        scope = _module_path(node)
        for keep in keep_float:
            if scope == keep or scope.startswith(keep + "."):
                excluded.append(node.name)
                matched.add(keep)
    missing = [keep for keep in keep_float if keep not in matched]
    if missing:
        raise UserInputError(
            f"onnx: no ONNX node comes from module(s) {', '.join(missing)} "
            "(keep_float needs the dynamo exporter's name_scopes metadata and a module path)"
        )
    return excluded


def _module_path(node: Any) -> str:
    """The torch module a dynamo-exported node comes from: name_scopes ['', 'a', 'a.b', 'op']."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return ""
            return scopes[-2] if len(scopes) >= 2 else ""
    return ""


class _CalibrationReader:
    """Feeds request.calibration to the calibrator one sample at a time (batch-1 model)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = np.ascontiguousarray(data, dtype=np.float32)
        self.index = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.index >= len(self.data):
            return None
        sample = self.data[self.index : self.index + 1]
        self.index += 1
        return {INPUT_NAME: sample}

    def rewind(self) -> None:
        self.index = 0


def quantize_static_qdq(
    fp32: Path, out: Path, request: ExportRequest, work: Path, warn: list[str]
) -> dict[str, Any]:
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if request.calibration is None or len(request.calibration) == 0:
        raise UserInputError("onnx int8: static quantization needs calibration data")
    pre, pre_processed = _pre_process(fp32, work, warn)
    excluded = _excluded_nodes(pre, request.keep_float)
    # ORT's CalibrationDataReader is duck-typed (__subclasshook__ on get_next)
    reader = _CalibrationReader(request.calibration)
    quantize_static(
        str(pre),
        str(out),
        reader,
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,  # U8S8: the fast x86 kernels (S8S8 is 1.7x slower)
        weight_type=QuantType.QInt8,
        per_channel=True,
        calibrate_method=CalibrationMethod.MinMax,
        nodes_to_exclude=excluded,
    )
    return {
        "quantizer": "onnxruntime.quantization.quantize_static",
        "quant_format": "QDQ",
        "activation_type": "uint8 (QUInt8, asymmetric)",
        "weight_type": "int8 (QInt8, symmetric, per-channel)",
        "calibrate_method": "MinMax",
        "calibration_samples": len(request.calibration),
        "pre_process": pre_processed,
        "nodes_excluded": excluded,
    }


def _quantize_dynamic(
    fp32: Path, out: Path, request: ExportRequest, work: Path, warn: list[str]
) -> dict[str, Any]:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    pre, pre_processed = _pre_process(fp32, work, warn)
    excluded = _excluded_nodes(pre, request.keep_float)
    op_types = list(DYNAMIC_OP_TYPES) if DYNAMIC_OP_TYPES is not None else None
    quantize_dynamic(
        str(pre),
        str(out),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=op_types,
        nodes_to_exclude=excluded,
    )
    # either way the user is told about convolutions: left in fp32, or quantized into slow kernels
    warn.append(DYNAMIC_WARNING if op_types and "Conv" not in op_types else DYNAMIC_CONV_WARNING)
    return {
        "quantizer": "onnxruntime.quantization.quantize_dynamic",
        "weight_type": "int8 (QInt8, per-tensor)",
        "activation_type": "uint8, quantized at run time",
        "op_types_to_quantize": op_types or "all",
        "pre_process": pre_processed,
        "nodes_excluded": excluded,
    }


def _convert_fp16(fp32: Path, out: Path, request: ExportRequest) -> dict[str, Any]:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    excluded = _excluded_nodes(fp32, request.keep_float)
    model = convert_float_to_float16(
        onnx.load(str(fp32)), keep_io_types=True, node_block_list=excluded or None
    )
    _sort_topologically(model.graph)  # the converter appends the I/O casts at the end
    onnx.save(model, str(out))
    return {
        "converter": "onnxruntime.transformers.float16.convert_float_to_float16",
        "keep_io_types": True,
        "nodes_excluded": excluded,
    }


def _sort_topologically(graph: Any) -> None:
    """Reorder ``graph.node`` so every node comes after the producers of its inputs."""
    available = {value.name for value in graph.input} | {init.name for init in graph.initializer}
    available.add("")  # an omitted optional input
    pending, ordered = list(graph.node), []
    while pending:
        ready = [node for node in pending if all(name in available for name in node.input)]
        if not ready:
            raise UnsupportedExport(
                "onnx fp16: the converted graph has a cycle or a dangling input"
            )
        for node in ready:
            ordered.append(node)
            available.update(node.output)
        done = {id(node) for node in ready}
        pending = [node for node in pending if id(node) not in done]
    copies = [type(node)() for node in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


# ---------------------------------------------------------------------------------------------
# sessions


def _session_options(threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return options


def _providers(device: str) -> list[str]:
    """Execution providers for ``device``; DeviceUnavailable when the GPU ones are missing."""
    import onnxruntime as ort

    if device == "cpu":
        return [CPU_PROVIDER]
    if device != "gpu":
        raise DeviceUnavailable(f"onnx: unknown device '{device}' (cpu or gpu)")
    available = ort.get_available_providers()
    for provider in GPU_PROVIDERS:
        if provider in available:
            return [provider, CPU_PROVIDER]
    raise DeviceUnavailable(
        f"onnx: a GPU execution provider ({', '.join(GPU_PROVIDERS)}) is not available here: "
        f"onnxruntime has providers {available} (install onnxruntime-gpu on a CUDA machine)"
    )


def _create_session(path: Path, options: Any, providers: list[str]) -> Any:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), options, providers=providers)
    wanted = providers[0]
    if wanted not in session.get_providers():
        # onnxruntime-gpu lists CUDA even without a usable GPU, then silently runs on CPU
        raise DeviceUnavailable(
            f"onnx: {wanted} failed to initialise (no usable GPU?); session providers "
            f"{session.get_providers()}"
        )
    return session


class OnnxSession(Session):
    def __init__(self, path: Path, manifest: dict[str, Any], device: str, threads: int) -> None:
        providers = _providers(device)
        self._session = _create_session(path, _session_options(threads), providers)
        inputs = self._session.get_inputs()
        self._input_name = manifest.get("input", {}).get("name") or inputs[0].name
        self._output_names = [self._session.get_outputs()[0].name]
        self.info = {
            "runtime": f"onnxruntime {_ort_version()}",
            "providers": self._session.get_providers(),
            "delegate": self._session.get_providers()[0],
            "delegate_applied": self._session.get_providers()[0] == providers[0],
            "threads": threads,
            "inter_op_threads": 1,
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "device": device,
        }

    def stage(self, sample: np.ndarray) -> dict[str, np.ndarray]:
        return {self._input_name: np.ascontiguousarray(sample, dtype=np.float32)}

    def invoke(self, staged: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self._session.run(self._output_names, staged)

    def output(self, raw: list[np.ndarray]) -> np.ndarray:
        return np.asarray(raw[0], dtype=np.float32)

    def close(self) -> None:
        self._session = None


def _ort_version() -> str:
    import onnxruntime as ort

    return ort.__version__


# ---------------------------------------------------------------------------------------------
# coverage


@dataclass
class _RuntimeGraph:
    """The graph onnxruntime runs after optimization, and where each node was placed."""

    nodes: list[Any]
    weight_types: dict[str, int]  # initializer name -> onnx element type
    placement: dict[str, str]  # node name -> execution provider (from the profile)


def _coverage(path: Path, manifest: dict[str, Any]) -> Coverage:
    """What onnxruntime actually runs: the optimized graph (fusions included) and where each
    node is placed, from one profiled inference of a session that saves its optimized model."""
    import onnx

    providers = _providers(manifest.get("device", "cpu"))
    file_graph = onnx.load(str(path), load_external_data=False).graph
    file_ops = Counter(node.op_type for node in file_graph.node)
    with tempfile.TemporaryDirectory(prefix=".onnx-coverage-") as tmp:
        runtime = _runtime_graph(path, providers, Path(tmp))
    wanted = providers[0]
    fast, fallback = 0, Counter()
    for node in runtime.nodes:
        provider = runtime.placement.get(node.name, wanted)
        if provider == wanted and node.op_type not in SLOW_KERNELS:
            fast += 1
        else:
            fallback[node.op_type if provider == wanted else f"{node.op_type}@{provider}"] += 1
    compute = [node for node in runtime.nodes if _is_compute(node, runtime.weight_types)]
    int8 = [node for node in compute if node.op_type in INT8_COMPUTE_OPS]
    quantized = _is_quantized(file_ops)
    runtime_ops = Counter(node.op_type for node in runtime.nodes)
    lines = _summary(file_ops, runtime_ops, runtime, compute, int8, quantized)
    lines += [f"slow path: {op} x{fallback[op]} ({SLOW_KERNELS[op]})" for op in SLOW_KERNELS
              if fallback[op]]  # fmt: skip
    if _has_fp16(file_graph):
        fp16 = [node for node in compute if _runs_fp16(node, runtime.weight_types)]
        lines.append(f"compute ops in float16 at run time: {len(fp16)}/{len(compute)}")
    return Coverage(
        total_ops=len(runtime.nodes),
        fast_ops=fast,
        fallback_ops=sorted(fallback),
        transposes=runtime_ops.get("Transpose", 0),
        int8_ops=len(int8) if quantized else None,
        compute_ops=len(compute) if quantized else None,
        summary="; ".join(lines),
    )


def _runtime_graph(path: Path, providers: list[str], tmp: Path) -> _RuntimeGraph:
    import onnx

    options = _session_options(1)
    options.optimized_model_filepath = str(tmp / "optimized.onnx")
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp / "profile")
    options.log_severity_level = 3  # the "optimized model is hardware specific" warning
    session = _create_session(path, options, providers)
    feed = {
        arg.name: np.zeros([d if isinstance(d, int) else 1 for d in arg.shape], _np_type(arg.type))
        for arg in session.get_inputs()
    }
    session.run(None, feed)
    placement = _placement(Path(session.end_profiling()))
    optimized = onnx.load(str(tmp / "optimized.onnx"), load_external_data=False).graph
    weight_types = {init.name: init.data_type for init in optimized.initializer}
    return _RuntimeGraph(list(optimized.node), weight_types, placement)


def _np_type(ort_type: str) -> Any:
    types = {"tensor(float16)": np.float16, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}
    return types.get(ort_type, np.float32)


def _placement(profile: Path) -> dict[str, str]:
    """node name -> execution provider, from onnxruntime's profile of one run."""
    placement = {}
    for event in json.loads(profile.read_text()):
        args = event.get("args", {})
        if event.get("cat") == "Node" and "provider" in args:
            placement[event["name"].removesuffix("_kernel_time")] = args["provider"]
    return placement


def _is_compute(node: Any, weight_types: dict[str, int]) -> bool:
    if node.op_type not in COMPUTE_OPS:
        return False
    if node.op_type in ADD_OPS:
        # a residual add of two activations; a bias add (one constant input) belongs to a conv
        return not any(name in weight_types for name in node.input)
    return True


def _is_quantized(file_ops: Counter) -> bool:
    markers = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"} | INT8_COMPUTE_OPS
    return any(op in markers for op in file_ops)


def _has_fp16(graph: Any) -> bool:
    from onnx import TensorProto

    return any(init.data_type == TensorProto.FLOAT16 for init in graph.initializer)


def _runs_fp16(node: Any, weight_types: dict[str, int]) -> bool:
    from onnx import TensorProto

    return any(weight_types.get(name) == TensorProto.FLOAT16 for name in node.input)


def _summary(
    file_ops: Counter,
    runtime_ops: Counter,
    runtime: _RuntimeGraph,
    compute: list[Any],
    int8: list[Any],
    quantized: bool,
) -> list[str]:
    def counts(ops: Counter) -> str:
        return ", ".join(f"{op} {n}" for op, n in ops.most_common())

    by_provider = Counter(runtime.placement.get(node.name, "?") for node in runtime.nodes)
    int8_types = Counter(node.op_type for node in int8)
    lines = [
        f"file: {sum(file_ops.values())} nodes ({counts(file_ops)})",
        f"onnxruntime runs {len(runtime.nodes)} nodes after ORT_ENABLE_ALL fusion "
        f"({counts(runtime_ops)})",
        f"placement: {counts(by_provider)}",
        f"compute ops: {len(compute)}"
        + (f", in int8: {len(int8)} ({counts(int8_types) or 'none'})" if quantized else ""),
    ]
    reorders = runtime_ops.get("ReorderInput", 0) + runtime_ops.get("ReorderOutput", 0)
    if reorders:
        lines.append(f"NCHWc layout reorders inserted by onnxruntime: {reorders}")
    if file_ops.get("Transpose", 0) != runtime_ops.get("Transpose", 0):
        lines.append(
            f"Transpose: {file_ops.get('Transpose', 0)} in the file, "
            f"{runtime_ops.get('Transpose', 0)} after onnxruntime's NHWC layout transform"
        )
    return lines
