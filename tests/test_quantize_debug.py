"""quantize-debug and ``--max-drop`` on a model int8 provably hurts in one place.

``damaged_models:outlier_mobilenet`` is digits-mobilenet with one output channel of
``block6.project`` scaled x150 and ``head`` scaled back (same fp32 logits): the tensor between
them gets one per-tensor scale set by the outlier. Measured (64 calibration samples; evaluation
split, 899 images, budget 1 point):

- ranking: block6.project first, only-int8 3.5 dB at the model output; every other layer
  >= 33 dB (head 33.3, stem 41.2). All-but-block6.project 30.5 dB against 3.3 dB all-int8.
  Cumulative SQNR shows the damage at the *consumer* (head 2.6 dB), as do the targets' own
  tools at head: onnxruntime xmodel_err 2.6 dB, ai-edge-quantizer 10.0 dB, PT2E -4 dB.
- --max-drop 1: onnx 23.1 -> -0.1 points, tflite 9.9 -> -0.1, executorch 8.5 -> -0.2, each in
  one step that keeps block6.project + head float (int8 fraction 91-92 %).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from damaged_models import CONSUMER, DAMAGED_LAYER
from scripted_sides import NO_GUARD

from edgekit.analysis.crosscheck import crosscheck_report
from edgekit.common.metrics import compare_outputs
from edgekit.errors import UnsupportedExport, UserInputError
from edgekit.export.accuracy_aware import STEPS_DIR, export_accuracy_aware
from edgekit.quantize.sensitivity import analyze, plot, table
from edgekit.results import precision_label
from edgekit.sources.load import load_model
from edgekit.sources.source import SourceModel

DAMAGED = "damaged_models:outlier_mobilenet"
BUDGET = 1.0  # top-1 points
TARGETS = ("onnx", "tflite", "executorch")
CALIBRATION = 32  # samples per export: XNNPACK's histogram observers make 200 slow on 2 cores


@pytest.fixture(scope="module")
def damaged():
    return load_model(DAMAGED, quiet=True)


@pytest.fixture(scope="module")
def damaged_data(damaged):
    from edgekit.sources.data import load_dataset

    return load_dataset("digits", damaged.preprocess)


@pytest.fixture(scope="module")
def calibration_x(damaged_data):
    from edgekit.quantize.calibration import sample_calibration

    return sample_calibration(damaged_data, 200).x


@pytest.fixture(scope="module")
def report(damaged, calibration_x):
    return analyze(damaged, calibration_x, samples=32)


def test_the_damage_is_invisible_in_fp32(damaged, digits_model, digits_data):
    x = digits_data.evaluation.x[:200]
    figures = compare_outputs(digits_model.predict(x), damaged.predict(x))
    assert figures["top1_agreement"] == 1.0 and figures["sqnr_db"] > 60


def test_table_ranks_the_damaged_layer_first(report):
    worst, runner_up = report.layers[0], report.layers[1]
    assert worst.name == DAMAGED_LAYER
    assert worst.only_db < 10 and runner_up.only_db > 25  # measured 3.5 and 33.3 dB
    # keeping it float gives the model back; keeping anything else does not
    assert worst.all_but_db > report.all_int8_db + 20
    assert all(layer.all_but_db < report.all_int8_db + 3 for layer in report.layers[1:5])
    # its output tensor is float only with its consumer float too
    assert worst.float_island == [DAMAGED_LAYER, CONSUMER]
    # the cumulative error only shows at the consumer: why the table ranks by isolated harm
    assert report.layer(CONSUMER).cumulative_db < 10 < worst.cumulative_db
    header, rows = table(report)
    assert header[:4] == ["#", "layer", "op", "only int8 dB"]
    assert rows[0][:3] == ["1", DAMAGED_LAYER, "Conv2d"]
    assert json.loads(json.dumps(report.to_dict()))["layers"][0]["name"] == DAMAGED_LAYER


@pytest.mark.parametrize("target", TARGETS)
def test_crosscheck_on_each_targets_own_quantizer(report, damaged, calibration_x, target):
    checked = crosscheck_report(report, damaged, calibration_x, target)
    assert checked.layers[0].name == DAMAGED_LAYER  # the ranking is the same for every target
    assert checked.target == target and checked.crosscheck
    assert not checked.notes  # every layer mapped back to its module path
    head, stem = checked.layer(CONSUMER).artifact_db, checked.layer("stem").artifact_db
    # measured at head: onnx 2.6 dB, tflite 10.0, executorch -4; stem 40-42.5 everywhere
    assert head < 15 and stem > 35


@pytest.mark.parametrize("target", TARGETS)
def test_max_drop_keeps_the_damaged_tensor_float(report, damaged, damaged_data, target, tmp_path):
    from edgekit.worker.latency import LatencyProtocol

    result = export_accuracy_aware(
        damaged,
        damaged_data,
        target,
        BUDGET,
        tmp_path,
        calibration_samples=CALIBRATION,
        validation_samples=50,  # each export's own check; the drop is measured on all of them
        ranking=report.ranking(),
        bench_protocol=LatencyProtocol(
            warmup=2,
            min_runs=5,
            min_seconds=0.0,
            max_seconds=2.0,
            rounds=3,
            block_seconds=0.02,
            sessions=1,
            precision=None,
        ),
        bench_guard=NO_GUARD,
    )
    first, last = result.steps[0], result.steps[-1]
    assert first.keep_float == [] and first.drop_points > 5  # measured 8.5 to 23.1 points
    assert len(result.steps) == 2 and result.within_budget and not result.warnings
    # the loop stopped on the upper bound of the interval, on the selection slice ...
    assert last.keep_float == [DAMAGED_LAYER, CONSUMER] and last.drop_ci[1] <= BUDGET
    # ... and the evaluation half, which played no part in the choice, reports the result
    final = result.evaluation
    assert final["split"] == "evaluation" and final["samples"] == 899
    assert final["drop_ci"][1] <= BUDGET
    assert result.keep_float == [DAMAGED_LAYER, CONSUMER]
    assert first.int8_fraction == 1.0 and 0.85 < last.int8_fraction < 1.0
    assert all(step.p50_ms and step.p50_ms > 0 for step in result.steps)
    low, high = last.ratio_ci  # the island's price, interleaved with step 0
    assert low <= last.ratio_to_first <= high

    manifest = result.artifact.manifest
    assert precision_label(manifest) == "int8 (2 layers float)"
    recorded = manifest.accuracy_aware
    assert recorded["chosen_step"] == 1 and len(recorded["steps"]) == 2
    assert recorded["rule"].startswith("upper bound")
    assert result.artifact.path.parent == tmp_path and not (tmp_path / STEPS_DIR).exists()
    on_disk = json.loads(
        result.artifact.path.with_name(result.artifact.path.name + ".json").read_text()
    )
    assert on_disk["keep_float"] == [DAMAGED_LAYER, CONSUMER]
    # the file itself: exactly the two convolutions of the island run in float
    coverage = manifest.coverage
    assert coverage["int8_ops"] == coverage["compute_ops"] - 2
    _assert_recorded_float(target, manifest.details)


def _assert_recorded_float(target: str, details: dict) -> None:
    """Each target's own record of what it left float."""
    if target == "onnx":
        assert details["nodes_excluded"]  # ONNX nodes whose name_scopes are these modules
    elif target == "executorch":
        assert details["keep_float"] == [DAMAGED_LAYER, CONSUMER]
    else:
        assert details["float_ops"] == {DAMAGED_LAYER: ["CONV_2D"], CONSUMER: ["CONV_2D"]}


def test_cli_json_and_plot(tmp_path, capsys):
    from cli_helpers import run_cli

    picture = tmp_path / "layers.png"
    args = ["quantize-debug", "--model", DAMAGED, "--samples", "32", "--json", "--plot", picture]
    result = run_cli(capsys, *[str(arg) for arg in args])
    assert result.code == 0, result.err
    payload = json.loads(result.out)
    assert payload["layers"][0]["name"] == DAMAGED_LAYER
    assert payload["layers"][0]["float_island"] == [DAMAGED_LAYER, CONSUMER]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_weights_replace_the_factory_s_own(report, digits_model, tmp_path, capsys):
    import torch
    from cli_helpers import run_cli

    # the undamaged model's state dict, loaded into the damaged factory: the outlier is gone
    healthy = tmp_path / "healthy.pt"
    torch.save(digits_model.module.state_dict(), healthy)
    result = run_cli(capsys, "quantize-debug", "--model", DAMAGED, "--weights", str(healthy),
                     "--samples", "32", "--top", "1", "--json")  # fmt: skip
    assert result.code == 0, result.err
    repaired = json.loads(result.out)
    assert repaired["all_int8_db"] > report.all_int8_db + 3
    only = next(layer["only_db"] for layer in repaired["layers"] if layer["name"] == DAMAGED_LAYER)
    assert only > report.layer(DAMAGED_LAYER).only_db + 3, (only, repaired["all_int8_db"])


def test_plot_writes_a_png(report, tmp_path):
    path = plot(report, tmp_path / "sub" / "plot.png")
    assert path.stat().st_size > 10_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # a PNG, not any file that large


def test_precision_label():
    assert precision_label({"recipe": "int8"}) == "int8"
    assert precision_label({"recipe": "int8", "keep_float": ["a"]}) == "int8 (1 layer float)"
    row = {"recipe": "int8", "details": {"keep_float": ["a", "b"]}}
    assert precision_label(row) == "int8 (2 layers float)"


def test_non_torch_models_and_bad_budgets_say_why(digits_model, digits_data):
    keras_like = SourceModel("k", "keras", None, digits_model.preprocess, "d", "s")
    with pytest.raises(UnsupportedExport, match="needs a torch source"):
        analyze(keras_like, np.zeros((4, 1, 32, 32), np.float32))
    with pytest.raises(UserInputError, match="--max-drop must be >= 0"):
        export_accuracy_aware(digits_model, digits_data, "onnx", -1.0, "unused")
