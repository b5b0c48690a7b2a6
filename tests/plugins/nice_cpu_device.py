"""A device defined outside edgekit, as a user's plugin would be: the host CPU with every
session's worker started under ``nice -n 10``, as a background job shares a machine. One module
imported (``edgekit.devices.base``) plus one registry line (``add_device``);
``EDGEKIT_PLUGINS=nice_cpu_device`` makes edgekit load it."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import numpy as np

from edgekit.devices.base import (
    Accelerator,
    BlockTimer,
    Device,
    DeviceTraits,
    LatencyProtocol,
    add_device,
    artifact_timer,
    predict_in_child,
    register,
)

add_device("cpu-nice", __name__)  # the one registry line: name, module
NICE = ["nice", "-n", "10", sys.executable, "-m", "edgekit.worker.child"]


@register
class NiceCpuDevice(Device):
    name = "cpu-nice"
    summary = "the host CPU, each session's worker under nice -n 10"
    how_to_add = "install coreutils' nice"

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        return DeviceTraits(latency_comparable=True, note="host CPU at nice 10")

    def absent(self) -> str | None:
        return None if shutil.which("nice") else "no nice command on this machine"

    def predict(self, artifact: Any, x: np.ndarray, threads: int = 1) -> tuple[np.ndarray, dict]:
        logits, runtime = predict_in_child(
            artifact.path, x, Accelerator.CPU, threads, manifest=artifact.manifest, command=NICE
        )
        return logits, dict(runtime, device=self.name, nice=10)

    def timer(
        self,
        artifact: Any,
        threads: int,
        sample: np.ndarray | None,
        protocol: LatencyProtocol,
        timeout_s: float,
    ) -> BlockTimer:
        timer = artifact_timer(
            artifact, Accelerator.CPU, threads, sample, protocol, timeout_s, command=NICE
        )
        timer.runtime = dict(timer.runtime, device=self.name, nice=10)
        return timer
