"""The emulated ARM64 device (``--device arm64-emu``): the aarch64 builds of LiteRT, XNNPACK,
onnxruntime and ExecuTorch's runtime, run under QEMU user-mode emulation on an x86_64 host.

What it proves: an artifact's numerics on the real aarch64 kernels a phone runs, compared with
the same artifact on the host's x86 kernels (its traits say ``compare_to_host``). What it does
not: a phone's speed (QEMU's TCG runs vector float through softfloat helpers, 50-1000x slower
than native), memory, thermal behaviour, GPU/NPU delegates, or Android's own builds of the
runtimes (these are the manylinux aarch64 wheels). ``setup`` builds it (see ``setup.py``), the
guest runs the targets' own session modules (``guest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.devices import get_device, register
from edgekit.devices.arm64_emu.emulator import (
    LATENCY_LABEL,
    PTE,
    PTE_REASON,
    Emulator,
    Userland,
    choose_cpu,
    cpu_models,
    guest_command,
    guest_tree,
    load_device,
    request_for,
    scratch_dir,
    userland_for,
)
from edgekit.devices.base import Device, DeviceTraits
from edgekit.errors import DeviceUnavailable
from edgekit.targets import get_target
from edgekit.worker.latency import BlockTimer, LatencyProtocol
from edgekit.worker.parent import WorkerProcess, WorkerTimer, sample_for, trivial_fields

if TYPE_CHECKING:
    import tempfile

    from edgekit.artifacts.artifact import Artifact

TIMEOUT_S = 900.0


class GuestTimer(WorkerTimer):
    """A session held in the emulated guest; its tree lives as long as the timer."""

    def __init__(
        self,
        tree: tempfile.TemporaryDirectory,
        label: str,
        request: dict,
        sample: np.ndarray,
        **kw: Any,
    ):
        self._tree = tree
        try:
            super().__init__(label, request, sample, **kw)
        except BaseException:
            tree.cleanup()
            raise

    def reopen(self) -> GuestTimer:
        """A new emulated process on the same staged tree, which goes with the last session."""
        WorkerTimer.close(self)
        request, sample, timeout_s, command, env = self._how
        again = GuestTimer(
            self._tree, self.label, request, sample, timeout_s=timeout_s, command=command, env=env
        )
        again.runtime = {
            **again.runtime,
            **{k: v for k, v in self.runtime.items() if k not in again.runtime},
        }
        again.load_ms, again.first_ms = self.load_ms, self.first_ms
        return again

    def close(self) -> None:
        super().close()
        self._tree.cleanup()


@register
class Arm64EmuDevice(Device):
    name = "arm64-emu"
    options = ("cpu", "xnnpack")
    summary = "aarch64 runtimes under QEMU user mode: ARM numerics, not a phone's speed"
    how_to_add = "edgekit device setup arm64-emu"

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        return DeviceTraits(latency_comparable=False, compare_to_host=True, note=LATENCY_LABEL)

    def place(self, artifact: Artifact) -> tuple[Emulator, Userland, str]:
        """The emulator, the userland that has the artifact's runtime, and the CPU model."""
        emulator = load_device()
        target = get_target(artifact.target)
        land = userland_for(target.guest_modules)
        if land is None:
            raise DeviceUnavailable(
                f"{Path(artifact.path).name}: no arm64 userland has {target.runtime}'s runtime"
            )
        if land is PTE and not emulator.facts.get("pte"):
            raise DeviceUnavailable(PTE_REASON)
        requested = self.settings.get("cpu") or emulator.facts.get("default_cpu")
        return emulator, land, choose_cpu(requested, cpu_models(emulator.qemu))

    def unavailable_reason(self, artifact: Artifact) -> str | None:
        try:
            self.place(artifact)
        except DeviceUnavailable as exc:
            return str(exc)
        return None

    def _options(self, artifact: Artifact) -> dict[str, Any]:
        accepted = get_target(artifact.target).session_options
        return {k: v for k, v in self.settings.items() if k in accepted and k != "cpu"}

    def predict(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1, *, emulated: bool = True
    ) -> tuple[np.ndarray, dict]:
        """``emulated=False`` runs the same guest tree on the host's Python (tests use it to
        prove the guest stages exactly as the host sessions do)."""
        target = get_target(artifact.target)
        if emulated:
            emulator, land, cpu = self.place(artifact)
        else:  # the host's own Python runs the same tree: no emulator needed
            emulator, land, cpu = None, userland_for(target.guest_modules), "host"
        with scratch_dir() as tmp:
            tree = guest_tree(target.session_module, Path(tmp) / "tree")
            inputs, outputs = Path(tmp) / "x.npy", Path(tmp) / "y.npy"
            np.save(inputs, np.ascontiguousarray(x, dtype=np.float32))
            request = request_for(artifact, target.session_module, threads, self._options(artifact))
            request.update(mode="predict", input=str(inputs), output=str(outputs))
            command, env = guest_command(emulator, land, cpu, tree.parent)
            worker = WorkerProcess(request, TIMEOUT_S, command, env)
            try:
                reply = worker.receive()
            finally:
                worker.close()
            logits = np.load(outputs)
        return logits, dict(reply["runtime"], cpu_model=cpu, emulated=emulated)

    def timer(
        self,
        artifact: Artifact,
        threads: int,
        sample: np.ndarray | None,
        protocol: LatencyProtocol,
        timeout_s: float,
    ) -> BlockTimer:
        emulator, land, cpu = self.place(artifact)
        target = get_target(artifact.target)
        sample = sample_for(artifact, sample)
        tree = scratch_dir()
        script_dir = guest_tree(target.session_module, Path(tree.name) / "tree").parent
        command, env = guest_command(emulator, land, cpu, script_dir)
        request = request_for(artifact, target.session_module, threads, self._options(artifact))
        request.update(warmup=protocol.warmup, **trivial_fields(artifact.target))
        timer = GuestTimer(
            tree,
            artifact.label,
            request,
            sample,
            timeout_s=max(timeout_s, TIMEOUT_S),
            command=command,
            env=env,
        )
        timer.runtime = dict(timer.runtime, cpu_model=cpu, emulated=True, latency=LATENCY_LABEL)
        return timer

    def host_reference(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1
    ) -> tuple[np.ndarray, str]:
        """The same artifact on the host's x86 kernels, with the same kernel choice."""
        xnnpack = self.settings.get("xnnpack")
        host = get_device("cpu", xnnpack=xnnpack if xnnpack is False else None)
        logits, runtime = host.predict(artifact, x, threads)
        return logits, f"host x86 cpu session ({runtime.get('runtime', '?')})"

    def facts(self) -> dict[str, Any]:
        try:
            return {"ready": True, **load_device().facts}
        except DeviceUnavailable as exc:
            return {"ready": False, "reason": str(exc)}

    def advertise(self) -> dict[str, float]:
        return {f"edgekit_device_{self.name}": 1.0} if self.facts().get("ready") else {}

    def setup(self, progress: Callable[[str], None], **options: Any) -> None:
        from edgekit.devices.arm64_emu.setup import setup_device

        setup_device(
            self.settings.get("cpu"), with_pte=bool(options.get("with_pte")), progress=progress
        )
