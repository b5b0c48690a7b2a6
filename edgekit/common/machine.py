"""Facts about this machine, and its fingerprint: what a latency figure depends on.

The fingerprint goes into every latency and accuracy record, manifest, results.json and history
row. Two figures are comparable only when their fingerprints agree on every field of
``COMPARED``; ``edgekit compare``, ``history`` and ``check --against`` refuse otherwise."""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import platform
import shutil
import subprocess
from typing import Any

# The x86 and ARM features that change which kernels the runtimes pick.
X86_FEATURES = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_int8",
    "amx_bf16",
)
ARM_FEATURES = ("asimd", "asimddp", "i8mm", "sve", "fphp")
# Fields two latency figures must share to be compared (kernel and versions included: a kernel
# update changes scheduling, a runtime update changes kernels).
COMPARED = (
    "arch",
    "cpu_vendor",
    "cpu_model",
    "isa",
    "logical_cores",
    "hypervisor",
    "kernel",
    "versions",
    "threads",
)
VULKAN_ICD_GLOBS = ("/usr/share/vulkan/icd.d/*.json", "/etc/vulkan/icd.d/*.json")


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    facts: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if not line.strip():
                    if facts:
                        break
                    continue
                key, _, value = line.partition(":")
                facts.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return facts


def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or info.get("Hardware") or platform.processor() or "unknown"


def cpu_flags() -> set[str]:
    info = _cpuinfo()
    return set((info.get("flags") or info.get("Features") or "").split())


@functools.cache
def hypervisor() -> str | None:
    """The hypervisor's vendor (``KVM``) when one is present, ``present`` when only the CPU flag
    says so, None on bare metal."""
    if "hypervisor" not in cpu_flags():
        return None
    tool = shutil.which("lscpu")
    if tool:
        try:
            out = subprocess.run([tool], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            if line.startswith("Hypervisor vendor:"):
                return line.split(":", 1)[1].strip()
    return "present"


def fingerprint(threads: int | None = None, versions: dict[str, str] | None = None) -> dict:
    """This machine's fingerprint; ``versions`` are the runtimes' package versions."""
    flags = cpu_flags()
    features = X86_FEATURES if platform.machine() in ("x86_64", "AMD64") else ARM_FEATURES
    info = _cpuinfo()
    payload: dict[str, Any] = {
        "arch": platform.machine(),
        "cpu_vendor": info.get("vendor_id") or info.get("CPU implementer") or "unknown",
        "cpu_model": cpu_model(),
        "isa": [feature for feature in features if feature in flags],
        "logical_cores": os.cpu_count(),
        "hypervisor": hypervisor(),
        "kernel": platform.release(),
        "versions": dict(sorted((versions or {}).items())),
        "threads": threads,
    }
    payload["id"] = fingerprint_id(payload)
    return payload


def fingerprint_id(payload: dict[str, Any]) -> str:
    compared = {key: payload.get(key) for key in COMPARED}
    return hashlib.sha256(json.dumps(compared, sort_keys=True).encode()).hexdigest()[:12]


def differing_fields(first: dict[str, Any] | None, second: dict[str, Any] | None) -> list[str]:
    """The compared fields on which two fingerprints differ (all of them when one is missing)."""
    if not first or not second:
        return ["fingerprint (not recorded)"]
    return [key for key in COMPARED if first.get(key) != second.get(key)]


def describe(payload: dict[str, Any] | None) -> str:
    """One line: ``Intel(R) Xeon(R) Processor (GenuineIntel; avx2 ... amx_int8), 2 cores, KVM``."""
    if not isinstance(payload, dict) or not payload:
        return "unknown machine"
    features = payload.get("isa")
    features = features if isinstance(features, list) else []
    isa = " ".join(str(feature) for feature in features) or "no listed ISA extensions"
    vm = f", VM ({payload['hypervisor']})" if payload.get("hypervisor") else ""
    return (
        f"{payload.get('cpu_model')} ({payload.get('cpu_vendor')}; {isa}), "
        f"{payload.get('logical_cores')} logical cores{vm}, Linux {payload.get('kernel')}"
    )


def describe_board(board: dict[str, Any]) -> str:
    """One line of a board's fingerprint (edgekit.devices.ssh.fingerprint): ``ssh://pi5:
    Raspberry Pi 5, 4 cores, aarch64, Linux 6.6.51, Python 3.11.2; numpy 2.4.6, ...``."""
    runtimes = ", ".join(f"{k} {v}" for k, v in (board.get("runtimes") or {}).items() if v)
    emulated = " (emulated: its shell runs " + str(board.get("shell_machine")) + ")"
    return (
        f"{board.get('board')}: {board.get('cpu_model')}, {board.get('cores')} cores, "
        f"{board.get('machine')}, Linux {board.get('kernel')}, Python {board.get('python')}"
        f"{emulated if board.get('emulated') else ''}; {runtimes or 'no runtimes'}"
    )


def vulkan_facts() -> dict[str, Any]:
    """Vulkan ICDs and devices; ``software_only`` when every device is a CPU (lavapipe)."""
    # the loader reads only the driver files these variables name, when one is set
    chosen = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    if chosen:
        icds = sorted({path for path in chosen.split(os.pathsep) if os.path.isfile(path)})
    else:
        icds = sorted({path for pattern in VULKAN_ICD_GLOBS for path in glob.glob(pattern)})
    facts: dict[str, Any] = {"icd_files": icds, "devices": [], "device_types": []}
    if chosen:
        facts["loader_env"] = chosen
    tool = shutil.which("vulkaninfo")
    if tool:
        try:
            out = subprocess.run(
                [tool, "--summary"], capture_output=True, text=True, timeout=20, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        for line in out.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "deviceName":
                facts["devices"].append(value.strip())
            elif key.strip() == "deviceType":
                facts["device_types"].append(value.strip())
    if facts["device_types"]:
        facts["software_only"] = all(kind.endswith("CPU") for kind in facts["device_types"])
    else:  # no vulkaninfo: Mesa installs every ICD file; only lavapipe's means software
        facts["software_only"] = [p.rsplit("/", 1)[-1] for p in icds] == ["lvp_icd.x86_64.json"]
    # with vulkaninfo, a driver file that yields no device is no Vulkan device
    facts["available"] = bool(icds) and (tool is None or bool(facts["devices"]))
    return facts


def cuda_facts() -> dict[str, Any]:
    try:
        import torch

        if torch.cuda.is_available():
            return {
                "available": True,
                "device": torch.cuda.get_device_name(0),
                "torch_cuda": torch.version.cuda,
            }
        return {"available": False, "torch_cuda": torch.version.cuda}
    except Exception as exc:
        return {"available": False, "error": str(exc)[:160]}


def onnxruntime_providers() -> list[str]:
    try:
        import onnxruntime

        return list(onnxruntime.get_available_providers())
    except Exception:
        return []
