"""onnxruntime's peak kernels (see ``edgekit.measure.peak``): MLAS ``MatMul`` (fp32) and
``MatMulInteger`` (u8 x s8), each a one-node model on the CPU execution provider."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgekit.targets.peak_kernels import Call, Kernel

PACKAGE = "onnxruntime"  # whose version the rates depend on
RUNTIME = "onnxruntime MLAS"


def _operands(arithmetic: str, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if arithmetic == "int8":  # MLAS's fast int8 path: u8 activations x s8 weights
        a = rng.integers(0, 255, (size, size), dtype=np.uint8)
        return a, rng.integers(-127, 127, (size, size), dtype=np.int8)
    a = rng.standard_normal((size, size), dtype=np.float32)
    return a, rng.standard_normal((size, size), dtype=np.float32)


def _mlas(op: str, arithmetic: str) -> Callable[[int, int], Call]:
    def prepare(size: int, threads: int) -> Call:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        a, b = _operands(arithmetic, size)
        out_type = TensorProto.INT32 if arithmetic == "int8" else TensorProto.FLOAT
        tensor = helper.np_dtype_to_tensor_dtype
        graph = helper.make_graph(
            [helper.make_node(op, ["a", "b"], ["c"])],
            "peak",
            [
                helper.make_tensor_value_info("a", tensor(a.dtype), a.shape),
                helper.make_tensor_value_info("b", tensor(b.dtype), b.shape),
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
        return lambda: session.run(None, feed)

    return prepare


def kernels() -> tuple[Kernel, ...]:
    """fp32 at 512^3, 1024^3 and 2048^3, int8 at 512^3 and 1024^3 (which size is fastest
    depends on the caches and the thread count)."""
    fp32, int8 = _mlas("MatMul", "fp32"), _mlas("MatMulInteger", "int8")
    made = [Kernel(RUNTIME, "MatMul", "fp32", s, fp32, PACKAGE) for s in (512, 1024, 2048)]
    made += [Kernel(RUNTIME, "MatMulInteger u8s8", "int8", s, int8, PACKAGE) for s in (512, 1024)]
    return tuple(made)
