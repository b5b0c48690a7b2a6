"""``edgekit doctor``: which runtimes, delegates, GPUs and devices this machine has, each probed
for real (imports, driver files, commands), and the machine's fingerprint."""

from __future__ import annotations

import os
import platform
from typing import Any

from edgekit.common.machine import (
    cpu_model,
    cuda_facts,
    fingerprint,
    onnxruntime_providers,
    vulkan_facts,
)
from edgekit.common.versions import tool_versions
from edgekit.devices import device_names, get_device
from edgekit.targets import get_target, runtime_versions, target_names


def diagnose() -> dict[str, Any]:
    from edgekit.common.quiet import quiet_native, quiet_python

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


def _board_words(facts: dict[str, Any]) -> str:
    from edgekit.common.machine import describe_board

    if "cpu_model" not in facts:  # not reached: why
        return f"not ready: {facts.get('reason', '')}"
    what = describe_board(facts).split(": ", 1)[1]
    return f"ready: {what}" if facts["ready"] else f"not ready: {facts.get('reason', '')}; {what}"


def device_words(facts: dict[str, Any]) -> str:
    """One device's ``facts()`` as a line of words for doctor's table (``--json`` keeps the
    dict): the keys the built-in devices report, and any other key as ``key value``."""
    if "board" in facts:  # a board over SSH: what it is, or why edgekit cannot use it
        return _board_words(facts)
    if "ready" in facts:  # arm64-emu: what its setup recorded, or why it is not set up
        if facts["ready"]:
            return _emulator_words(facts)
        return f"not set up: {facts.get('reason', '')}"
    parts: list[str] = []
    rest = dict(facts)
    if "machine" in rest:
        parts.append(str(rest.pop("machine")))
    if "vulkan" in rest:
        parts.append(_vulkan_words(rest.pop("vulkan")))
    if "cuda" in rest:
        parts.append(_cuda_words(rest.pop("cuda")))
    if "onnxruntime" in rest:
        providers = rest.pop("onnxruntime")
        parts.append(f"onnxruntime providers: {', '.join(providers) or 'none'}")
    if "adb" in rest:
        parts.append(_adb_words(rest.pop("adb"), rest.pop("devices", []), rest.pop("error", "")))
    parts += [f"{key.replace('_', ' ')} {_value_words(value)}" for key, value in rest.items()]
    return "; ".join(part for part in parts if part) or "nothing to report"


def _value_words(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{key} {_value_words(item)}" for key, item in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value_words(item) for item in value) or "none"
    return "none" if value is None else str(value)


def _vulkan_words(vulkan: dict[str, Any]) -> str:
    if not vulkan.get("available"):
        files = vulkan.get("icd_files") or []
        why = f"{len(files)} driver file(s) gave no device" if files else "no driver"
        if vulkan.get("loader_env"):
            why = f"the loader is pointed at {vulkan['loader_env']}, which gives none"
        return f"Vulkan: none ({why})"
    devices = ", ".join(vulkan.get("devices") or []) or "a driver file, no vulkaninfo to name it"
    software = " (software: its latency is a CPU's)" if vulkan.get("software_only") else ""
    return f"Vulkan: {devices}{software}"


def _cuda_words(cuda: dict[str, Any]) -> str:
    if cuda.get("available"):
        return f"CUDA: {cuda.get('device')} (CUDA {cuda.get('torch_cuda')})"
    if cuda.get("error"):
        return f"CUDA: none ({cuda['error']})"
    built = cuda.get("torch_cuda")
    return "CUDA: none" + (
        f" (torch built for CUDA {built}, no GPU)" if built else " (torch built without CUDA)"
    )


def _adb_words(adb: str | None, devices: list[dict[str, Any]], error: str) -> str:
    if adb is None:
        return "adb: not on PATH"
    if error:
        return f"adb at {adb}: {error}"
    if not devices:
        return f"adb at {adb}: no phone or emulator attached"
    listed = ", ".join(
        f"{d.get('serial')} ({d.get('state')}" + (f", {d['model']}" if d.get("model") else "") + ")"
        for d in devices
    )
    return f"adb at {adb}: {listed}"


def _emulator_words(facts: dict[str, Any]) -> str:
    words = (
        f"ready: QEMU {facts.get('qemu', '?')}, CPython {facts.get('python', '?')} aarch64, "
        f"ai-edge-litert {facts.get('ai-edge-litert', '?')}, onnxruntime "
        f"{facts.get('onnxruntime', '?')}"
    )
    if facts.get("pte"):
        words += (
            f", ExecuTorch runtime {facts.get('executorch_runtime', '?')} on CPython "
            f"{facts.get('pte_python', '?')}"
        )
    else:
        words += "; no .pte (edgekit device setup arm64-emu --with-pte adds it)"
    if facts.get("default_cpu"):
        words += f"; CPU {facts['default_cpu']} by default"
    return words
