"""LiteRT sessions: the Interpreter on the CPU (XNNPACK by default, or the builtin kernels), or
CompiledModel on the CPU (``api="compiled_model"``, a tuned option), and CompiledModel with the
GPU accelerator. numpy and LiteRT only: the arm64 guest runs this file.

Device ``cpu`` is ``ai_edge_litert.interpreter.Interpreter`` whose default (AUTO) op resolver
applies XNNPACK; ``xnnpack=False`` runs the builtin kernels instead (the path a phone takes
without XNNPACK). The GPU is ``CompiledModel`` with the GPU (WebGPU over Vulkan) accelerator,
CPU for the rest."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.quiet import quiet_native
from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError
from edgekit.targets.manifest import Manifest
from edgekit.targets.session import Accelerator, Session, TensorSpec, dequantize, stage_input

INTEGER_TYPES = ("int8", "uint8", "int16")


def _interpreter_module() -> tuple[Any, str]:
    try:
        from ai_edge_litert import interpreter

        return interpreter, "ai-edge-litert"
    except ImportError:  # the deprecated standalone runtime (numpy<2 only)
        from tflite_runtime import interpreter

        return interpreter, "tflite-runtime"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def make_interpreter(path: Path, threads: int = 1, *, xnnpack: bool = True) -> Any:
    """An allocated Interpreter; with ``xnnpack`` its default resolver applies XNNPACK."""
    module, _ = _interpreter_module()
    resolver = (
        module.OpResolverType.AUTO
        if xnnpack
        else module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    with quiet_native():
        try:
            interpreter = module.Interpreter(
                model_path=str(path), num_threads=threads, experimental_op_resolver_type=resolver
            )
            interpreter.allocate_tensors()  # the default delegate is applied here
        except ValueError as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "ValueError"
            raise UserInputError(f"{path}: LiteRT cannot load it ({first})") from None
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


def tensor_specs(interpreter: Any, input_layout: str) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Every input and output of the model, as the file declares them."""

    def spec(detail: dict[str, Any], layout: str) -> TensorSpec:
        return TensorSpec(
            name=str(detail["name"]),
            shape=[int(v) for v in detail["shape"]],
            dtype=np.dtype(detail["dtype"]).name,
            layout=layout,
            quantization=_quantization(detail),
        )

    inputs = [spec(d, input_layout) for d in interpreter.get_input_details()]
    outputs = [spec(d, "NC") for d in interpreter.get_output_details()]
    return inputs, outputs


def _checked_specs(manifest: Manifest, interpreter: Any) -> tuple[TensorSpec, TensorSpec]:
    """The manifest's input/output, checked against the file (a manifest of another file is
    caught here, before any number is measured)."""
    wanted_in = manifest.input
    inputs, outputs = tensor_specs(interpreter, wanted_in.layout)
    found_in, found_out = inputs[0], outputs[0]
    if (found_in.dtype, found_in.shape) != (wanted_in.dtype, wanted_in.shape):
        raise UserInputError(
            f"manifest input {wanted_in.dtype}{wanted_in.shape} does not match the file's "
            f"{found_in.dtype}{found_in.shape}"
        )
    return found_in, found_out


class InterpreterSession(Session):
    """LiteRT Interpreter on the CPU: XNNPACK (default delegate) or the builtin kernels."""

    def __init__(self, path: Path, manifest: Manifest, threads: int, *, xnnpack: bool):
        _, runtime = _interpreter_module()
        self._interpreter = make_interpreter(path, threads=threads, xnnpack=xnnpack)
        self._input_spec, self._output_spec = _checked_specs(manifest, self._interpreter)
        self._input_indices = [d["index"] for d in self._interpreter.get_input_details()]
        self._input_index = self._input_indices[0]
        self._output_index = self._interpreter.get_output_details()[0]["index"]
        replaced, partitions = delegated_nodes(self._interpreter)
        total = len(self._interpreter._get_ops_details()) - partitions
        kernels = "builtin"
        if partitions:
            kernels = "XNNPACK" if len(replaced) == total else "XNNPACK + builtin"
        self.info = {
            "runtime": f"LiteRT Interpreter ({runtime} {_version(runtime)})",
            "delegate": "XNNPACK" if xnnpack else None,
            "xnnpack": xnnpack,
            "delegate_applied": partitions > 0,
            "delegate_partitions": partitions,
            "delegated_ops": f"{len(replaced)}/{total}",
            "kernels": kernels,
            "threads": threads,
            "input_dtype": self._input_spec.dtype,
        }
        if not xnnpack:
            self.info["variant"] = "builtin"

    def stage(self, sample: np.ndarray) -> np.ndarray:
        return stage_input(sample, self._input_spec)

    def stage_raw(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [np.ascontiguousarray(a) for a in arrays]

    def invoke(self, staged: np.ndarray | list[np.ndarray]) -> np.ndarray:
        if isinstance(staged, list):
            for index, array in zip(self._input_indices, staged, strict=True):
                self._interpreter.set_tensor(index, array)
        else:
            self._interpreter.set_tensor(self._input_index, staged)
        self._interpreter.invoke()
        return self._interpreter.get_tensor(self._output_index)

    def output(self, raw: np.ndarray) -> np.ndarray:
        return dequantize(raw, self._output_spec)

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
    """LiteRT CompiledModel: with the GPU accelerator (ops it can't take fall back to the CPU),
    or on the CPU alone (``gpu=False``) with XNNPACK's kernels (ai-edge-litert's ``CpuOptions``;
    its ``enable_ynnpack`` is refused by the 2.3.0 wheel on x86-64, so edgekit leaves it out)."""

    def __init__(self, path: Path, manifest: Manifest, threads: int, *, gpu: bool = True):
        try:
            from ai_edge_litert.compiled_model import CompiledModel
            from ai_edge_litert.cpu_kernel_mode import CpuKernelMode
            from ai_edge_litert.cpu_options import CpuOptions
            from ai_edge_litert.hardware_accelerator import HardwareAccelerator
            from ai_edge_litert.options import Options
        except ImportError as exc:
            raise DeviceUnavailable(f"tflite: no LiteRT CompiledModel API: {exc}") from None
        cpu = CpuOptions(num_threads=threads, kernel_mode=CpuKernelMode.DELEGATE)
        accelerators = HardwareAccelerator.CPU
        if gpu:
            accelerators = HardwareAccelerator.GPU | HardwareAccelerator.CPU
        options = Options(hardware_accelerators=accelerators, cpu_options=cpu)
        model = None
        with quiet_native() as log:
            try:
                model = CompiledModel.from_file(str(path), options=options)
            except RuntimeError:
                log.echo = False  # the reason goes into the exception instead
        if model is None and not gpu:
            raise EdgekitError(
                f"{path.name}: LiteRT's CompiledModel refused it on the CPU: "
                f"{(log.lines or ['no reason given'])[-1][:200]}"
            )
        if model is None:
            raise DeviceUnavailable(_gpu_reason(log.lines))
        self._model = model
        self._input_spec, self._output_spec = _checked_specs(
            manifest, make_interpreter(path, xnnpack=False)
        )
        self._inputs = model.create_input_buffers(0)
        self._outputs = model.create_output_buffers(0)
        self._output_size = int(np.prod(self._output_spec.shape))
        self._output_dtype = np.dtype(self._output_spec.dtype)
        with quiet_native():  # the first run sets the GPU up (and logs the NPU probe)
            self.invoke(np.zeros(self._input_spec.shape, self._input_spec.dtype))
        self.info = {
            "runtime": f"LiteRT CompiledModel (ai-edge-litert {_version('ai-edge-litert')})",
            "delegate": "GPU (WebGPU)" if gpu else "XNNPACK",
            "delegate_applied": True,
            "fully_accelerated": model.is_fully_accelerated(),
            "threads": threads,
            "input_dtype": self._input_spec.dtype,
        }
        if not gpu:
            self.info["api"] = "compiled_model"

    def stage(self, sample: np.ndarray) -> np.ndarray:
        return stage_input(sample, self._input_spec)

    def stage_raw(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [np.ascontiguousarray(a) for a in arrays]

    def invoke(self, staged: np.ndarray | list[np.ndarray]) -> np.ndarray:
        for buffer, array in zip(
            self._inputs, staged if isinstance(staged, list) else [staged], strict=False
        ):
            buffer.write(array)
        self._model.run_by_index(0, self._inputs, self._outputs)
        return self._outputs[0].read(self._output_size, self._output_dtype)

    def output(self, raw: np.ndarray) -> np.ndarray:
        return dequantize(raw, self._output_spec)

    def close(self) -> None:
        with quiet_native():  # the accelerators log their destruction
            self._inputs = self._outputs = []
            self._model = None


def open_session(
    path: Path,
    manifest: Manifest,
    accelerator: Accelerator = Accelerator.CPU,
    threads: int = 1,
    *,
    xnnpack: bool = True,
    api: str = "interpreter",
) -> Session:
    """``xnnpack=False`` runs the builtin kernels without LiteRT's default delegate;
    ``api="compiled_model"`` runs the CPU through LiteRT's CompiledModel (XNNPACK's kernels)
    instead of the Interpreter."""
    if accelerator == Accelerator.GPU:
        return CompiledModelSession(Path(path), manifest, threads)
    if api == "compiled_model" and xnnpack:
        return CompiledModelSession(Path(path), manifest, threads, gpu=False)
    return InterpreterSession(Path(path), manifest, threads, xnnpack=xnnpack)
