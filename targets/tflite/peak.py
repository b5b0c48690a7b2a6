"""LiteRT's peak kernels (see ``edgekit.measure.peak``): XNNPACK's fp32 and qs8 GEMMs as LiteRT
runs them, a one-op ``FULLY_CONNECTED`` model written with LiteRT's own schema."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgekit.common.fileio import temporary_directory
from edgekit.targets.peak_kernels import Call, Kernel

PACKAGE = "ai-edge-litert"  # whose version the rates depend on
RUNTIME = "LiteRT XNNPACK"


def fully_connected_tflite(arithmetic: str, size: int) -> bytes:
    """A one-op .tflite: ``FULLY_CONNECTED`` of a [size, size] input by [size, size] weights,
    fp32, or int8 throughout (per-tensor scales, int32 bias), written with LiteRT's schema."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    rng = np.random.default_rng(0)
    int8 = arithmetic == "int8"
    kind = schema.TensorType.INT8 if int8 else schema.TensorType.FLOAT32
    buffers = [schema.BufferT()]  # buffer 0: the empty buffer of tensors without data

    def tensor(
        name: str,
        shape: tuple[int, ...],
        data: np.ndarray | None = None,
        scale: float | None = None,
        kind: int = kind,
    ) -> schema.TensorT:
        made = schema.TensorT(shape=list(shape), type=kind, name=name)
        if data is not None:
            buffer = schema.BufferT(data=np.frombuffer(data.tobytes(), np.uint8))
            buffers.append(buffer)
            made.buffer = len(buffers) - 1
        if scale is not None:
            made.quantization = schema.QuantizationParametersT(scale=[scale], zeroPoint=[0])
        return made

    if int8:
        weights = rng.integers(-127, 127, (size, size), dtype=np.int8)
        tensors = [
            tensor("x", (size, size), scale=0.05),
            tensor("w", (size, size), weights, scale=0.01),
            tensor("b", (size,), np.zeros(size, np.int32), 0.0005, schema.TensorType.INT32),
            tensor("y", (size, size), scale=1.0),
        ]
    else:
        weights = rng.standard_normal((size, size), dtype=np.float32)
        tensors = [tensor("x", (size, size)), tensor("w", (size, size), weights)]
        tensors.append(tensor("y", (size, size)))
    code = schema.BuiltinOperator.FULLY_CONNECTED
    opcode = schema.OperatorCodeT(
        deprecatedBuiltinCode=code, builtinCode=code, version=4 if int8 else 1
    )  # version 4: the int8 FULLY_CONNECTED
    operator = schema.OperatorT(
        opcodeIndex=0,
        inputs=[0, 1, 2 if int8 else -1],
        outputs=[len(tensors) - 1],
        builtinOptionsType=schema.BuiltinOptions.FullyConnectedOptions,
        builtinOptions=schema.FullyConnectedOptionsT(),
    )
    graph = schema.SubGraphT(
        tensors=tensors, inputs=[0], outputs=[len(tensors) - 1], operators=[operator]
    )
    model = schema.ModelT(
        version=3,
        operatorCodes=[opcode],
        subgraphs=[graph],
        buffers=buffers,
        description="edgekit matmul peak",
    )
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _litert(arithmetic: str) -> Callable[[int, int], Call]:
    def prepare(size: int, threads: int) -> Call:
        from edgekit.targets.tflite.session import delegated_nodes, make_interpreter

        with temporary_directory("edgekit-peak-") as tmp:
            path = tmp / f"fc-{arithmetic}-{size}.tflite"
            path.write_bytes(fully_connected_tflite(arithmetic, size))
            interpreter = make_interpreter(path, threads=threads)  # XNNPACK, as rows run it
        if not delegated_nodes(interpreter)[1]:
            raise RuntimeError("XNNPACK did not take the FULLY_CONNECTED op")
        detail = interpreter.get_input_details()[0]
        dtype = np.int8 if arithmetic == "int8" else np.float32
        interpreter.set_tensor(detail["index"], np.ones(detail["shape"], dtype))
        return interpreter.invoke

    return prepare


def kernels() -> tuple[Kernel, ...]:
    """fp32 and qs8 ``FULLY_CONNECTED``, each at 512^3 and 1024^3."""
    made = [
        Kernel(RUNTIME, "FULLY_CONNECTED", "fp32", s, _litert("fp32"), PACKAGE) for s in (512, 1024)
    ]
    made += [
        Kernel(RUNTIME, "FULLY_CONNECTED qs8", "int8", s, _litert("int8"), PACKAGE)
        for s in (512, 1024)
    ]
    return tuple(made)
