"""Reading and rewriting .tflite flatbuffers with LiteRT's own schema and flatbuffer utilities."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import UnsupportedExport


@dataclass(frozen=True)
class Op:
    name: str
    inputs: tuple[str | None, ...]  # tensor dtypes, None for an omitted optional input
    outputs: tuple[str, ...]
    scope: str = ""  # ai-edge-quantizer's op scope: the output tensor names, each + ";"
    produces_output: bool = False  # writes a graph output


def _names(schema: Any) -> tuple[dict[int, str], dict[int, str]]:
    ops = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    return ops, types


def graph_ops(path: Path) -> list[Op]:
    """The operators of the main subgraph of a .tflite file, in order, with their tensor dtypes
    and the op scopes litert-torch writes (module paths, read by keep_float and layer errors).
    Read with the generated read-only API: no copy of the weight buffers."""
    from ai_edge_litert import schema_py_generated as schema

    buffer = Path(path).read_bytes()
    model = schema.Model.GetRootAs(buffer, 0)
    graph = model.Subgraphs(0)
    op_names, type_names = _names(schema)
    outputs = {int(i) for i in graph.OutputsAsNumpy()} if graph.OutputsLength() else set()

    def dtype(index: int) -> str | None:
        return type_names.get(graph.Tensors(index).Type(), "?") if index >= 0 else None

    ops = []
    for position in range(graph.OperatorsLength()):
        op = graph.Operators(position)
        code = model.OperatorCodes(op.OpcodeIndex())
        # builtin codes above 127 live in BuiltinCode; older files only set the deprecated byte
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = op_names.get(builtin, str(builtin))
        if name == "CUSTOM":
            name = "CUSTOM:" + (code.CustomCode() or b"?").decode()
        inputs = tuple(dtype(int(i)) for i in op.InputsAsNumpy()) if op.InputsLength() else ()
        outs = [int(i) for i in op.OutputsAsNumpy() if i >= 0] if op.OutputsLength() else []
        names = [(graph.Tensors(i).Name() or b"").decode() for i in outs]
        ops.append(
            Op(
                name,
                inputs,
                tuple(dtype(i) or "?" for i in outs),
                ";".join(names) + (";" if names else ""),
                any(i in outputs for i in outs),
            )
        )
    return ops


def add_float_io(source: Path, destination: Path) -> None:
    """Give an integer-I/O model float32 I/O: QUANTIZE in front, DEQUANTIZE behind.

    litert-torch's PT2E conversion folds the boundary quantize/dequantize into int8 I/O tensors
    and has no option to keep them; this puts them back as ops, the form tf.lite produces for a
    full-integer model with float I/O.
    """
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(source))
    graph = model.subgraphs[0]
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise UnsupportedExport(
            f"tflite int8: float I/O needs one input and one output, the model has "
            f"{len(graph.inputs)} and {len(graph.outputs)}"
        )

    def opcode(builtin: int, version: int) -> int:
        for index, code in enumerate(model.operatorCodes):
            if max(code.builtinCode, code.deprecatedBuiltinCode) == builtin:
                return index
        code = schema.OperatorCodeT()
        code.builtinCode = builtin
        code.deprecatedBuiltinCode = min(builtin, 127)
        code.version = version  # QUANTIZE v2 writes int8, DEQUANTIZE v2 reads int8
        model.operatorCodes.append(code)
        return len(model.operatorCodes) - 1

    def float_tensor(like: Any, name: str) -> int:
        tensor = schema.TensorT()
        tensor.shape = list(like.shape)
        tensor.type = schema.TensorType.FLOAT32
        tensor.name = name.encode()
        tensor.buffer = 0  # the empty buffer: an activation, no data
        graph.tensors.append(tensor)
        return len(graph.tensors) - 1

    old_input, old_output = graph.inputs[0], graph.outputs[0]
    new_input, new_output = old_input, old_output
    front, back = [], []
    # a side that is float already (a float island at the boundary, keep_float) stays as it is
    if graph.tensors[old_input].type != schema.TensorType.FLOAT32:
        new_input = float_tensor(graph.tensors[old_input], "input_float32")
        quantize = schema.OperatorT()
        quantize.opcodeIndex = opcode(schema.BuiltinOperator.QUANTIZE, 2)
        quantize.inputs, quantize.outputs = [new_input], [old_input]
        front.append(quantize)
    if graph.tensors[old_output].type != schema.TensorType.FLOAT32:
        new_output = float_tensor(graph.tensors[old_output], "output_float32")
        dequantize = schema.OperatorT()
        dequantize.opcodeIndex = opcode(schema.BuiltinOperator.DEQUANTIZE, 2)
        dequantize.inputs, dequantize.outputs = [old_output], [new_output]
        back.append(dequantize)
    graph.operators = [*front, *graph.operators, *back]
    graph.inputs, graph.outputs = [new_input], [new_output]
    for signature in model.signatureDefs or []:
        for entry in signature.inputs or []:
            if entry.tensorIndex == old_input:
                entry.tensorIndex = new_input
        for entry in signature.outputs or []:
            if entry.tensorIndex == old_output:
                entry.tensorIndex = new_output
    flatbuffer_utils.write_model(model, str(destination))
