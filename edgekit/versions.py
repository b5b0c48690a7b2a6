"""Versions of the packages edgekit exports and runs with, read from installed metadata."""

from __future__ import annotations

import platform
from importlib import metadata

PACKAGES = (
    "edgekit",
    "torch",
    "torchao",
    "executorch",
    "litert-torch",
    "ai-edge-litert",
    "litert-converter",
    "ai-edge-quantizer",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "onnxruntime-gpu",
    "tensorflow-cpu",
    "tensorflow",
    "keras",
    "tflite-runtime",
    "numpy",
)


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def tool_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        version = package_version(name)
        if version is not None:
            versions[name] = version
    return versions
