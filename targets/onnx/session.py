"""onnxruntime sessions: the CPU execution provider, or CUDA/TensorRT for the GPU. numpy and
onnxruntime only: the arm64 guest runs this file. Sessions run with ``ORT_ENABLE_ALL`` (a lower
level is 2x slower on MobileNetV2), one inter-op thread, sequential execution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import DeviceUnavailable, UserInputError, first_line
from edgekit.targets.manifest import Manifest
from edgekit.targets.session import Accelerator, Session, dequantize, stage_input

# The GPU providers onnxruntime-gpu offers, in order of preference (CUDA first: TensorRT builds
# engines for minutes on the first run).
GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
CPU_PROVIDER = "CPUExecutionProvider"


# edgekit's session settings; edgekit tune searches each (edgekit.targets.onnx.knobs)
DEFAULT_SETTINGS = {
    "graph_optimization_level": "ORT_ENABLE_ALL",
    "execution_mode": "ORT_SEQUENTIAL",
    "inter_op_threads": 1,
    "allow_spinning": True,
    "enable_mem_pattern": True,
    "enable_cpu_mem_arena": True,
}


def session_options(threads: int, **settings: Any) -> Any:
    """SessionOptions: ``threads`` intra-op threads, and ``settings`` over ``DEFAULT_SETTINGS``
    (checked against the knobs where they were read: a manifest, tune's candidates)."""
    import onnxruntime as ort

    chosen = {**DEFAULT_SETTINGS, **settings}
    options = ort.SessionOptions()
    try:
        level = getattr(ort.GraphOptimizationLevel, chosen["graph_optimization_level"])
        mode = getattr(ort.ExecutionMode, chosen["execution_mode"])
    except AttributeError as exc:
        raise UserInputError(f"onnx: no such session setting ({exc})") from None
    options.graph_optimization_level = level
    options.execution_mode = mode
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = chosen["inter_op_threads"]
    spinning = "1" if chosen["allow_spinning"] else "0"
    options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    options.enable_mem_pattern = chosen["enable_mem_pattern"]
    options.enable_cpu_mem_arena = chosen["enable_cpu_mem_arena"]
    return options


def applied_settings(session: Any) -> dict[str, Any]:
    """The settings as the live session holds them (onnxruntime may change what it was given:
    ORT_PARALLEL with one inter-op thread reads back ORT_SEQUENTIAL)."""
    options = session.get_session_options()
    return {
        "graph_optimization_level": options.graph_optimization_level.name,
        "execution_mode": options.execution_mode.name,
        "inter_op_threads": options.inter_op_num_threads,
        "allow_spinning": options.get_session_config_entry("session.intra_op.allow_spinning")
        != "0",
        "enable_mem_pattern": options.enable_mem_pattern,
        "enable_cpu_mem_arena": options.enable_cpu_mem_arena,
    }


# ``provider=`` names one GPU provider (the server device's CUDA and TensorRT rows)
PROVIDER_NAMES = {"cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}


def providers(accelerator: Accelerator, provider: str | None = None) -> list[str]:
    """Execution providers; DeviceUnavailable when the GPU ones are missing."""
    import onnxruntime as ort

    if accelerator != Accelerator.GPU:
        return [CPU_PROVIDER]
    available = ort.get_available_providers()
    if provider is not None:
        if provider not in PROVIDER_NAMES:
            raise UserInputError(f"provider '{provider}': choose from {', '.join(PROVIDER_NAMES)}")
        wanted = PROVIDER_NAMES[provider]
        if wanted not in available:
            raise DeviceUnavailable(
                f"onnx: {wanted} is not available here: onnxruntime has providers {available} "
                "(pip install 'edgekit-bench[cuda]' on a CUDA machine)"
            )
        return [wanted, CPU_PROVIDER]
    for provider in GPU_PROVIDERS:
        if provider in available:
            return [provider, CPU_PROVIDER]
    raise DeviceUnavailable(
        f"onnx: a GPU execution provider ({', '.join(GPU_PROVIDERS)}) is not available here: "
        f"onnxruntime has providers {available} (install onnxruntime-gpu on a CUDA machine)"
    )


def create_session(path: Path, options: Any, chosen: list[str]) -> Any:
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(str(path), options, providers=chosen)
    except Exception as exc:  # onnxruntime raises its own exception types for a bad file
        raise UserInputError(f"{path}: onnxruntime cannot load it ({first_line(exc)})") from None
    wanted = chosen[0]
    if wanted not in session.get_providers():
        # onnxruntime-gpu lists CUDA even without a usable GPU, then silently runs on CPU
        raise DeviceUnavailable(
            f"onnx: {wanted} failed to initialise (no usable GPU?); session providers "
            f"{session.get_providers()}"
        )
    return session


class OnnxSession(Session):
    def __init__(
        self,
        path: Path,
        manifest: Manifest,
        accelerator: Accelerator,
        threads: int,
        provider: str | None = None,
        **knobs: Any,
    ) -> None:
        import onnxruntime as ort

        chosen = providers(accelerator, provider)
        self._session = create_session(path, session_options(threads, **knobs), chosen)
        self._input_spec = manifest.input
        self._output_spec = manifest.output
        self._input_name = self._input_spec.name or self._session.get_inputs()[0].name
        self._output_names = [self._output_spec.name or self._session.get_outputs()[0].name]
        placed = self._session.get_providers()
        self.info = {
            "runtime": f"onnxruntime {ort.__version__}",
            "providers": placed,
            "delegate": placed[0],
            "delegate_applied": placed[0] == chosen[0],
            "kernels": "MLAS (CPUExecutionProvider)" if placed[0] == CPU_PROVIDER else placed[0],
            "threads": threads,
            **applied_settings(self._session),
        }
        if provider is not None:
            self.info["variant"] = provider

    def stage(self, sample: np.ndarray) -> dict[str, np.ndarray]:
        return {self._input_name: stage_input(sample, self._input_spec)}

    def stage_raw(self, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        names = [arg.name for arg in self._session.get_inputs()]
        return dict(zip(names, (np.ascontiguousarray(a) for a in arrays), strict=True))

    def invoke(self, staged: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self._session.run(self._output_names, staged)

    def output(self, raw: list[np.ndarray]) -> np.ndarray:
        return dequantize(raw[0], self._output_spec)

    def close(self) -> None:
        self._session = None


def open_session(
    path: Path,
    manifest: Manifest,
    accelerator: Accelerator = Accelerator.CPU,
    threads: int = 1,
    **options: Any,
) -> Session:
    return OnnxSession(Path(path), manifest, accelerator, threads, **options)
