"""The machine's measured matmul peaks, the yardstick for "efficiency" (achieved GFLOP/s).

Both come from onnxruntime's MLAS GEMMs on a 1024^3 problem at the measurement's thread count
(median of several calls): fp32 ``MatMul`` and int8 ``MatMulInteger`` (u8 x s8). numpy is not
used: on machines where ``OPENBLAS_CORETYPE`` pins OpenBLAS to older kernels (this one: Haswell,
AVX2) it reports about half the AVX-512 peak the runtimes' convolutions actually reach."""

from __future__ import annotations

import time

import numpy as np

SIZE = 1024


def arithmetic_of(recipe: str, int8_share: float | None) -> str:
    """Which peak a row's achieved rate divides by: ``int8`` where an int8 recipe runs most of
    its compute ops (or MACs) in int8, ``fp32`` otherwise (an int8-dynamic onnx file runs its
    convolutions in fp32)."""
    return "int8" if recipe.startswith("int8") and (int8_share or 0.0) >= 0.5 else "fp32"


def peak_of(peaks: dict[str, float], arithmetic: str) -> float | None:
    """The measured peak (GOP/s or GFLOP/s) of ``arithmetic`` from :func:`measure_peaks`."""
    return peaks.get("int8_gops" if arithmetic == "int8" else "fp32_gflops")


def _median_seconds(call: object, repeats: int = 7) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _gemm_rate(op: str, a: np.ndarray, b: np.ndarray, out_type: int, threads: int) -> float:
    import onnxruntime as ort
    from onnx import helper

    size = a.shape[0]
    graph = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["c"])],
        "peak",
        [
            helper.make_tensor_value_info("a", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape),
            helper.make_tensor_value_info("b", helper.np_dtype_to_tensor_dtype(b.dtype), b.shape),
        ],
        [helper.make_tensor_value_info("c", out_type, [size, size])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feed = {"a": a, "b": b}
    return 2 * size**3 / _median_seconds(lambda: session.run(None, feed)) / 1e9


def fp32_peak_gflops(threads: int = 1, size: int = SIZE) -> float:
    from onnx import TensorProto

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    return _gemm_rate("MatMul", a, b, TensorProto.FLOAT, threads)


def int8_peak_gops(threads: int = 1, size: int = SIZE) -> float:
    from onnx import TensorProto

    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (size, size), dtype=np.uint8)
    b = rng.integers(-127, 127, (size, size), dtype=np.int8)
    return _gemm_rate("MatMulInteger", a, b, TensorProto.INT32, threads)


def measure_peaks(threads: int = 1) -> dict[str, float]:
    return {"fp32_gflops": fp32_peak_gflops(threads), "int8_gops": int8_peak_gops(threads)}
