"""The module paths from before the tree became one folder per stage still import, for one
release: each is the very module of its new path, under a MovedPathWarning that names it. The
suite itself uses only the new paths (pyproject's filterwarnings makes the warning an error)."""

from __future__ import annotations

import importlib
import sys

import pytest

import edgekit
from edgekit.errors import MovedPathWarning


@pytest.mark.parametrize(("old", "new"), sorted(edgekit.MOVED_MODULES.items()))
def test_an_old_module_path_is_the_new_module_under_a_warning(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(MovedPathWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # the new home keeps its own spec


def test_a_function_imported_from_its_old_module_is_the_same_function(monkeypatch):
    monkeypatch.delitem(sys.modules, "edgekit.artifact", raising=False)
    with pytest.warns(MovedPathWarning, match="edgekit.artifacts.artifact"):
        from edgekit.artifact import load_artifact
    from edgekit.artifacts.artifact import load_artifact as today

    assert load_artifact is today


def test_the_export_package_still_gives_the_old_modules_functions_under_a_warning():
    from edgekit.export import pipeline

    with pytest.warns(MovedPathWarning, match="edgekit.export.pipeline.export_artifact"):
        from edgekit.export import export_artifact
    assert export_artifact is pipeline.export_artifact
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = edgekit.export.nothing  # type: ignore[attr-defined]


def test_a_name_that_never_was_a_module_is_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("edgekit.no_such_module")


def test_the_timing_plan_under_its_old_name_is_latency_protocol_under_a_warning():
    from edgekit.worker.latency import LatencyProtocol

    with pytest.warns(MovedPathWarning, match="now LatencyProtocol"):
        from edgekit.worker.latency import Protocol
    assert Protocol is LatencyProtocol


@pytest.mark.parametrize(
    ("module", "new"),
    [("edgekit.measure.bench", "measure_interleaved"), ("edgekit.run.matrix", "measure_models")],
)
def test_a_function_once_called_measure_is_its_new_name_under_a_warning(module, new):
    loaded = importlib.import_module(module)
    with pytest.warns(MovedPathWarning, match=f"now {new}"):
        old = loaded.measure
    assert old is getattr(loaded, new)
