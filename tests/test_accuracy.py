"""``edgekit eval`` and ``edgekit check``: accuracy against the baseline with confidence, gates
that fail when they should, and the pytest plugin a user's CI calls."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from cli_helpers import copy_artifact, run_cli
from onnx import numpy_helper

from edgekit.artifacts.artifact import manifest_path
from edgekit.common.fileio import sha256_file
from edgekit.measure.accuracy import evaluate_artifact
from edgekit.testing import assert_accuracy_drop


def _damaged_copy(artifact, tmp_path):
    """The onnx artifact with one conv's weights scrambled, its manifest digest updated so the
    file still loads: a model that runs but has lost accuracy."""
    model = onnx.load(artifact.path)
    conv_weights = {node.input[1] for node in model.graph.node if node.op_type == "Conv"}
    rng = np.random.default_rng(0)
    for initializer in model.graph.initializer:
        if (
            initializer.name in conv_weights
            and len(initializer.dims) == 4
            and initializer.dims[0] >= 16
        ):
            weights = numpy_helper.to_array(initializer)
            initializer.CopyFrom(
                numpy_helper.from_array(
                    rng.permutation(weights.ravel()).reshape(weights.shape), initializer.name
                )
            )
            break
    damaged = tmp_path / "damaged.onnx"
    onnx.save(model, damaged)
    moved = {"size": damaged.stat().st_size, "sha256": sha256_file(damaged), "name": damaged.name}
    manifest_path(damaged).write_text(json.dumps(artifact.manifest.replace(file=moved).to_dict()))
    return damaged


def test_eval_reports_every_figure_against_the_baseline(export_digits):
    record = evaluate_artifact(str(export_digits("onnx", "fp32").path))
    assert record.samples == 899
    assert record.top1 == record.baseline_top1 >= 0.97
    assert record.drop_points == 0.0 and record.drop_ci == (0.0, 0.0)
    assert record.agreement == 1.0 and record.sqnr_db > 60
    assert record.top5 is not None and record.top5 >= record.top1
    assert record.mcnemar["p_value"] == 1.0


def test_int8_shows_a_measured_drop_with_its_interval(export_digits):
    record = evaluate_artifact(str(export_digits("onnx", "int8").path))
    low, high = record.drop_ci
    assert low <= record.drop_points <= high
    assert record.agreement >= 0.97 and 20 < record.sqnr_db < 60
    assert abs(record.drop_points) < 2.0


def test_artifacts_measured_against_one_source_share_its_logits(
    export_digits, source_forward_passes
):
    import torch

    from edgekit.measure.accuracy import source_for

    fp32, int8 = export_digits("onnx", "fp32"), export_digits("onnx", "int8")
    source = source_for(fp32)
    shared = [evaluate_artifact(a, source=source) for a in (fp32, int8, int8)]
    assert source_forward_passes == [
        899
    ]  # one forward pass of the source for the three evaluations
    evaluate_artifact(int8, source=source, limit=100)  # other images
    assert source_forward_passes == [899, 100]

    with torch.no_grad():  # the same module with one weight changed in place runs again
        next(source.module.parameters()).mul_(0.5)
    changed = evaluate_artifact(int8, source=source)
    assert source_forward_passes == [899, 100, 899]
    assert changed.sqnr_db != shared[1].sqnr_db


def test_a_source_reloaded_from_the_manifest_runs_once_per_process(
    export_digits, source_forward_passes
):
    int8 = export_digits("onnx", "int8").path
    first, again = evaluate_artifact(int8), evaluate_artifact(int8)  # as two gates would
    assert source_forward_passes == [899]
    assert first.to_dict() | {"fingerprint": None} == again.to_dict() | {"fingerprint": None}


def test_a_damaged_artifact_fails_the_gate_and_a_good_one_passes(export_digits, tmp_path, capsys):
    good = export_digits("onnx", "fp32").path
    damaged = _damaged_copy(export_digits("onnx", "fp32"), tmp_path)
    passed = run_cli(capsys, "check", str(good), "--max-drop", "1.0", "--min-agreement", "0.99")
    assert passed.code == 0, passed.err
    assert "PASS" in passed.out and "FAIL" not in passed.out
    failed = run_cli(capsys, "check", str(damaged), "--max-drop", "1.0", "--json")
    assert failed.code == 1
    gates = json.loads(failed.out)["gates"]
    assert gates[0]["passed"] is False and gates[0]["measured"] > 1.0


def test_an_absurdly_tight_bound_fails(export_digits, capsys):
    result = run_cli(capsys, "check", str(export_digits("onnx", "fp32").path), "--min-sqnr", "1000")
    assert result.code == 1 and "FAIL" in result.out and "1 of 1 gate(s) failed" in result.err


def test_a_modified_artifact_is_refused(export_digits, tmp_path, capsys):
    copy = copy_artifact(export_digits("onnx", "fp32").path, tmp_path)
    with open(copy, "ab") as handle:
        handle.write(b"tampered")
    result = run_cli(capsys, "eval", str(copy))
    assert result.code == 2 and "file does not match its manifest" in result.err


def test_a_dataset_with_other_classes_or_labels(export_digits, tmp_path, capsys):
    artifact = str(export_digits("onnx", "fp32").path)
    classes = tmp_path / "classes.npz"
    np.savez(
        classes, x=np.zeros((4, 8, 8)), y=np.array([0, 1, 0, 1]), class_names=np.array(["a", "b"])
    )
    result = run_cli(capsys, "eval", artifact, "--data", str(classes))
    assert result.code == 2 and "dataset has 2 classes but the model has 10" in result.err
    labels = tmp_path / "labels.npz"
    np.savez(labels, x=np.zeros((4, 8, 8)), y=np.array([0, 1, 10, 11]))
    result = run_cli(capsys, "eval", artifact, "--data", str(labels))
    assert result.code == 2 and "labels out of range" in result.err


def test_the_pytest_helper_fails_with_the_gate_table(export_digits, tmp_path):
    assert_accuracy_drop(export_digits("onnx", "fp32").path, max_drop=0.5, min_agreement=0.99)
    damaged = _damaged_copy(export_digits("onnx", "fp32"), tmp_path)
    with pytest.raises(
        AssertionError, match=r"(?s)edgekit accuracy gate failed:\n.*drop upper bound \(95%\).*FAIL"
    ):
        assert_accuracy_drop(damaged, max_drop=1.0)


def test_the_plugin_fixture_is_registered(pytester, export_digits, monkeypatch, weights_cache):
    artifact = export_digits("onnx", "fp32").path
    # pytester gives the inner run a fresh HOME; point it at the trained weights we already have
    monkeypatch.setenv("EDGEKIT_CACHE", weights_cache)
    pytester.makepyfile(
        f"""
        def test_agreement(edgekit_eval):
            assert edgekit_eval({str(artifact)!r}).agreement == 1.0
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
