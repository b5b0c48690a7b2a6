"""TFLite target: litert-torch or tf.lite conversion, ai-edge-quantizer, LiteRT runtime.

How each recipe is made (litert-torch 0.10.0, ai-edge-quantizer 0.10.0, tensorflow 2.21):

- torch sources go through ``litert_torch.convert``. The module is first wrapped with
  ``litert_torch.to_channel_last_io(module, args=[0])`` so that the artifact takes NHWC input:
  without it the graph starts with an NCHW->NHWC TRANSPOSE (a RESHAPE when C == 1). The input
  TensorSpec says which layout the file really has.
- ``int8`` (torch): litert-torch's ``PT2EQuantizer`` with per-channel symmetric weights,
  calibrated by :func:`edgekit.quantize.pt2e.quantize_pt2e` (``fold=False``), converted with
  ``QuantConfig(pt2e_quantizer=...)``. litert-torch always gives such a model **int8** input and
  output (it folds the graph's first quantize and last dequantize into the boundary tensors) and
  has no option to keep them float. For the default float I/O this target rewrites the flatbuffer:
  a float32 input tensor feeding a QUANTIZE op and a DEQUANTIZE op feeding a float32 output,
  exactly the boundary tf.lite gives a full-integer model with float I/O; XNNPACK delegates both.
  ai-edge-quantizer's ``static_wi8_ai8`` on the fp32 .tflite was tried instead: it also gives int8
  I/O, and 7 dB less output SQNR on digits-mobilenet (18 vs 26 dB).
- ``int8`` with ``keep_float`` (torch): litert-torch's converter re-quantizes an op the PT2E
  graph left float (and its PT2EQuantizer's module-name filter never matches in torch 2.13), so
  the fp32 .tflite goes through ai-edge-quantizer ``static_wi8_ai8`` with one ``NO_QUANTIZE``
  entry per kept module, matched on the op scope litert-torch writes (:func:`module_regex`),
  then gets float I/O as above. The written file is checked: every op of a kept module must read
  float activations, and an unknown module path is an error (a regex that matches nothing
  raises nothing in ai-edge-quantizer). ``details["float_ops"]`` lists what stayed float.
- ``int8-dynamic`` (torch): ai-edge-quantizer ``recipe.dynamic_wi8_afp32()`` on the fp32 file.
  XNNPACK runs the dynamically quantized CONV_2D/FULLY_CONNECTED, but not DEPTHWISE_CONV_2D with
  int8 weights: those stay on the builtin hybrid kernels (coverage lists them as fallback).
- ``fp16`` (torch): ai-edge-quantizer's weight-only recipe with the ``FLOAT_CASTING`` algorithm
  and 16 bits (0.10.0 has no ready-made fp16 recipe): fp16 weights behind DEQUANTIZE ops, which
  XNNPACK folds into fp32 weights at load time.
- Keras sources (NHWC already) go through ``tf.lite.TFLiteConverter.from_saved_model`` on a
  SavedModel exported with a batch-1 input signature and ``training=False``.
  ``from_keras_model`` would keep a dynamic batch dimension; ``from_concrete_functions`` keeps
  resource variables (VAR_HANDLE/READ_VARIABLE) and can't be calibrated.

Sessions: device ``cpu`` is ``ai_edge_litert.interpreter.Interpreter`` whose default (AUTO) op
resolver applies XNNPACK; ``open(..., xnnpack=False)`` runs the builtin kernels instead. Device
``gpu`` is ``CompiledModel`` with the GPU (WebGPU over Vulkan) accelerator, CPU for the rest.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import os
import re
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.devices.gpu import gpu_label, software_vulkan
from edgekit.errors import DeviceUnavailable, UnsupportedExport, UserInputError
from edgekit.models import SourceModel
from edgekit.native import quiet_native as _quiet_native
from edgekit.quantize.recipes import RECIPES
from edgekit.targets import register
from edgekit.targets.base import Coverage, ExportInfo, ExportRequest, Session, Target, TensorSpec

FRAMEWORKS = ("torch", "keras")
IO_DTYPES = ("float32", "int8")

# Ops that do arithmetic on activations: the denominator of Coverage.int8_ops.
COMPUTE_OPS = frozenset(
    {
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "TRANSPOSE_CONV",
        "CONV_3D",
        "FULLY_CONNECTED",
        "BATCH_MATMUL",
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "MEAN",
        "SUM",
        "AVERAGE_POOL_2D",
        "MAX_POOL_2D",
    }
)
INTEGER_TYPES = ("int8", "uint8", "int16")


@contextlib.contextmanager
def _quiet_python() -> Iterator[None]:
    """Silence litert-torch's progress display, stdout chatter and known library warnings."""
    previous = os.environ.get("LITERT_TORCH_SHOW_PROGRESS")
    os.environ["LITERT_TORCH_SHOW_PROGRESS"] = "n"
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", message=".*LeafSpec.*")
            warnings.filterwarnings("ignore", message=".*torch.ao.quantization.*")
            # ai-edge-quantizer's calibration keeps every tensor on purpose
            warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors.*")
            yield
    finally:
        if previous is None:
            os.environ.pop("LITERT_TORCH_SHOW_PROGRESS", None)
        else:
            os.environ["LITERT_TORCH_SHOW_PROGRESS"] = previous


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# --------------------------------------------------------------------------------------------
# Reading the flatbuffer


@dataclass(frozen=True)
class _Op:
    name: str
    inputs: tuple[str | None, ...]  # tensor dtypes, None for an omitted optional input
    outputs: tuple[str, ...]


def graph_ops(path: Path) -> list[_Op]:
    """The operators of the main subgraph of a .tflite file, in order, with their tensor dtypes."""
    from ai_edge_litert import schema_py_generated as schema

    buffer = Path(path).read_bytes()
    model = schema.Model.GetRootAs(buffer, 0)
    graph = model.Subgraphs(0)
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}

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
        outputs = tuple(dtype(int(i)) for i in op.OutputsAsNumpy()) if op.OutputsLength() else ()
        ops.append(_Op(name, inputs, outputs))
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


# --------------------------------------------------------------------------------------------
# The interpreter


def _interpreter_module() -> tuple[Any, str]:
    try:
        from ai_edge_litert import interpreter

        return interpreter, "ai-edge-litert"
    except ImportError:  # the deprecated standalone runtime (numpy<2 only)
        from tflite_runtime import interpreter

        return interpreter, "tflite-runtime"


def make_interpreter(path: Path, threads: int = 1, xnnpack: bool = True) -> Any:
    """An allocated Interpreter; with ``xnnpack`` its default resolver applies XNNPACK."""
    module, _ = _interpreter_module()
    resolver = (
        module.OpResolverType.AUTO
        if xnnpack
        else module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    with _quiet_native():
        interpreter = module.Interpreter(
            model_path=str(path), num_threads=threads, experimental_op_resolver_type=resolver
        )
        interpreter.allocate_tensors()  # the default delegate is applied here
    return interpreter


def delegated_nodes(interpreter: Any) -> tuple[set[int], int]:
    """(indices of the model's ops a delegate took, number of delegate partitions).

    After delegation the node list holds the original ops followed by one DELEGATE node per
    partition; the execution plan (not exposed to Python) skips the ops a partition replaced.
    A partition is a convex subgraph, so its ops are exactly those reached walking back from
    the DELEGATE node's outputs through producers until its inputs.
    """
    details = interpreter._get_ops_details()
    delegates = [op for op in details if op["op_name"] == "DELEGATE"]
    producer = {}
    for op in details:
        if op["op_name"] != "DELEGATE":
            for tensor in op["outputs"]:
                producer[int(tensor)] = op["index"]
    replaced: set[int] = set()
    for delegate in delegates:
        boundary = {int(tensor) for tensor in delegate["inputs"]}
        pending = [int(tensor) for tensor in delegate["outputs"]]
        while pending:
            tensor = pending.pop()
            node = producer.get(tensor)
            if tensor in boundary or node is None or node in replaced:
                continue
            replaced.add(node)
            pending.extend(int(t) for t in details[node]["inputs"] if t >= 0)
    return replaced, len(delegates)


def _quantization(detail: dict[str, Any]) -> dict[str, float] | None:
    if np.dtype(detail["dtype"]).name not in INTEGER_TYPES:
        return None
    scale, zero_point = detail["quantization"]
    return {"scale": float(scale), "zero_point": int(zero_point)}


def io_specs(path: Path, layout: str) -> tuple[TensorSpec, TensorSpec]:
    """The input and output TensorSpec of a .tflite, read from the file."""
    interpreter = make_interpreter(path, xnnpack=False)
    specs = []
    for detail, tensor_layout in (
        (interpreter.get_input_details()[0], layout),
        (interpreter.get_output_details()[0], "NC"),
    ):
        specs.append(
            TensorSpec(
                name=str(detail["name"]),
                shape=[int(v) for v in detail["shape"]],
                dtype=np.dtype(detail["dtype"]).name,
                layout=tensor_layout,
                quantization=_quantization(detail),
            )
        )
    return specs[0], specs[1]


# --------------------------------------------------------------------------------------------
# Sessions


def _input_layout(manifest: dict[str, Any]) -> str:
    # NHWC unless the manifest says otherwise: only a failed channel-last wrap leaves NCHW
    return str(manifest.get("input", {}).get("layout", "NHWC"))


class _Boundary:
    """Layout and quantization at the model boundary, shared by both sessions."""

    def __init__(self, input_spec: TensorSpec, output_spec: TensorSpec):
        self.nhwc = input_spec.layout == "NHWC"
        self.input = input_spec
        self.output_spec = output_spec
        self.input_dtype = np.dtype(input_spec.dtype)

    def stage(self, sample: np.ndarray) -> np.ndarray:
        x = np.asarray(sample, dtype=np.float32)
        if self.nhwc:
            x = x.transpose(0, 2, 3, 1)
        if list(x.shape) != self.input.shape:
            raise UserInputError(
                f"tflite: sample of shape {list(sample.shape)} (NCHW) does not fit the model "
                f"input {self.input.shape} ({self.input.layout})"
            )
        quant = self.input.quantization
        if quant is not None:
            info = np.iinfo(self.input_dtype)
            scaled = x / quant["scale"]
            # round half away from zero, as LiteRT's QUANTIZE does (np.round goes to even)
            rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + quant["zero_point"]
            x = np.clip(rounded, info.min, info.max)
        return np.ascontiguousarray(x, dtype=self.input_dtype)

    def output(self, raw: np.ndarray) -> np.ndarray:
        quant = self.output_spec.quantization
        values = np.asarray(raw)
        if quant is not None:
            values = (values.astype(np.float32) - quant["zero_point"]) * quant["scale"]
        return values.reshape(1, -1).astype(np.float32)


class InterpreterSession(Session):
    """LiteRT Interpreter on the CPU: XNNPACK (default delegate) or the builtin kernels."""

    def __init__(self, path: Path, manifest: dict[str, Any], threads: int, xnnpack: bool):
        _, runtime = _interpreter_module()
        self._interpreter = make_interpreter(path, threads=threads, xnnpack=xnnpack)
        input_detail = self._interpreter.get_input_details()[0]
        output_detail = self._interpreter.get_output_details()[0]
        self._input_index = input_detail["index"]
        self._output_index = output_detail["index"]
        self._boundary = _Boundary(*io_specs(path, _input_layout(manifest)))
        replaced, partitions = delegated_nodes(self._interpreter)
        total = len(self._interpreter._get_ops_details()) - partitions
        kernels = "builtin"
        if partitions:
            kernels = "XNNPACK" if len(replaced) == total else "XNNPACK + builtin"
        self.info = {
            "runtime": f"LiteRT Interpreter ({runtime} {_version(runtime)})",
            "delegate": "XNNPACK" if xnnpack else None,
            "delegate_applied": partitions > 0,
            "delegate_partitions": partitions,
            "delegated_ops": f"{len(replaced)}/{total}",
            "kernels": kernels,
            "threads": threads,
            "device": "cpu",
            "input_dtype": self._boundary.input.dtype,
        }

    def stage(self, sample: np.ndarray) -> np.ndarray:
        return self._boundary.stage(sample)

    def invoke(self, staged: np.ndarray) -> np.ndarray:
        self._interpreter.set_tensor(self._input_index, staged)
        self._interpreter.invoke()
        return self._interpreter.get_tensor(self._output_index)

    def output(self, raw: np.ndarray) -> np.ndarray:
        return self._boundary.output(raw)

    def close(self) -> None:
        self._interpreter = None


def _gpu_reason(lines: list[str]) -> str:
    """The runtime's own words for why the GPU accelerator could not be made."""
    wanted = re.compile(r"adapter|driver|vkCreateInstance|WebGPU environment|OpenCL", re.I)
    prefix = re.compile(r"^(ERROR|WARNING|Warning|[EW]\d{4} [^\]]*\])[:\s]*(\[[^\]]*\])?\s*")
    found = [
        prefix.sub("", line.strip())
        for line in lines
        if wanted.search(line) and not line.startswith(("INFO", "I0000"))
    ]
    found = [line for line in found if line and not line.startswith(("third_party", "==="))]
    reason = "; ".join(list(dict.fromkeys(found))[:3]) or "the GPU accelerator could not be created"
    return (
        f"tflite gpu: LiteRT's GPU accelerator (WebGPU over Vulkan) is unavailable: {reason} "
        "(install a Vulkan driver, e.g. mesa-vulkan-drivers for the lavapipe software device)"
    )


class CompiledModelSession(Session):
    """LiteRT CompiledModel with the GPU accelerator; ops it can't take fall back to the CPU."""

    def __init__(self, path: Path, manifest: dict[str, Any], threads: int):
        try:
            from ai_edge_litert.compiled_model import CompiledModel
            from ai_edge_litert.cpu_options import CpuOptions
            from ai_edge_litert.hardware_accelerator import HardwareAccelerator
            from ai_edge_litert.options import Options
        except ImportError as exc:
            raise DeviceUnavailable(f"tflite gpu: no LiteRT CompiledModel API: {exc}") from None
        options = Options(
            hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
            cpu_options=CpuOptions(num_threads=threads),
        )
        model = None
        with _quiet_native() as log:
            try:
                model = CompiledModel.from_file(str(path), options=options)
            except RuntimeError:
                log.echo = False  # the reason goes into the exception instead
        if model is None:
            raise DeviceUnavailable(_gpu_reason(log.lines))
        self._model = model
        self._boundary = _Boundary(*io_specs(path, _input_layout(manifest)))
        self._inputs = model.create_input_buffers(0)
        self._outputs = model.create_output_buffers(0)
        self._output_size = int(np.prod(self._boundary.output_spec.shape))
        self._output_dtype = np.dtype(self._boundary.output_spec.dtype)
        with _quiet_native():  # the first run sets the GPU up (and logs the NPU probe)
            self.invoke(np.zeros(self._boundary.input.shape, self._boundary.input_dtype))
        self.info = {
            "runtime": f"LiteRT CompiledModel (ai-edge-litert {_version('ai-edge-litert')})",
            "delegate": "GPU (WebGPU)",
            "delegate_applied": True,
            "software_vulkan": software_vulkan(),
            "gpu": gpu_label(),
            "fully_accelerated": model.is_fully_accelerated(),
            "threads": threads,
            "device": "gpu",
            "input_dtype": self._boundary.input.dtype,
        }

    def stage(self, sample: np.ndarray) -> np.ndarray:
        return self._boundary.stage(sample)

    def invoke(self, staged: np.ndarray) -> np.ndarray:
        self._inputs[0].write(staged)
        self._model.run_by_index(0, self._inputs, self._outputs)
        return self._outputs[0].read(self._output_size, self._output_dtype)

    def output(self, raw: np.ndarray) -> np.ndarray:
        return self._boundary.output(raw)

    def close(self) -> None:
        with _quiet_native():  # the accelerators log their destruction
            self._inputs = self._outputs = []
            self._model = None


# --------------------------------------------------------------------------------------------
# Export


@dataclass
class _Artifact:
    file: Path  # in the scratch directory; export() moves it to request.output
    layout: str  # of the file's input tensor
    details: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _aeq_quantize(float_model: Path, destination: Path, recipe: str) -> str:
    """Apply an ai-edge-quantizer recipe to a float .tflite; returns the recipe's name."""
    from ai_edge_quantizer import qtyping, recipe_manager
    from ai_edge_quantizer import quantizer as aeq
    from ai_edge_quantizer import recipe as recipes
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    if recipe == "int8-dynamic":
        name, quant_recipe = "dynamic_wi8_afp32", recipes.dynamic_wi8_afp32()
    else:  # fp16: weight-only float casting, 0.10.0 ships no ready-made recipe for it
        manager = recipe_manager.RecipeManager()
        manager.add_weight_only_config(
            regex=".*",
            operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
            num_bits=16,
            algorithm_key=AlgorithmName.FLOAT_CASTING,
        )
        name, quant_recipe = "weight_only float_casting 16-bit", manager.get_quantization_recipe()
    quantizer = aeq.Quantizer(str(float_model))
    quantizer.load_quantization_recipe(quant_recipe)
    result = quantizer.quantize(enable_progress_bar=False, enable_progress_report=False)
    destination.write_bytes(bytes(result.quantized_model))
    return f"ai-edge-quantizer {_version('ai-edge-quantizer')} {name}"


class _TorchExporter:
    """torch source -> .tflite through litert-torch."""

    def __init__(self, request: ExportRequest, scratch: Path):
        self.request = request
        self.scratch = scratch

    def run(self) -> _Artifact:
        try:
            return self._convert(channel_last=True)
        except UnsupportedExport:
            raise
        except Exception as exc:  # the wrapper is an optimisation: retry without it
            artifact = self._convert(channel_last=False)
            artifact.warnings.append(
                f"to_channel_last_io failed ({_first_line(exc)}); the input stays NCHW and the "
                "graph starts with a layout transpose"
            )
            return artifact

    def _convert(self, channel_last: bool) -> _Artifact:
        import litert_torch
        import torch

        request = self.request
        module = request.source.module.eval()

        def to_layout(batch: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(batch.transpose(0, 2, 3, 1) if channel_last else batch)

        if channel_last:
            module = litert_torch.to_channel_last_io(module, args=[0]).eval()
        example = to_layout(request.source.example_input())
        layout = "NHWC" if channel_last else "NCHW"
        details: dict[str, Any] = {
            "converter": f"litert-torch {_version('litert-torch')}",
            "channel_last_io": channel_last,
            "io_dtype": request.io_dtype,
            "quantizer": None,
        }
        float_file = self.scratch / "fp32.tflite"
        if request.recipe == "int8" and request.keep_float:
            return self._int8_keep_float(module, example, to_layout, layout, details)
        if request.recipe == "int8":
            from litert_torch.quantize.pt2e_quantizer import (
                PT2EQuantizer,
                get_symmetric_quantization_config,
            )
            from litert_torch.quantize.quant_config import QuantConfig

            from edgekit.quantize.pt2e import quantize_pt2e

            quantizer = PT2EQuantizer().set_global(
                get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False)
            )
            converted = quantize_pt2e(
                module, example, quantizer, to_layout(request.calibration), fold=False
            )
            # the graph was traced from the eval-mode module; the flag is stale and only makes
            # litert-torch warn "converted in training mode"
            for submodule in converted.modules():
                submodule.training = False
            edge = litert_torch.convert(
                converted,
                (torch.from_numpy(example),),
                quant_config=QuantConfig(pt2e_quantizer=quantizer),
            )
            integer_file = self.scratch / "int8_io.tflite"
            edge.export(str(integer_file))
            details["quantizer"] = (
                "litert-torch PT2EQuantizer (per-channel symmetric int8 weights, per-tensor "
                f"int8 activations, {len(request.calibration)} calibration samples)"
            )
            if request.io_dtype == "int8":
                details["float_io"] = "none: int8 input and output"
                return _Artifact(integer_file, layout, details)
            add_float_io(integer_file, float_file)
            details["float_io"] = "QUANTIZE/DEQUANTIZE ops added at the boundary"
            return _Artifact(float_file, layout, details)
        with torch.no_grad():
            edge = litert_torch.convert(module, (torch.from_numpy(example),))
        edge.export(str(float_file))
        result = float_file
        if request.recipe in ("int8-dynamic", "fp16"):
            result = self.scratch / "quantized.tflite"
            details["quantizer"] = _aeq_quantize(float_file, result, request.recipe)
        return _Artifact(result, layout, details)

    def _int8_keep_float(
        self, module: Any, example: np.ndarray, to_layout: Any, layout: str, details: dict
    ) -> _Artifact:
        """int8 with float islands: ai-edge-quantizer ``static_wi8_ai8`` on the fp32 file with
        one ``NO_QUANTIZE`` entry per kept module. (litert-torch's PT2E path cannot do it: its
        converter re-quantizes an op the PT2E graph left float.)"""
        import litert_torch
        import torch

        request = self.request
        float_file = self.scratch / "fp32.tflite"
        with torch.no_grad():
            litert_torch.convert(module, (torch.from_numpy(example),)).export(str(float_file))
        output_module = _output_module(request.source.module, request.source.example_input())
        integer_file = self.scratch / "int8_io.tflite"
        kept = _aeq_static_keep_float(
            float_file,
            integer_file,
            to_layout(request.calibration),
            request.keep_float,
            output_module,
        )
        details["quantizer"] = (
            f"ai-edge-quantizer {_version('ai-edge-quantizer')} static_wi8_ai8 (per-channel int8 "
            f"weights, int8 activations, {len(request.calibration)} calibration samples) with "
            f"NO_QUANTIZE for {', '.join(request.keep_float)}"
        )
        details["keep_float"] = list(request.keep_float)
        details["float_ops"] = kept
        result = self.scratch / "keep_float.tflite"
        if request.io_dtype == "int8":
            if not _integer_io(integer_file):
                raise UnsupportedExport(
                    f"tflite int8: int8 input/output is not possible when keeping "
                    f"{', '.join(request.keep_float)} float: a model boundary stays float32"
                )
            details["float_io"] = "none: int8 input and output"
            return _Artifact(integer_file, layout, details)
        add_float_io(integer_file, result)
        details["float_io"] = "QUANTIZE/DEQUANTIZE ops added at the boundary"
        return _Artifact(result, layout, details)


def module_regex(path: str) -> str:
    """A regex for ai-edge-quantizer's op scope (the op's output tensor names + ``;``) that
    matches the ops litert-torch made from torch module ``path`` or its children.

    litert-torch names a tensor ``Root/Cls_a/Cls_b/Cls_leaf;N``; a fused op joins the names of
    the ops it absorbed with ``;;`` (activation first, the conv last, sometimes a neighbour's
    activation in between), so only the last name decides. The root may be the channel-last
    wrapper plus ``Cls_wrapped``. A wrong regex matches nothing and raises nothing, which is why
    :func:`_aeq_static_keep_float` checks every kept module matched an op.
    """
    segments = "/".join(r"[^/;]*_" + re.escape(part) for part in path.split("."))
    return r"(^|;;)[^;/]*(/[^;/]*_wrapped)?/" + segments + r"(/[^;]*)?;\d*;$"


def _output_module(module: Any, example: np.ndarray) -> str | None:
    """The torch module path of the op that produces the model's output: litert-torch names
    that tensor after the signature (``serving_default_output_0``), not after the module."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = torch.export.export(module.eval(), (torch.from_numpy(example),)).graph
    output = next(node for node in graph.nodes if node.op == "output")
    producer = output.args[0][0] if isinstance(output.args[0], (list, tuple)) else output.args[0]
    stack = producer.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else None


def _op_scopes(path: Path) -> list[tuple[str, str, tuple[str, ...], bool]]:
    """(op name, ai-edge-quantizer scope, input dtypes, produces a graph output) per op."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(path))
    graph = model.subgraphs[0]
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    outputs = set(graph.outputs)
    scopes = []
    for op in graph.operators:
        code = model.operatorCodes[op.opcodeIndex]
        name = op_names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "?")
        names = [graph.tensors[i].name.decode() for i in op.outputs if i >= 0]
        dtypes = tuple(type_names.get(graph.tensors[i].type, "?") for i in op.inputs if i >= 0)
        scope = ";".join(names) + (";" if names else "")
        scopes.append((name, scope, dtypes, any(i in outputs for i in op.outputs)))
    return scopes


def _keep_patterns(
    float_file: Path, keep_float: tuple[str, ...], output_module: str | None
) -> dict[str, str]:
    """keep path -> regex, checked against the fp32 file: every path must name some op."""
    scopes = _op_scopes(float_file)
    patterns = {}
    for keep in keep_float:
        pattern = module_regex(keep)
        if not any(re.search(pattern, scope) for _, scope, _, _ in scopes):
            owns_output = output_module is not None and (
                output_module == keep or output_module.startswith(keep + ".")
            )
            producers = [scope for _, scope, _, is_output in scopes if is_output]
            if not owns_output or len(producers) != 1:
                raise UserInputError(
                    f"tflite int8: no op of the converted model comes from module '{keep}' "
                    "(keep_float takes torch module paths such as block2.dw)"
                )
            pattern = "^" + re.escape(producers[0]) + "$"
        patterns[keep] = pattern
    return patterns


def _aeq_static_keep_float(
    float_file: Path,
    destination: Path,
    calibration: np.ndarray,
    keep_float: tuple[str, ...],
    output_module: str | None,
) -> dict[str, list[str]]:
    """Static int8 of ``float_file`` except the ops of ``keep_float``; returns, per kept path,
    the float ops found in the result (UnsupportedExport when one is still quantized)."""
    from ai_edge_quantizer import qtyping
    from ai_edge_quantizer import quantizer as aeq
    from ai_edge_quantizer import recipe as recipes
    from ai_edge_quantizer.algorithm_manager import AlgorithmName

    patterns = _keep_patterns(float_file, keep_float, output_module)
    quantizer = aeq.Quantizer(str(float_file))
    quantizer.load_quantization_recipe(recipes.static_wi8_ai8())
    for pattern in patterns.values():
        quantizer.update_quantization_recipe(
            regex=pattern,
            operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
            algorithm_key=AlgorithmName.NO_QUANTIZE,
        )
    signature, input_name = _signature_input(float_file)
    feed = [{input_name: np.ascontiguousarray(sample[None])} for sample in calibration]
    with _no_progress_bars():
        calibrated = quantizer.calibrate({signature: feed})
        result = quantizer.quantize(calibrated, enable_progress_report=False)
    destination.write_bytes(bytes(result.quantized_model))
    return _verify_float_ops(destination, patterns)


def _verify_float_ops(path: Path, patterns: dict[str, str]) -> dict[str, list[str]]:
    """Never report an exclusion that did not happen: every op a kept module made must read
    float activations in the written file."""
    scopes = _op_scopes(path)
    found: dict[str, list[str]] = {}
    for keep, pattern in patterns.items():
        ops = [(name, dtypes) for name, scope, dtypes, _ in scopes if re.search(pattern, scope)]
        quantized = [name for name, dtypes in ops if dtypes and dtypes[0] in INTEGER_TYPES]
        if not ops or quantized:
            raise UnsupportedExport(
                f"tflite int8: keeping '{keep}' float did not happen: "
                + (f"{', '.join(quantized)} still int8" if ops else "no op left in the file")
            )
        found[keep] = [name for name, _ in ops]
    return found


def _signature_input(path: Path) -> tuple[str, str]:
    interpreter = make_interpreter(path, xnnpack=False)
    signatures = interpreter.get_signature_list()
    name = next(iter(signatures))
    return name, signatures[name]["inputs"][0]


def _integer_io(path: Path) -> bool:
    interpreter = make_interpreter(path, xnnpack=False)
    details = interpreter.get_input_details() + interpreter.get_output_details()
    return all(np.dtype(detail["dtype"]).name in INTEGER_TYPES for detail in details)


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """ai-edge-quantizer's calibration draws a tqdm bar on stderr for models over 100 ops."""
    from ai_edge_quantizer.utils import progress_utils

    original = progress_utils.tqdm.tqdm

    def silent(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "disable": True})

    progress_utils.tqdm.tqdm = silent
    try:
        yield
    finally:
        progress_utils.tqdm.tqdm = original


class _KerasExporter:
    """Keras source (NHWC) -> .tflite through tf.lite.TFLiteConverter."""

    def __init__(self, request: ExportRequest, scratch: Path):
        self.request = request
        self.scratch = scratch

    def run(self) -> _Artifact:
        import tensorflow as tf

        request = self.request
        converter = tf.lite.TFLiteConverter.from_saved_model(str(self._saved_model(tf)))
        quantizer = None
        if request.recipe != "fp32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if request.recipe == "int8":
            samples = np.ascontiguousarray(request.calibration.transpose(0, 2, 3, 1))
            converter.representative_dataset = lambda: ([sample[None]] for sample in samples)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            if request.io_dtype == "int8":
                converter.inference_input_type = tf.int8
                converter.inference_output_type = tf.int8
            quantizer = (
                "TFLiteConverter full-integer (representative_dataset of "
                f"{len(samples)} samples, TFLITE_BUILTINS_INT8)"
            )
        elif request.recipe == "int8-dynamic":
            quantizer = "TFLiteConverter dynamic range (Optimize.DEFAULT)"
        elif request.recipe == "fp16":
            converter.target_spec.supported_types = [tf.float16]
            quantizer = "TFLiteConverter float16 weights (supported_types=[float16])"
        result = self.scratch / "model.tflite"
        result.write_bytes(converter.convert())
        details = {
            "converter": f"tf.lite.TFLiteConverter (tensorflow {_version('tensorflow-cpu')})",
            "channel_last_io": False,  # a Keras model is NHWC already
            "io_dtype": request.io_dtype,
            "quantizer": quantizer,
        }
        return _Artifact(result, "NHWC", details)

    def _saved_model(self, tf: Any) -> Path:
        """A SavedModel of ``model(x, training=False)`` with a batch-1 input signature."""
        import functools

        import keras

        model = self.request.source.module
        height, width = self.request.source.preprocess.input_size
        channels = self.request.source.preprocess.channels
        archive = keras.export.ExportArchive()
        archive.track(model)
        archive.add_endpoint(
            "serve",
            functools.partial(model.__call__, training=False),
            [tf.TensorSpec([1, height, width, channels], tf.float32, name="input")],
        )
        directory = self.scratch / "saved_model"
        archive.write_out(str(directory), verbose=False)
        return directory


def _summarize(ops: list[_Op], replaced: set[int], partitions: int, recipe: str) -> str:
    fallback = Counter(op.name for index, op in enumerate(ops) if index not in replaced)
    parts = [f"{len(replaced)}/{len(ops)} ops in {partitions} XNNPACK partition(s)"]
    if fallback:
        parts.append("not delegated: " + ", ".join(f"{n} x{c}" for n, c in fallback.items()))
    if recipe in ("int8", "int8-dynamic"):
        floats = Counter(op.name for op in ops if op.name in COMPUTE_OPS and not _runs_int8(op))
        if floats:
            parts.append("float compute ops: " + ", ".join(f"{n} x{c}" for n, c in floats.items()))
        boundary = sum(op.name in ("QUANTIZE", "DEQUANTIZE") for op in ops)
        parts.append(f"{boundary} QUANTIZE/DEQUANTIZE ops")
    return "; ".join(parts)


def _runs_int8(op: _Op) -> bool:
    """Integer activations (static), or int8 weights on float activations (dynamic range: the
    kernel quantizes the activations at run time and computes in int8)."""
    activation = op.inputs[0] if op.inputs else None
    if activation in INTEGER_TYPES:
        return True
    weight = op.inputs[1] if len(op.inputs) > 1 else None
    return activation == "float32" and weight == "int8" and op.name not in ("ADD", "SUB", "MUL")


@register
class TFLiteTarget(Target):
    """TFLite / LiteRT: litert-torch (torch) or tf.lite (Keras), run by the LiteRT runtime."""

    name = "tflite"
    suffix = ".tflite"
    runtime = "LiteRT"

    def unsupported_reason(
        self, recipe: str, source: SourceModel, io_dtype: str = "float32"
    ) -> str | None:
        if recipe not in RECIPES:
            return f"tflite: unknown recipe '{recipe}' (have {', '.join(RECIPES)})"
        if source.framework not in FRAMEWORKS:
            return f"tflite {recipe}: no converter for {source.framework} models (torch, keras)"
        if io_dtype not in IO_DTYPES:
            return f"tflite {recipe}: io_dtype '{io_dtype}' is not one of {', '.join(IO_DTYPES)}"
        if io_dtype == "int8" and recipe != "int8":
            return (
                f"tflite {recipe}: int8 input/output needs the int8 (static) recipe; {recipe} "
                "keeps float32 tensors at the model boundary"
            )
        return None

    def export(self, request: ExportRequest) -> ExportInfo:
        reason = self.unsupported_reason(request.recipe, request.source, request.io_dtype)
        if reason:
            raise UnsupportedExport(reason)
        if request.recipe == "int8" and request.calibration is None:
            raise UserInputError("tflite int8: static quantization needs calibration data")
        if request.keep_float and request.recipe == "int8" and request.source.framework != "torch":
            raise UnsupportedExport(
                f"tflite int8: keeping {', '.join(request.keep_float)} in float needs a torch "
                "source (layers are named by torch module path); tf.lite re-quantizes a float op "
                "left between dequantize and quantize"
            )
        if request.keep_float and request.recipe != "int8":
            raise UnsupportedExport(
                f"tflite {request.recipe}: keep_float applies to the int8 recipe only"
            )
        output = Path(request.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=output.parent, prefix=".tflite-") as scratch:
            exporter = (_TorchExporter if request.source.framework == "torch" else _KerasExporter)(
                request, Path(scratch)
            )
            try:
                with _quiet_python(), _quiet_native():
                    artifact = exporter.run()
            except (UnsupportedExport, UserInputError):
                raise
            except Exception as exc:
                converter = "litert-torch" if request.source.framework == "torch" else "tf.lite"
                raise UnsupportedExport(
                    f"tflite {request.recipe}: {converter} could not convert "
                    f"{request.source.name}: {type(exc).__name__}: {_first_line(exc)}"
                ) from exc
            os.replace(artifact.file, output)
        input_spec, output_spec = io_specs(output, artifact.layout)
        ops = graph_ops(output)
        artifact.details["transposes"] = sum(op.name == "TRANSPOSE" for op in ops)
        artifact.details["ops"] = len(ops)
        return ExportInfo(input_spec, output_spec, artifact.details, artifact.warnings)

    def open(
        self,
        path: Path,
        manifest: dict[str, Any],
        device: str = "cpu",
        threads: int = 1,
        xnnpack: bool = True,
    ) -> Session:
        """``xnnpack=False`` runs the builtin kernels without LiteRT's default delegate."""
        if device == "cpu":
            return InterpreterSession(Path(path), manifest, threads, xnnpack)
        if device == "gpu":
            return CompiledModelSession(Path(path), manifest, threads)
        raise DeviceUnavailable(f"tflite: unknown device '{device}' (cpu, gpu)")

    def coverage(self, path: Path, manifest: dict[str, Any]) -> Coverage:
        """Ops from the file; fast ops are those XNNPACK's partitions replace in the interpreter;
        int8 ops are compute ops with integer activations (or, dynamic range, int8 weights)."""
        ops = graph_ops(Path(path))
        replaced, partitions = delegated_nodes(make_interpreter(Path(path), xnnpack=True))
        recipe = str(manifest.get("recipe", ""))
        compute = [op for op in ops if op.name in COMPUTE_OPS]
        quantized = recipe in ("int8", "int8-dynamic")
        return Coverage(
            total_ops=len(ops),
            fast_ops=len(replaced),
            fallback_ops=sorted({op.name for i, op in enumerate(ops) if i not in replaced}),
            transposes=sum(op.name == "TRANSPOSE" for op in ops),
            int8_ops=sum(_runs_int8(op) for op in compute) if quantized else None,
            compute_ops=len(compute) if quantized else None,
            summary=_summarize(ops, replaced, partitions, recipe),
        )

    def versions(self) -> dict[str, str]:
        packages = ("ai-edge-litert", "litert-torch", "ai-edge-quantizer", "tensorflow-cpu")
        return {package: _version(package) for package in packages}
