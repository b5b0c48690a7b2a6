"""Server rows: an ``.onnx`` artifact on a datacenter GPU through onnxruntime's CUDA
(``server-cuda``) or TensorRT (``server-tensorrt``) execution provider, next to the baseline in
torch on CUDA (synchronised before every clock read). They answer "what would this cost on the
server instead", so they are labelled server rows and never compete with on-device rows in the
recommendation (``edgekit.report.recommend``).

Needs ``pip install 'edgekit-bench[cuda]'`` (onnxruntime-gpu) and a CUDA build of torch on the node;
``benchmarks/gpu_check.sh`` measures both on a machine with an NVIDIA GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgekit.devices import register
from edgekit.devices.base import DeviceTraits
from edgekit.devices.host import HostDevice
from edgekit.targets.session import Accelerator

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

SERVER_NOTE = "server GPU (onnxruntime execution provider): not an on-device figure"
PROVIDERS = {"cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}


class ServerDevice(HostDevice):
    accelerator = Accelerator.GPU
    provider = "cuda"

    def session_options(self, artifact: Artifact) -> dict[str, Any]:
        return {"provider": self.provider}

    def unavailable_reason(self, artifact: Artifact) -> str | None:
        from edgekit.common.machine import cuda_facts, onnxruntime_providers
        from edgekit.targets import get_target

        if "provider" not in get_target(artifact.target).session_options:
            # only a target whose sessions take an execution provider runs here (onnxruntime)
            return f"{self.name} runs .onnx files only (onnxruntime's {PROVIDERS[self.provider]})"
        available = onnxruntime_providers()
        if PROVIDERS[self.provider] not in available:
            return (
                f"onnxruntime here has no {PROVIDERS[self.provider]} (providers: "
                f"{', '.join(available) or 'none'}): pip install 'edgekit-bench[cuda]' on a CUDA "
                "machine"
            )
        if not cuda_facts().get("available"):
            return "no CUDA GPU here (torch.cuda.is_available() is False)"
        return None

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        return DeviceTraits(latency_comparable=True, note=SERVER_NOTE, where="server")

    def advertise(self) -> dict[str, float]:
        from edgekit.common.machine import cuda_facts, onnxruntime_providers

        # the provider first: on a CPU-only onnxruntime, the CUDA question (which imports torch,
        # seconds of a node's start) is never asked
        here = PROVIDERS[self.provider] in onnxruntime_providers() and cuda_facts().get("available")
        return {f"edgekit_device_{self.name}": 1.0} if here else {}

    def facts(self) -> dict[str, Any]:
        from edgekit.common.machine import cuda_facts, onnxruntime_providers

        return {"cuda": cuda_facts(), "onnxruntime": onnxruntime_providers()}


@register
class CudaServer(ServerDevice):
    name = "server-cuda"
    summary = "a CUDA GPU server: onnxruntime's CUDA execution provider (.onnx; the cuda extra)"
    how_to_add = "run on a CUDA machine with edgekit's cuda extra installed"
    provider = "cuda"


@register
class TensorrtServer(ServerDevice):
    name = "server-tensorrt"
    summary = "a CUDA GPU server: onnxruntime's TensorRT execution provider (.onnx; the cuda extra)"
    how_to_add = "run on a CUDA machine with TensorRT and edgekit's cuda extra installed"
    provider = "tensorrt"
