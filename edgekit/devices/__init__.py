"""Devices, registered by name: where an artifact runs. The table below is the one place that
names them outside their own modules; ``get_device(name, **options)`` makes one."""

from __future__ import annotations

import importlib
import sys
from typing import Any

from edgekit.common.plugins import load_plugins
from edgekit.errors import UserInputError

# name -> module that defines and registers it; imported lazily
DEVICE_MODULES: dict[str, str] = {
    "cpu": "edgekit.devices.host",
    "gpu": "edgekit.devices.host",
    "android": "edgekit.devices.android",
    "arm64-emu": "edgekit.devices.arm64_emu",
    "server-cuda": "edgekit.devices.server",
    "server-tensorrt": "edgekit.devices.server",
}
BOARD_SCHEME, BOARD_MODULE = "ssh://", "edgekit.devices.ssh"  # ssh://[user@]host[:port]
# where a golden bundle's tolerance is measured besides the host (edgekit.golden.tolerance)
SPREAD_DEVICES = ("arm64-emu", "gpu")
DEFAULT_DEVICE = "cpu"  # where export validation and the accuracy-aware loop measure
DEFAULT_DEVICES = ("cpu", "gpu")  # what ``edgekit run`` measures unless told otherwise
_REGISTRY: dict[str, type] = {}


def register(device_class: type) -> type:
    """Class decorator: make a device available by its ``name``."""
    _REGISTRY[device_class.name] = device_class
    return device_class


def add_device(name: str, module: str) -> None:
    """Register a device defined outside edgekit (a plugin, or a test's)."""
    DEVICE_MODULES[name] = module


def device_names() -> list[str]:
    load_plugins()
    return list(DEVICE_MODULES)


def device_class(name: str) -> type:
    load_plugins()
    module = BOARD_MODULE if name.startswith(BOARD_SCHEME) else DEVICE_MODULES.get(name)
    if module is None:
        raise UserInputError(
            f"unknown device '{name}' (choose from {', '.join(DEVICE_MODULES)}, or a board: "
            f"{BOARD_SCHEME}[user@]host[:port])"
        )
    # every board is one class, registered as "ssh"; the name says which board
    key = "ssh" if module == BOARD_MODULE else name
    if key not in _REGISTRY:
        if module in sys.modules:  # imported while a test's copy stood in for the registry
            importlib.reload(sys.modules[module])
        else:
            importlib.import_module(module)
    return _REGISTRY[key]


def get_device(name: str, **options: Any) -> Any:
    """A device by name; ``options`` that are None are ignored, others must be the device's."""
    cls = device_class(name)
    given = {key: value for key, value in options.items() if value is not None}
    foreign = sorted(set(given) - set(cls.options))
    if foreign:
        names = ", ".join("--" + key.replace("_", "-") for key in foreign)
        raise UserInputError(f"{names} does not apply to device {name}")
    # a family of devices told apart by name (boards) is given the name it was asked by
    return cls(name, **given) if getattr(cls, "per_name", False) else cls(**given)


def as_device(device: Any) -> Any:
    """``device`` as a Device: one already made (with its options) as it is, a name made with
    none (``get_device(name, **options)`` at the CLI's edge for the rest)."""
    return get_device(device) if isinstance(device, str) else device


def parse_devices(text: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    if not chosen:
        raise UserInputError(f"--device '{text}': name at least one device")
    for name in chosen:
        device_class(name)
    return chosen
