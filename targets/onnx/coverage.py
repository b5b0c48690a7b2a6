"""What onnxruntime actually runs: the optimized graph (fusions included) and where each node
is placed, from one profiled inference of a session that saves its optimized model."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.fileio import temporary_directory
from edgekit.targets.base import Coverage
from edgekit.targets.manifest import Manifest
from edgekit.targets.onnx.session import create_session, providers, session_options
from edgekit.targets.session import Accelerator

# Kernels that run on the CPU EP but are known to be slower than the fp32 they replace.
SLOW_KERNELS = {"ConvInteger": "dynamic int8 convolution, a slow path on x86 (slower than fp32)"}

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


@dataclass
class RuntimeGraph:
    """The graph onnxruntime runs after optimization, and where each node was placed."""

    nodes: list[Any]
    weight_types: dict[str, int]  # initializer name -> onnx element type
    placement: dict[str, str]  # node name -> execution provider (from the profile)


def coverage(path: Path, manifest: Manifest) -> Coverage:
    """What onnxruntime actually runs: the optimized graph (fusions included) and where each
    node is placed, from one profiled inference of a session that saves its optimized model."""
    import onnx

    chosen = providers(Accelerator.CPU)
    file_graph = onnx.load(str(path), load_external_data=False).graph
    file_ops = Counter(node.op_type for node in file_graph.node)
    with temporary_directory("edgekit-onnx-coverage-") as tmp:
        runtime = runtime_graph(path, chosen, tmp)
    wanted = chosen[0]
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
    lines += [
        f"slow path: {op} x{fallback[op]} ({SLOW_KERNELS[op]})"
        for op in SLOW_KERNELS
        if fallback[op]
    ]
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
    runtime: RuntimeGraph,
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
