"""Targets and devices from outside edgekit: modules named by the ``edgekit.plugins`` entry-point
group of any installed distribution, or by ``EDGEKIT_PLUGINS`` (comma-separated module names, so
child processes see them too). A plugin module registers itself when imported: one package plus
one ``add_target``/``add_device`` line."""

from __future__ import annotations

import importlib
import os
from importlib import metadata

from edgekit.errors import UserInputError, first_line

PLUGINS_ENV = "EDGEKIT_PLUGINS"
_loaded: set[str] = set()


def plugin_modules() -> list[str]:
    named = [entry.value for entry in metadata.entry_points(group="edgekit.plugins")]
    named += [part.strip() for part in os.environ.get(PLUGINS_ENV, "").split(",") if part.strip()]
    return list(dict.fromkeys(named))


def load_plugins() -> None:
    """Import every plugin module once; a plugin that does not import is one line."""
    for name in plugin_modules():
        if name in _loaded:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # said again by every later call: never silently dropped
            raise UserInputError(
                f"plugin {name}: does not import ({type(exc).__name__}: {first_line(exc)})"
            ) from None
        _loaded.add(name)
