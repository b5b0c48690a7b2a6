"""The host's own devices: ``cpu`` (the runtimes' CPU kernels, XNNPACK and MLAS) and ``gpu``
(the target's GPU delegate or execution provider). Every session runs in a child process.

Mesa's lavapipe is a software Vulkan device: LiteRT's GPU accelerator runs its real code path and
numerics there, but its latency is a CPU's, so such rows are never comparable."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.artifacts.runtime_options import tuned_options
from edgekit.common.machine import vulkan_facts
from edgekit.devices import register
from edgekit.devices.base import Device, DeviceTraits
from edgekit.targets import get_target
from edgekit.targets.session import Accelerator
from edgekit.worker.latency import BlockTimer, LatencyProtocol
from edgekit.worker.parent import artifact_timer, predict_in_child

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

SOFTWARE_VULKAN = "software Vulkan, not a GPU speed"


@functools.cache
def software_vulkan() -> bool:
    """True when the only Vulkan devices here are software rasterisers (lavapipe/llvmpipe)."""
    return bool(vulkan_facts().get("software_only"))


class HostDevice(Device):
    accelerator: Accelerator = Accelerator.CPU
    tells_memory = True  # its sessions run in children of this machine (/proc/self/status)

    def session_options(self, artifact: Artifact) -> dict[str, Any]:
        """The runtime options ``edgekit tune`` wrote into the manifest (for this device),
        under the device's own settings (``--no-xnnpack`` wins over a tuned ``xnnpack``)."""
        accepted = get_target(artifact.target).session_options
        tuned = tuned_options(artifact.manifest, self.name)
        settings = {key: value for key, value in self.settings.items() if key in accepted}
        return {**tuned, **settings}

    def unavailable_reason(self, artifact: Artifact) -> str | None:
        target = get_target(artifact.target)
        if self.accelerator not in target.accelerators:
            return f"{target.name} has no {self.name} path in this edgekit"
        return None

    def predict(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1
    ) -> tuple[np.ndarray, dict]:
        logits, runtime = predict_in_child(
            artifact.path,
            x,
            self.accelerator.value,
            threads,
            session_options=self.session_options(artifact),
            manifest=artifact.manifest,
        )
        return logits, self.annotate(runtime)

    def timer(
        self,
        artifact: Artifact,
        threads: int,
        sample: np.ndarray | None,
        protocol: LatencyProtocol,
        timeout_s: float,
        synthetic_delay_ms: float | None = None,
    ) -> BlockTimer:
        timer = artifact_timer(
            artifact,
            self.accelerator.value,
            threads,
            sample,
            protocol,
            timeout_s,
            session_options=self.session_options(artifact),
            synthetic_delay_ms=synthetic_delay_ms,
        )
        timer.runtime = self.annotate(timer.runtime)
        return timer

    def annotate(self, runtime: dict[str, Any]) -> dict[str, Any]:
        return dict(runtime, device=self.name)


@register
class CpuDevice(HostDevice):
    name = "cpu"
    options = ("xnnpack",)
    summary = "the host CPU (XNNPACK, MLAS); --no-xnnpack runs LiteRT's builtin kernels"
    tunable = True

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        return DeviceTraits(latency_comparable=True, note="host CPU")

    def facts(self) -> dict[str, Any]:
        from edgekit.common.machine import describe, fingerprint

        return {"machine": describe(fingerprint())}

    def advertise(self) -> dict[str, float]:
        from edgekit.common.machine import fingerprint
        from edgekit.targets import runtime_versions

        # the run's machine fingerprint (report, history): runs compare latency within one
        machine = fingerprint(versions=runtime_versions())["id"]
        return {f"edgekit_device_{self.name}": 1.0, f"edgekit_fp_{machine}": 1.0}


@register
class GpuDevice(HostDevice):
    name = "gpu"
    summary = "the target's GPU delegate (LiteRT over Vulkan) or execution provider (CUDA)"
    how_to_add = (
        "install a Vulkan driver (your GPU's, or Mesa 25's software one: apt-get install "
        "mesa-vulkan-drivers, as scripts/install-vulkan.sh does), then check with edgekit doctor"
    )
    accelerator = Accelerator.GPU

    def absent(self) -> str | None:
        from edgekit.common.machine import cuda_facts

        if cuda_facts().get("available"):
            return None
        vulkan = vulkan_facts()
        if vulkan.get("available"):
            return None
        files = vulkan["icd_files"]
        where = "no Vulkan driver" + (f" ({len(files)} driver file(s) gave none)" if files else "")
        if vulkan.get("loader_env"):
            where = f"the Vulkan loader is pointed at {vulkan['loader_env']}, which gives none"
        return f"no CUDA GPU and no Vulkan device: {where}"

    def annotate(self, runtime: dict[str, Any]) -> dict[str, Any]:
        runtime = super().annotate(runtime)
        if str(runtime.get("delegate", "")).startswith("GPU (WebGPU)"):
            facts = vulkan_facts()
            names = ", ".join(facts.get("devices", [])) or "no Vulkan device"
            runtime.update(gpu=names, software_vulkan=software_vulkan())
        return runtime

    def advertise(self) -> dict[str, float]:
        from edgekit.common.machine import cuda_facts

        if cuda_facts().get("available"):
            kind = "cuda"
        elif vulkan_facts().get("devices"):
            kind = "software_vulkan" if software_vulkan() else "vulkan"
        else:
            return {}
        return {f"edgekit_device_{self.name}": 1.0, f"edgekit_gpu_{kind}": 1.0}

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        if runtime and runtime.get("software_vulkan"):
            return DeviceTraits(latency_comparable=False, note=SOFTWARE_VULKAN)
        return DeviceTraits(latency_comparable=True, note="GPU")

    def facts(self) -> dict[str, Any]:
        from edgekit.common.machine import cuda_facts, onnxruntime_providers

        vulkan = vulkan_facts()
        return {"vulkan": vulkan, "cuda": cuda_facts(), "onnxruntime": onnxruntime_providers()}
