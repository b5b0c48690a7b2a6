"""Export targets, one package each, registered by name. The table below is the one place that
names them; each package's ``__init__`` defines and registers its ``Target``."""

from __future__ import annotations

import importlib
import sys
from importlib import metadata
from typing import Any

from edgekit.common.plugins import load_plugins
from edgekit.errors import UserInputError

# name -> (package that defines and registers it, artifact suffix); imported lazily
TARGET_MODULES: dict[str, tuple[str, str]] = {
    "tflite": ("edgekit.targets.tflite", ".tflite"),
    "executorch": ("edgekit.targets.executorch", ".pte"),
    "onnx": ("edgekit.targets.onnx", ".onnx"),
}
DEFAULT_TARGET = "tflite"  # what ``edgekit export`` makes unless told otherwise
_REGISTRY: dict[str, Any] = {}


def register(target_class: type) -> type:
    """Class decorator: make a target available by its ``name``."""
    _REGISTRY[target_class.name] = target_class()
    return target_class


def add_target(name: str, module: str, suffix: str) -> None:
    """Register a target package defined outside edgekit (a plugin, or a test's)."""
    TARGET_MODULES[name] = (module, suffix)


def remove_target(name: str) -> None:
    """Unregister a target that ``add_target`` registered (a test's plugin, once done)."""
    TARGET_MODULES.pop(name, None)
    _REGISTRY.pop(name, None)


def target_names() -> list[str]:
    load_plugins()
    return list(TARGET_MODULES)


def get_target(name: str) -> Any:
    load_plugins()
    if name not in TARGET_MODULES:
        raise UserInputError(
            f"unknown target '{name}' (choose from {', '.join(TARGET_MODULES)}, or all)"
        )
    if name not in _REGISTRY:
        _import_registering(TARGET_MODULES[name][0])
    return _REGISTRY[name]


def _import_registering(module: str) -> None:
    """Import ``module`` so that its ``@register`` runs: again, where it was imported while
    another registry stood in for this one (a test's copy), since an import runs only once."""
    if module in sys.modules:
        importlib.reload(sys.modules[module])
    else:
        importlib.import_module(module)


def parse_targets(names: str) -> list[str]:
    load_plugins()
    if names == "all":
        return list(TARGET_MODULES)
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    for name in chosen:
        if name not in TARGET_MODULES:
            raise UserInputError(
                f"unknown target '{name}' (choose from {', '.join(TARGET_MODULES)}, or all)"
            )
    if not chosen:
        raise UserInputError("no target given (choose from " + ", ".join(TARGET_MODULES) + ")")
    return chosen


def suffix_of(name: str) -> str:
    return TARGET_MODULES[name][1]


def target_for_suffix(suffix: str) -> str | None:
    """The target whose artifacts end in ``suffix`` (a foreign file's format), or None."""
    load_plugins()
    for name, (_, known) in TARGET_MODULES.items():
        if known == suffix:
            return name
    return None


def runtime_versions() -> dict[str, str]:
    """Installed versions of every target's packages (what a latency figure depends on)."""
    found: dict[str, str] = {}
    for name in target_names():
        for package in get_target(name).packages:
            try:
                found[package] = metadata.version(package)
            except metadata.PackageNotFoundError:
                continue
    return found
