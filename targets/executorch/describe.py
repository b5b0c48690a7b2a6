"""A .pte program's own inputs and outputs, from its ``forward`` method's metadata."""

from __future__ import annotations

from pathlib import Path

from edgekit.targets.base import FileFacts
from edgekit.targets.executorch.session import loading, runtime
from edgekit.targets.session import TensorSpec

# ExecuTorch ScalarType codes -> numpy dtype names
SCALAR_TYPES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
}


def describe(path: Path) -> FileFacts:
    bindings = runtime()
    with loading(path):
        program = bindings.Runtime.get().load_program(
            Path(path), verification=bindings.Verification.Minimal
        )
        meta = program.metadata("forward")

    def spec(tensor: object, index: int, kind: str) -> TensorSpec:
        dtype = SCALAR_TYPES.get(int(tensor.dtype()), f"scalar type {int(tensor.dtype())}")
        return TensorSpec(f"{kind}_{index}", [int(v) for v in tensor.sizes()], dtype, "")

    inputs = [spec(meta.input_tensor_meta(i), i, "input") for i in range(meta.num_inputs())]
    outputs = [spec(meta.output_tensor_meta(i), i, "output") for i in range(meta.num_outputs())]
    return FileFacts(inputs, outputs, {"methods": sorted(program.method_names)})
