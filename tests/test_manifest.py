"""The manifest beside every artifact, as callers read it: typed properties over the JSON the
export wrote, read-only, given back whole for writing and for a child process."""

import json
import pickle

import pytest

from edgekit.artifacts.artifact import load_artifact, manifest_path
from edgekit.targets.manifest import Manifest


def test_the_properties_read_what_the_export_wrote(export_digits):
    artifact = export_digits("onnx", "int8")
    written = json.loads(manifest_path(artifact.path).read_text())
    manifest = load_artifact(artifact.path).manifest

    assert (manifest.target, manifest.recipe) == ("onnx", "int8")
    assert manifest.file.size == artifact.path.stat().st_size == written["file"]["size"]
    assert manifest.file.sha256 == written["file"]["sha256"]
    assert manifest.input.shape == written["input"]["shape"]
    assert manifest.output.dtype == written["output"]["dtype"]
    assert manifest.inputs == [written["input"]]  # one input: the list of one
    assert manifest.source.digest == written["source"]["digest"]
    assert manifest.source.to_dict() == written["source"]
    assert manifest.validation == written["validation"] and manifest.validation["passed"]
    assert manifest.coverage == written["coverage"]
    assert manifest.class_names == written["class_names"]
    assert not manifest.is_foreign and manifest.classifier and manifest.foreign is None
    assert manifest.reused is None
    assert manifest.to_dict() == written


def test_a_manifest_cannot_be_changed_under_its_readers(export_digits):
    manifest = export_digits("onnx", "fp32").manifest
    with pytest.raises(TypeError):
        manifest.fields["recipe"] = "int8"  # type: ignore[index]
    with pytest.raises(TypeError):
        manifest.fields["file"]["size"] = 1  # type: ignore[index]
    # what a property hands out is a copy: changing it changes nothing
    manifest.coverage["fast_ops"] = -1
    manifest.warnings.append("not mine")
    assert manifest.coverage["fast_ops"] >= 0 and "not mine" not in manifest.warnings


def test_replace_makes_a_changed_copy_and_leaves_the_original():
    original = Manifest({"target": "onnx", "recipe": "fp32", "warnings": ["a"]})
    changed = original.replace(warnings=[*original.warnings, "b"])
    assert changed.warnings == ["a", "b"] and original.warnings == ["a"]
    assert changed.get("unknown", "default") == "default"


def test_a_manifest_travels_to_a_child_or_a_node_whole(export_digits):
    manifest = export_digits("tflite", "fp16").manifest
    assert pickle.loads(pickle.dumps(manifest)) == manifest  # a cluster task pickles it
    assert Manifest(json.loads(json.dumps(manifest.to_dict()))) == manifest  # a worker's JSON
