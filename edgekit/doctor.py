"""``edgekit doctor``: which runtimes, delegates, GPUs and devices this machine has, each probed
for real (imports, driver files, commands), and the machine's fingerprint."""

from __future__ import annotations

import os
import platform
from typing import Any

from edgekit.devices import device_names, get_device
from edgekit.machine import cpu_model, cuda_facts, fingerprint, onnxruntime_providers, vulkan_facts
from edgekit.targets import get_target, runtime_versions, target_names
from edgekit.versions import tool_versions


def diagnose() -> dict[str, Any]:
    from edgekit.native import quiet_native, quiet_python

    versions = runtime_versions()
    with quiet_native(), quiet_python(loggers=("torchao", "torch.utils._pytree")):
        targets = {name: get_target(name).check() for name in target_names()}
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "fingerprint": fingerprint(versions=versions),
        "versions": tool_versions(versions),
        "targets": targets,
        "devices": {name: get_device(name).facts() for name in device_names()},
        "cuda": cuda_facts(),
        "onnxruntime_providers": onnxruntime_providers(),
        "vulkan": vulkan_facts(),
    }
