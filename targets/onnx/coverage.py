"""What onnxruntime actually runs: the optimized graph (fusions included) and where each node
is placed, from one profiled inference of a session that saves its optimized model
(``runtime_graph``, which the census reads); the coverage is derived from that census
(``edgekit.targets.census.coverage_of``) in this format's words."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.targets.base import Coverage
from edgekit.targets.census import COMPUTING, Census, counted, coverage_of
from edgekit.targets.manifest import Manifest
from edgekit.targets.onnx.session import CPU_PROVIDER, create_session, session_options

# Kernels that run on the CPU EP but are known to be slower than the fp32 they replace.
SLOW_KERNELS = {"ConvInteger": "dynamic int8 convolution, a slow path on x86 (slower than fp32)"}

# The ops of the graph onnxruntime runs (after fusion) that edgekit.targets.onnx.census classifies
CONV_OPS = {"Conv", "FusedConv", "ConvTranspose", "NhwcFusedConv"}
MATMUL_OPS = {"Gemm", "MatMul", "FusedGemm", "FusedMatMul"}
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


@dataclass
class RuntimeGraph:
    """The graph onnxruntime runs after optimization, and where each node was placed."""

    nodes: list[Any]
    weight_types: dict[str, int]  # initializer name -> onnx element type
    placement: dict[str, str]  # node name -> execution provider (from the profile)


def coverage(path: Path, manifest: Manifest, census: Census) -> Coverage:
    """What onnxruntime runs, from the file's census: the graph after its fusions and where
    each node was placed, from one profiled inference."""
    found = census
    markers = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"} | INT8_COMPUTE_OPS
    return coverage_of(
        found,
        manifest,
        summary,
        transpose=lambda op: op.op == "Transpose",
        fallback=lambda op: op.op if op.where == CPU_PROVIDER else f"{op.op}@{op.where}",
        quantized=any(op in markers for op in found.facts.get("file_ops", {})),
    )


def runtime_graph(path: Path, chosen: list[str], tmp: Path) -> RuntimeGraph:
    import onnx

    options = session_options(1)
    options.optimized_model_filepath = str(tmp / "optimized.onnx")
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp / "profile")
    options.log_severity_level = 3  # the "optimized model is hardware specific" warning
    session = create_session(path, options, chosen)
    feed = {
        arg.name: np.zeros([d if isinstance(d, int) else 1 for d in arg.shape], _np_type(arg.type))
        for arg in session.get_inputs()
    }
    session.run(None, feed)
    placement = _placement(Path(session.end_profiling()))
    optimized = onnx.load(str(tmp / "optimized.onnx"), load_external_data=False).graph
    weight_types = {init.name: init.data_type for init in optimized.initializer}
    return RuntimeGraph(list(optimized.node), weight_types, placement)


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


def summary(census: Census, quantized: bool) -> list[str]:  # noqa: FBT001 (coverage_of calls it positionally)
    def counts(names: Iterable[str]) -> str:  # "QLinearConv 19, QLinearAdd 3": most first
        return counted(names, most_common=True, times=" ")

    ops, file_ops = census.ops, Counter(census.facts.get("file_ops", {}))
    compute = [op for op in ops if op.kind in COMPUTING]
    int8 = [op.op for op in compute if op.compute == "int8"]
    runtime = [op.op for op in ops]
    lines = [
        f"file: {file_ops.total()} nodes ({counts(file_ops.elements())})",
        f"onnxruntime runs {len(ops)} nodes after ORT_ENABLE_ALL fusion "
        f"({counts(runtime)})",
        f"placement: {counts(op.where for op in ops)}",
        f"compute ops: {len(compute)}"
        + (f", in int8: {len(int8)} ({counts(int8) or 'none'})"
           if quantized else ""),
    ]  # fmt: skip
    reorders = sum(op.op in ("ReorderInput", "ReorderOutput") for op in ops)
    if reorders:
        lines.append(f"NCHWc layout reorders inserted by onnxruntime: {reorders}")
    transposes = runtime.count("Transpose")
    if file_ops.get("Transpose", 0) != transposes:
        lines.append(f"Transpose: {file_ops.get('Transpose', 0)} in the file, {transposes} after "
                     "onnxruntime's NHWC layout transform")  # fmt: skip
    slow = Counter(op.op for op in ops if op.op in SLOW_KERNELS and op.where == CPU_PROVIDER)
    lines += [f"slow path: {op} x{count} ({SLOW_KERNELS[op]})" for op, count in slow.items()]
    if census.facts.get("file_fp16"):
        fp16 = sum(op.compute == "fp16" for op in compute)
        lines.append(f"compute ops in float16 at run time: {fp16}/{len(compute)}")
    return lines
