"""What quantization changed image by image: flips both ways, per-class drops with intervals,
the flip-risk curve, the collapse detector, and the gates on them through ``edgekit check``."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from cli_helpers import run_cli
from measured_rows import RECORDED
from onnx import numpy_helper

from edgekit.artifacts.artifact import manifest_path
from edgekit.common.fileio import sha256_file
from edgekit.errors import UserInputError
from edgekit.measure.flips import (
    collapse,
    confusion_change,
    flip_risk,
    flips,
    per_class,
    shared_flips,
)
from edgekit.measure.prediction_gates import FlipBound
from edgekit.testing import assert_class_drop, assert_flips

NAMES = tuple(f"class_{i}" for i in range(4))


def one_hot(predicted: list[int], classes: int = 4, strength: float = 5.0) -> np.ndarray:
    logits = np.zeros((len(predicted), classes))
    logits[np.arange(len(predicted)), predicted] = strength
    return logits


def test_flips_are_counted_both_ways_and_name_the_images():
    labels = np.array([0, 1, 2, 3, 0, 1])
    source = one_hot([0, 1, 2, 3, 1, 1])  # image 4 wrong
    artifact = one_hot([0, 2, 2, 3, 0, 3])  # 1 and 5 now wrong, 4 now right
    found = flips(artifact, source, labels)
    assert found["changed"] == 3 and found["indices"] == [1, 4, 5]
    assert (found["right_to_wrong"], found["wrong_to_right"]) == (2, 1)
    assert found["wrong_to_other_wrong"] == 0
    assert sum(b["images"] for b in found["by_margin"]) == 6


def test_a_wrong_answer_that_changes_to_another_wrong_one_is_a_flip_but_not_a_loss():
    labels = np.array([0, 0])
    found = flips(one_hot([2, 0]), one_hot([1, 0]), labels)
    assert found["changed"] == 1 and found["wrong_to_other_wrong"] == 1
    assert found["right_to_wrong"] == found["wrong_to_right"] == 0


def test_per_class_drops_carry_an_interval_and_a_p_adjusted_across_classes():
    labels = np.repeat([0, 1, 2, 3], 10)
    source = one_hot(labels.tolist())
    damaged = labels.copy()
    damaged[:10] = 1  # every image of class 0 now wrong
    changes = per_class(one_hot(damaged.tolist()), source, labels, NAMES)
    by_name = {change.name: change for change in changes}
    assert by_name["class_0"].drop_points == 100.0 and by_name["class_0"].drop_ci == (100.0, 100.0)
    assert by_name["class_1"].drop_points == 0.0 and by_name["class_1"].drop_ci == (0.0, 0.0)
    assert by_name["class_0"].p_value < 0.01
    assert all(change.p_adjusted >= change.p_value for change in changes)
    # Benjamini-Hochberg over the 4 classes: the one small p, ranked first, is multiplied by 4
    assert by_name["class_0"].p_adjusted == pytest.approx(4 * by_name["class_0"].p_value)


def test_a_class_absent_from_the_split_has_no_row():
    labels = np.array([0, 0, 1])
    changes = per_class(one_hot([0, 0, 1]), one_hot([0, 0, 1]), labels, NAMES)
    assert [change.name for change in changes] == ["class_0", "class_1"]


def test_the_confusion_change_shows_where_errors_moved():
    labels = np.array([0, 0, 1])
    change = np.array(confusion_change(one_hot([0, 1, 1]), one_hot([0, 0, 1]), labels, 4))
    assert change[0, 0] == -1 and change[0, 1] == 1  # one class-0 image now called 1
    assert change.sum() == 0 and (change.sum(axis=1) == 0).all()


def test_flips_concentrate_where_the_source_model_hesitated():
    margin = np.linspace(0.0, 1.0, 100)
    flipped = margin < 0.2
    curve = flip_risk(flipped, margin, bins=5)
    assert curve[0]["rate"] == 1.0 and curve[-1]["rate"] == 0.0
    low, high = curve[-1]["rate_ci"]
    assert low == 0.0 < high < 0.2  # zero of 20 still has an upper bound


def test_one_class_for_almost_every_input_is_a_collapse():
    source = one_hot([0, 1, 2, 3] * 5)
    found = collapse(one_hot([2] * 19 + [0]), NAMES, source)
    assert found.collapsed and found.dominant_class == "class_2" and found.dominant_share == 0.95
    assert "class_2" in found.reason and "25%" in found.reason


def test_outputs_that_barely_move_are_a_collapse_without_labels():
    rng = np.random.default_rng(0)
    constant = np.tile([0.1, 0.2, 0.3, 0.4], (20, 1)) + 1e-9 * rng.random((20, 4))
    found = collapse(constant, NAMES)
    assert found.collapsed and "nearly constant" in found.reason


def test_a_source_that_predicts_one_class_that_often_explains_the_artifact():
    mostly_zero = one_hot([0] * 18 + [1, 2])
    assert not collapse(mostly_zero, NAMES, mostly_zero).collapsed
    assert collapse(mostly_zero, NAMES).collapsed  # the same outputs, no source to explain them
    assert not collapse(one_hot([0, 1, 2, 3] * 5), NAMES).collapsed
    two_classes = one_hot([0] * 18 + [1, 1], classes=2)
    assert not collapse(two_classes, ("cat", "dog")).collapsed  # no source: 2 classes may


def test_shared_flips_say_which_images_flip_on_several_artifacts():
    shared = shared_flips({"tflite/int8": [1, 2, 3], "onnx/int8": [2, 3, 4], "pte/int8": [3]})
    assert shared["flipped_by_all"] == [3]
    first = shared["pairs"][0]
    assert (first["a"], first["b"], first["both"], first["jaccard"]) == (
        "tflite/int8", "onnx/int8", 2, 0.5)  # fmt: skip


@pytest.mark.parametrize(("text", "samples", "limit"), [("5", 899, 5.0), ("2%", 500, 10.0)])
def test_max_flips_is_a_count_or_a_share(text, samples, limit):
    assert FlipBound.parse(text).limit(samples) == limit


@pytest.mark.parametrize("text", ["1.5", "-1", "many", "%"])
def test_a_max_flips_that_is_neither_is_refused(text):
    with pytest.raises(UserInputError, match=f"--max-flips {text}: expected a count"):
        FlipBound.parse(text)


def _with_class_bias(artifact, tmp_path, name: str, class_index: int, shift: float):
    """The onnx artifact with one class's output bias moved: a file that runs but has lost that
    class (shift < 0) or gives it to everything (shift > 0), as a broken int8 does."""
    model = onnx.load(artifact.path)
    gemm = [node for node in model.graph.node if node.op_type == "Gemm"][-1]
    for initializer in model.graph.initializer:
        if initializer.name == gemm.input[2]:
            bias = numpy_helper.to_array(initializer).copy()
            bias[class_index] += shift
            initializer.CopyFrom(numpy_helper.from_array(bias, initializer.name))
    path = tmp_path / name
    onnx.save(model, path)
    moved = {"size": path.stat().st_size, "sha256": sha256_file(path), "name": path.name}
    manifest_path(path).write_text(json.dumps(artifact.manifest.replace(file=moved).to_dict()))
    return path


def test_check_passes_a_faithful_file_on_every_prediction_gate(export_digits, capsys):
    path = export_digits("onnx", "fp32").path
    result = run_cli(capsys, "check", str(path), "--max-class-drop", "0.5", "--max-flips", "0",
                     "--fail-on-collapse", "--json")  # fmt: skip
    assert result.code == 0, result.err
    gates = json.loads(result.out)["gates"]
    assert [g["passed"] for g in gates] == [True, True, True]
    assert gates[1]["measured"] == 0


def test_check_fails_a_lost_class_and_names_it_with_its_interval(export_digits, tmp_path, capsys):
    lost = _with_class_bias(export_digits("onnx", "fp32"), tmp_path, "lost3.onnx", 3, -100.0)
    result = run_cli(capsys, "check", str(lost), "--max-class-drop", "5", "--max-drop", "20")
    assert result.code == 1, result.err
    assert "class '3': drop" in result.out and "FAIL" in result.out
    interval = result.out.split("class '3': drop")[1].split("points")[0]
    low, high = (float(x) for x in interval.split("[")[1].split("]")[0].split(","))
    assert 50.0 < low <= high <= 100.0
    with pytest.raises(AssertionError, match="class '3'"):
        assert_class_drop(lost, max_class_drop=5.0)


def test_check_fails_a_collapsed_file_counts_its_flips_and_takes_a_threshold(
    export_digits, tmp_path, capsys
):
    collapsed = _with_class_bias(export_digits("onnx", "fp32"), tmp_path, "all7.onnx", 7, 100.0)
    result = run_cli(capsys, "check", str(collapsed), "--fail-on-collapse", "--max-flips", "2%",
                     "--json")  # fmt: skip
    assert result.code == 1
    flipped, collapse_gate = json.loads(result.out)["gates"]
    assert not flipped["passed"] and flipped["measured"] > 700  # 9 of 10 classes flip
    assert (
        not collapse_gate["passed"]
        and "predicts '7' for 100% of the inputs" in (collapse_gate["detail"])
    )
    with pytest.raises(AssertionError, match="collapse"):
        assert_flips(collapsed, max_flips="100%")
    # a file that gives class 7 to about two thirds of the inputs: a collapse at a threshold of
    # one half, not at the default 0.8
    leaning = _with_class_bias(export_digits("onnx", "fp32"), tmp_path, "more7.onnx", 7, 7.0)
    assert run_cli(capsys, "check", str(leaning), "--fail-on-collapse").code == 0
    strict = run_cli(capsys, "check", str(leaning), "--fail-on-collapse", "--collapse-share",
                     "0.5", "--json")  # fmt: skip
    assert strict.code == 1
    [gate] = json.loads(strict.out)["gates"]
    assert 0.5 <= gate["measured"] < 0.8 and "predicts '7' for" in gate["detail"]


def test_eval_prints_the_flips_and_results_carry_them(export_digits, tmp_path, capsys):
    lost = _with_class_bias(export_digits("onnx", "fp32"), tmp_path, "lost3.onnx", 3, -100.0)
    result = run_cli(capsys, "eval", str(lost), str(export_digits("onnx", "fp32").path), "--json")
    assert result.code == 0, result.err
    damaged, faithful = json.loads(result.out)
    counted = damaged["flips"]
    ways = ("right_to_wrong", "wrong_to_right", "wrong_to_other_wrong")
    assert counted["changed"] == sum(counted[way] for way in ways) == len(counted["indices"])
    assert counted["right_to_wrong"] > 80  # the images of class 3
    assert faithful["flips"]["changed"] == 0 and faithful["flips"]["indices"] == []
    assert {c["name"] for c in damaged["per_class"] if c["drop_ci"][0] > 0} == {"3"}
    assert damaged["per_class_correction"].startswith("Benjamini-Hochberg")
    assert not damaged["collapse"]["collapsed"]
    # every image that lost class 3 flips was the source's 3, which the all-7 file flips too
    all7 = _with_class_bias(export_digits("onnx", "fp32"), tmp_path, "all7.onnx", 7, 100.0)
    table = run_cli(capsys, "eval", str(lost), str(all7), str(export_digits("onnx", "fp32").path))
    assert "worst class '3'" in table.out and "all7.onnx" in table.out
    assert f"the same images flip: {counted['changed']} flipped on all 2;" in table.out
    assert "COLLAPSED: predicts '7'" in table.err + table.out


def test_check_applies_the_prediction_gates_to_every_row_of_a_run(tmp_path, capsys):
    import shutil

    shutil.copy(RECORDED, tmp_path / "results.json")
    rows = [r for r in json.loads(RECORDED.read_text())["rows"]
            if r["kind"] == "artifact" and r.get("accuracy")]  # fmt: skip
    result = run_cli(capsys, "check", str(tmp_path), "--max-flips", "100%", "--fail-on-collapse",
                     "--json")  # fmt: skip
    assert result.code == 0, result.err
    gates = json.loads(result.out)["gates"]
    assert len(gates) == 2 * len(rows) > 0
    tight = run_cli(capsys, "check", str(tmp_path), "--max-flips", "0", "--json")
    int8 = [r for r in rows if r["recipe"] == "int8" and r["accuracy"]["flips"]["changed"]]
    assert tight.code == (1 if int8 else 0)
