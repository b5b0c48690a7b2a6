"""A .tflite file's own inputs and outputs, read with LiteRT (builtin kernels: no delegate)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgekit.errors import UserInputError
from edgekit.targets.base import FileFacts
from edgekit.targets.tflite.session import make_interpreter, tensor_specs


def describe(path: Path) -> FileFacts:
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head[4:8] != b"TFL3":  # the flatbuffer file identifier every .tflite carries
        raise UserInputError(f"{path}: not a readable .tflite file (no TFL3 identifier)")
    interpreter = make_interpreter(Path(path), xnnpack=False)
    inputs, outputs = tensor_specs(interpreter, "NHWC")
    # LiteRT reports a dynamic dimension as 1 in "shape" and -1 in "shape_signature"
    dynamic = []
    for spec, detail in zip(inputs, interpreter.get_input_details(), strict=True):
        signature = [int(v) for v in detail.get("shape_signature", detail["shape"])]
        shape = [-1 if s == -1 else d for s, d in zip(signature, spec.shape, strict=True)]
        dynamic.append(replace(spec, shape=shape))
    inputs = dynamic
    signatures = interpreter.get_signature_list()
    return FileFacts(inputs, outputs, {"signatures": sorted(signatures)})
