"""int8 with float islands for LiteRT: ai-edge-quantizer ``static_wi8_ai8`` on the fp32 file with
one ``NO_QUANTIZE`` entry per kept module, matching exactly the op scopes of the ops the census
attributes to it (``keep_patterns``). The written file is checked: every op of a kept module
must read float activations, and a module no op comes from is an error with the reason (a regex
that matches nothing raises nothing in ai-edge-quantizer). ``details["float_ops"]`` lists what
stayed float."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UnsupportedExport, UserInputError
from edgekit.targets.base import ExportRequest
from edgekit.targets.layermap import ops_from, unmapped_reason
from edgekit.targets.tflite.converted import Converted, no_progress_bars, version
from edgekit.targets.tflite.flatbuffer import add_float_io, graph_ops

INTEGER_TYPES = ("int8", "uint8", "int16")


def keep_patterns(float_file: Path, keep_float: tuple[str, ...]) -> dict[str, str]:
    """keep path -> a regex for ai-edge-quantizer that matches exactly the op scopes (each op's
    output tensor names + ``;``) of the ops the census attributes to that module of the fp32
    file (``edgekit.targets.layermap``); a path no op comes from is refused with the reason."""
    from edgekit.targets.tflite.census import census

    ops = graph_ops(float_file)
    modules = [op.module for op in census(float_file).ops]
    patterns = {}
    for keep in keep_float:
        chosen = ops_from(keep, modules)
        if not chosen:
            raise UserInputError(
                f"tflite int8: cannot keep {keep} float: {unmapped_reason(keep, modules, 'tflite')}"
            )
        patterns[keep] = "^(" + "|".join(re.escape(ops[i].scope) for i in chosen) + ")$"
    return patterns


def signature_input(path: Path) -> tuple[str, str]:
    from edgekit.targets.tflite.session import make_interpreter

    interpreter = make_interpreter(path, xnnpack=False)
    signatures = interpreter.get_signature_list()
    name = next(iter(signatures))
    return name, signatures[name]["inputs"][0]


def static_keep_float(
    float_file: Path,
    destination: Path,
    calibration: np.ndarray,
    keep_float: tuple[str, ...],
) -> dict[str, list[str]]:
    """Static int8 of ``float_file`` except the ops of ``keep_float``; returns, per kept path,
    the float ops found in the result (UnsupportedExport when one is still quantized)."""
    from ai_edge_quantizer import qtyping
    from ai_edge_quantizer import quantizer as aeq
    from ai_edge_quantizer import recipe as recipes
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    patterns = keep_patterns(float_file, keep_float)
    quantizer = aeq.Quantizer(str(float_file))
    quantizer.load_quantization_recipe(recipes.static_wi8_ai8())
    for pattern in patterns.values():
        quantizer.update_quantization_recipe(
            regex=pattern,
            operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
            algorithm_key=AlgorithmName.NO_QUANTIZE,
        )
    signature, input_name = signature_input(float_file)
    feed = [{input_name: np.ascontiguousarray(sample[None])} for sample in calibration]
    with no_progress_bars():
        calibrated = quantizer.calibrate({signature: feed})
        result = quantizer.quantize(calibrated, enable_progress_report=False)
    destination.write_bytes(bytes(result.quantized_model))
    return verify_float_ops(destination, patterns)


def verify_float_ops(path: Path, patterns: dict[str, str]) -> dict[str, list[str]]:
    """Never report an exclusion that did not happen: every op a kept module made must read
    float activations in the written file."""
    ops = graph_ops(path)
    found: dict[str, list[str]] = {}
    for keep, pattern in patterns.items():
        mine = [op for op in ops if re.search(pattern, op.scope)]
        quantized = [op.name for op in mine if op.inputs and op.inputs[0] in INTEGER_TYPES]
        if not mine or quantized:
            raise UnsupportedExport(
                f"tflite int8: keeping '{keep}' float did not happen: "
                + (f"{', '.join(quantized)} still int8" if mine else "no op left in the file")
            )
        found[keep] = [op.name for op in mine]
    return found


def integer_io(path: Path) -> bool:
    from edgekit.targets.tflite.session import make_interpreter

    interpreter = make_interpreter(path, xnnpack=False)
    details = interpreter.get_input_details() + interpreter.get_output_details()
    return all(np.dtype(detail["dtype"]).name in INTEGER_TYPES for detail in details)


def int8_keep_float(
    request: ExportRequest,
    float_file: Path,
    to_layout: Callable[[np.ndarray], np.ndarray],
    layout: str,
    details: dict[str, Any],
    scratch: Path,
) -> Converted:
    integer_file = scratch / "int8_io.tflite"
    kept = static_keep_float(
        float_file, integer_file, to_layout(request.calibration), request.keep_float
    )
    details["quantizer"] = (
        f"ai-edge-quantizer {version('ai-edge-quantizer')} static_wi8_ai8 (per-channel int8 "
        f"weights, int8 activations, {len(request.calibration)} calibration samples) with "
        f"NO_QUANTIZE for {', '.join(request.keep_float)}"
    )
    details["keep_float"] = list(request.keep_float)
    details["float_ops"] = kept
    if request.io_dtype == "int8":
        if not integer_io(integer_file):
            raise UnsupportedExport(
                f"tflite int8: int8 input/output is not possible when keeping "
                f"{', '.join(request.keep_float)} float: a model boundary stays float32"
            )
        details["float_io"] = "none: int8 input and output"
        return Converted(integer_file, layout, details)
    result = scratch / "keep_float.tflite"
    add_float_io(integer_file, result)
    details["float_io"] = "QUANTIZE/DEQUANTIZE ops added at the boundary"
    return Converted(result, layout, details)
