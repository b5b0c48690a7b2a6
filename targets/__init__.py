"""Export targets, one module each, registered by name (``tflite``, ``executorch``, ``onnx``)."""

from __future__ import annotations

import importlib

from edgekit.errors import UserInputError

# name -> module that defines and registers it; imported lazily (each pulls a heavy runtime)
TARGET_MODULES = {
    "tflite": "edgekit.targets.tflite",
    "executorch": "edgekit.targets.executorch",
    "onnx": "edgekit.targets.onnx",
}
_REGISTRY: dict[str, object] = {}


def register(target_class: type) -> type:
    """Class decorator: make a target available by its ``name``."""
    _REGISTRY[target_class.name] = target_class()
    return target_class


def get_target(name: str) -> object:
    if name not in TARGET_MODULES:
        raise UserInputError(
            f"unknown target '{name}' (choose from {', '.join(TARGET_MODULES)}, or all)"
        )
    if name not in _REGISTRY:
        importlib.import_module(TARGET_MODULES[name])
    return _REGISTRY[name]


def parse_targets(names: str) -> list[str]:
    if names == "all":
        return list(TARGET_MODULES)
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    for name in chosen:
        if name not in TARGET_MODULES:
            raise UserInputError(
                f"unknown target '{name}' (choose from {', '.join(TARGET_MODULES)}, or all)"
            )
    return chosen


def target_for_file(path: str) -> str:
    for name, suffix in SUFFIXES.items():
        if path.endswith(suffix):
            return name
    raise UserInputError(f"{path}: not an artifact (expected .tflite, .pte or .onnx)")


SUFFIXES = {"tflite": ".tflite", "executorch": ".pte", "onnx": ".onnx"}
