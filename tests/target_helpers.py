"""Exporting through one target directly, as the export pipeline calls it, and measuring what it
made against the source model, for target tests."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edgekit.common.metrics import compare_outputs
from edgekit.targets import TARGET_MODULES, remove_target, target_names
from edgekit.targets.base import ExportRequest, Manifest

PLUGINS = Path(__file__).parent / "plugins"
PLUGIN_TARGET = "torchscript_target"  # a fourth target, as a user's plugin defines one


@contextmanager
def plugin_target_registered(monkeypatch=None) -> Iterator[None]:
    """tests/plugins/torchscript_target.py registered, as EDGEKIT_PLUGINS would, and
    unregistered after, so the worker's other tests see the built-in targets only. Given
    ``monkeypatch``, the child processes a measurement starts load it too."""
    before = set(TARGET_MODULES)
    if monkeypatch is not None:
        monkeypatch.setenv("EDGEKIT_PLUGINS", PLUGIN_TARGET)
        monkeypatch.setenv("PYTHONPATH", str(PLUGINS))
    sys.path.insert(0, str(PLUGINS))
    try:
        importlib.import_module(PLUGIN_TARGET)
        yield
    finally:
        sys.path.remove(str(PLUGINS))
        sys.modules.pop(PLUGIN_TARGET, None)
        for name in set(TARGET_MODULES) - before:
            remove_target(name)


def registered_targets() -> list[str]:
    """Every target of the registry, the plugin's included: what contract tests run over."""
    with plugin_target_registered():
        return target_names()


def export_raw(target, source, recipe: str, directory: Path, calibration=None, **options):
    """Export to a name without the target's suffix (the pipeline renames later) and build the
    manifest fields sessions read: -> (path, manifest, ExportInfo)."""
    io = options.get("io_dtype", "float32")
    path = directory / f"{source.name}-{recipe}-{io}.partial"
    info = target.export(ExportRequest(source, recipe, path, calibration=calibration, **options))
    manifest = Manifest(
        {
            "input": info.input.to_dict(),
            "output": info.output.to_dict(),
            "recipe": recipe,
            "details": info.details,
        }
    )
    return path, manifest, info


def measure(target, path, manifest, reference, **options):
    """The file opened through ``target`` (``options`` as a session takes them) on the reference
    images: -> (its outputs compared with the source model's, the session's runtime info)."""
    x, expected = reference
    session = target.open(path, manifest, **options)
    try:
        return compare_outputs(expected, session.predict(x)), session.info
    finally:
        session.close()
