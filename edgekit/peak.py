"""The machine's measured matmul peaks, the yardstick for "efficiency" (achieved GFLOP/s).

fp32: numpy's GEMM (OpenBLAS); int8: onnxruntime's MatMulInteger (u8 x s8), both at the thread
count of the measurement, median of several calls on a square problem."""

from __future__ import annotations

import os
import time

import numpy as np

SIZE = 1024


def _median_seconds(call: object, repeats: int = 7) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def fp32_peak_gflops(threads: int = 1, size: int = SIZE) -> float:
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    with threadpool_limits(limits=threads):
        seconds = _median_seconds(lambda: a @ b)
    return 2 * size**3 / seconds / 1e9


def int8_peak_gops(threads: int = 1, size: int = SIZE) -> float:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["c"])],
        "peak",
        [
            helper.make_tensor_value_info("a", TensorProto.UINT8, [size, size]),
            helper.make_tensor_value_info("b", TensorProto.INT8, [size, size]),
        ],
        [helper.make_tensor_value_info("c", TensorProto.INT32, [size, size])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(0)
    feed = {
        "a": rng.integers(0, 255, (size, size), dtype=np.uint8),
        "b": rng.integers(-127, 127, (size, size), dtype=np.int8),
    }
    seconds = _median_seconds(lambda: session.run(None, feed))
    return 2 * size**3 / seconds / 1e9


def measure_peaks(threads: int = 1) -> dict[str, float]:
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    return {"fp32_gflops": fp32_peak_gflops(threads), "int8_gops": int8_peak_gops(threads)}
