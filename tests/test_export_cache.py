"""``edgekit run`` converts each (model, target, recipe, data, versions, code, machine) once per
machine: a second run copies the stored export, and says so in the manifest."""

from __future__ import annotations

import json

import pytest

import edgekit.export.cache as export_cache
from edgekit.artifacts.artifact import load_artifact, manifest_path
from edgekit.common.fileio import sha256_file


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The store in a fresh cache, and a count of the real exports behind it."""
    monkeypatch.setenv("EDGEKIT_CACHE", str(tmp_path / "cache"))
    calls = []
    real = export_cache.export_artifact

    def export(*args, **kwargs):
        calls.append(args[2:4])
        return real(*args, **kwargs)

    monkeypatch.setattr(export_cache, "export_artifact", export)
    return calls


def test_the_second_export_of_the_same_inputs_is_a_copy_that_says_so(
    counted, digits_model, digits_data, tmp_path
):
    first = export_cache.cached_export(digits_model, digits_data, "onnx", "fp32", tmp_path / "a")
    second = export_cache.cached_export(digits_model, digits_data, "onnx", "fp32", tmp_path / "b")
    assert counted == [("onnx", "fp32")]
    assert sha256_file(second.artifact.path) == sha256_file(first.artifact.path)
    assert second.artifact.path.parent == tmp_path / "b"
    reused = json.loads(manifest_path(second.artifact.path).read_text())["reused"]
    assert reused["made"] == first.artifact.manifest.created and len(reused["export_cache"]) == 24
    assert first.artifact.manifest.reused is None
    assert load_artifact(second.artifact.path).manifest.file.sha256 == sha256_file(
        second.artifact.path
    )  # the copy verifies against its manifest like any export


def test_another_recipe_other_code_or_other_data_is_exported_afresh(
    counted, monkeypatch, digits_model, digits_data, tmp_path
):
    from edgekit.sources.data import load_dataset
    from edgekit.sources.load import load_model

    export_cache.cached_export(digits_model, digits_data, "onnx", "fp32", tmp_path)
    export_cache.cached_export(digits_model, digits_data, "onnx", "fp16", tmp_path)
    export_cache.cached_export(digits_model, digits_data, "onnx", "fp32", tmp_path, 100)
    # other images to calibrate and validate on: the same model, the same options
    other_data = load_dataset("synthetic:64", digits_model.preprocess)
    export_cache.cached_export(digits_model, other_data, "onnx", "fp32", tmp_path)
    # other weights: the same architecture and preprocessing, one channel rescaled
    other_model = load_model("damaged_models:outlier_mobilenet", quiet=True)
    assert other_model.digest != digits_model.digest
    export_cache.cached_export(other_model, digits_data, "onnx", "fp32", tmp_path)
    monkeypatch.setattr(export_cache, "code_digest", lambda: "an edited edgekit")
    export_cache.cached_export(digits_model, digits_data, "onnx", "fp32", tmp_path)
    assert counted == [("onnx", "fp32"), ("onnx", "fp16")] + [("onnx", "fp32")] * 4


def test_the_store_keeps_its_newest_entries_within_its_size(
    counted, digits_model, digits_data, tmp_path
):
    import os

    for recipe in ("fp32", "fp16"):
        export_cache.cached_export(digits_model, digits_data, "onnx", recipe, tmp_path)
    store = export_cache.store_dir()
    older, newer = sorted(store.iterdir(), key=lambda p: p.stat().st_mtime)
    os.utime(older, (1, 1))
    sizes = {p: sum(f.stat().st_size for f in p.iterdir()) for p in (older, newer)}
    assert export_cache.prune(store, sizes[newer]) == [older]
    assert sorted(store.iterdir()) == [newer]


def test_run_can_be_told_not_to_reuse(tmp_path):
    from edgekit.run.config import RunConfig

    path = tmp_path / "edgekit.toml"
    path.write_text("[run]\nexport_cache = false\n")
    assert RunConfig.from_toml(path).export_cache is False and RunConfig().export_cache is True
