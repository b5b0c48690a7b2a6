"""``edgekit doctor``: which runtimes, delegates, GPUs and adb devices this machine has."""

from __future__ import annotations

import glob
import os
import platform
import shutil
import subprocess
from typing import Any

from edgekit.versions import package_version, tool_versions

VULKAN_ICD_GLOBS = ("/usr/share/vulkan/icd.d/*.json", "/etc/vulkan/icd.d/*.json")


def diagnose() -> dict[str, Any]:
    """Facts about this machine, each probed for real (imports, driver files, commands)."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "versions": tool_versions(),
        "targets": _targets(),
        "xnnpack": _xnnpack(),
        "cuda": _cuda(),
        "onnxruntime_providers": _ort_providers(),
        "vulkan": vulkan_facts(),
        "adb": _adb(),
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _importable(module: str) -> str | None:
    """None when ``module`` imports, else the one-line reason it does not."""
    import importlib

    try:
        importlib.import_module(module)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
    return None


def _targets() -> dict[str, dict[str, Any]]:
    checks = {
        "tflite": (("litert_torch", "ai_edge_quantizer"), ("ai_edge_litert.interpreter",)),
        "executorch": (("executorch.exir",), ("executorch.runtime",)),
        "onnx": (("onnxscript", "onnxruntime.quantization"), ("onnxruntime",)),
    }
    result = {}
    for name, (export_modules, run_modules) in checks.items():
        export_problems = [p for p in map(_importable, export_modules) if p]
        run_problems = [p for p in map(_importable, run_modules) if p]
        if name == "tflite" and run_problems and _importable("tflite_runtime.interpreter") is None:
            run_problems = []  # the accepted fallback interpreter
        result[name] = {
            "export": not export_problems,
            "run": not run_problems,
            "problems": export_problems + run_problems,
        }
    result["tflite"]["keras_export"] = _importable("tensorflow") is None
    return result


def _xnnpack() -> dict[str, Any]:
    facts: dict[str, Any] = {}
    try:
        from executorch.runtime import Runtime

        registry = Runtime.get().backend_registry
        facts["executorch_backends"] = list(registry.registered_backend_names)
        facts["executorch_xnnpack"] = bool(registry.is_available("XnnpackBackend"))
    except Exception as exc:
        facts["executorch_xnnpack"] = False
        facts["executorch_error"] = str(exc)[:160]
    # ai-edge-litert's interpreter applies XNNPACK as its default delegate (OpResolverType.AUTO)
    facts["litert_default_delegate"] = "XNNPACK" if package_version("ai-edge-litert") else None
    return facts


def _cuda() -> dict[str, Any]:
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


def _ort_providers() -> list[str]:
    try:
        import onnxruntime

        return list(onnxruntime.get_available_providers())
    except Exception:
        return []


def vulkan_facts() -> dict[str, Any]:
    """Vulkan ICDs and devices; ``software_only`` when every device is a CPU (lavapipe)."""
    icds = sorted({path for pattern in VULKAN_ICD_GLOBS for path in glob.glob(pattern)})
    facts: dict[str, Any] = {"icd_files": icds, "devices": [], "device_types": []}
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
    facts["available"] = bool(icds)
    return facts


def _adb() -> dict[str, Any]:
    from edgekit.devices.android import list_devices

    adb = shutil.which("adb")
    if adb is None:
        return {"path": None, "devices": []}
    try:
        return {"path": adb, "devices": list_devices()}
    except Exception as exc:
        return {"path": adb, "devices": [], "error": str(exc)[:160]}
