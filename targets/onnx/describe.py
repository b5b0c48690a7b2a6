"""An .onnx file's own inputs and outputs (graph inputs that are not initializers)."""

from __future__ import annotations

from pathlib import Path

from edgekit.errors import UserInputError, first_line
from edgekit.targets.base import FileFacts
from edgekit.targets.session import TensorSpec


def describe(path: Path) -> FileFacts:
    import onnx
    from onnx import helper

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError, or anything a truncated file provokes
        raise UserInputError(f"{path}: not a readable ONNX file ({first_line(exc)})") from None
    graph = model.graph
    if not graph.node:
        raise UserInputError(f"{path}: not an ONNX model (no graph nodes)")
    constants = {init.name for init in graph.initializer}

    def spec(value: object) -> TensorSpec:
        kind = value.type
        if not kind.HasField("tensor_type"):
            return TensorSpec(value.name, [], kind.WhichOneof("value") or "?", "")
        elem = kind.tensor_type.elem_type
        dtype = (
            "string"
            if elem == onnx.TensorProto.STRING
            else (helper.tensor_dtype_to_np_dtype(elem).name)
        )
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in kind.tensor_type.shape.dim]
        return TensorSpec(value.name, dims, dtype, "")

    inputs = [spec(value) for value in graph.input if value.name not in constants]
    outputs = [spec(value) for value in graph.output]
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    facts = {
        "opset": opset,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "ir_version": model.ir_version,
    }
    return FileFacts(inputs, outputs, facts)
