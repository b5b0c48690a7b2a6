"""The accuracy-aware loop's decisions, with exporting, measuring and timing replaced by a
script of what each step measured: which layers go float in which order, when the loop stops,
which step it keeps, and what it says when the evaluation half disagrees. The real exports
are tested end to end in test_cli (``export --max-drop``) and test_quantize_debug."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from measured_rows import read_back

from edgekit.common.budget import DropBudget
from edgekit.errors import UserInputError
from edgekit.export import accuracy_aware
from edgekit.export.accuracy_aware import Step, _choose, export_accuracy_aware
from edgekit.sources.data import Dataset, Split

# layer -> the layers reading its output (a float island is the layer and its readers)
READERS = {"features.0": ["features.1"], "features.1": ["classifier"], "classifier": []}
LAYERS = ["features.0", "features.1", "classifier"]


def _dataset(calibration_images: int = 12) -> Dataset:
    x = np.zeros((calibration_images, 1, 2, 2), np.float32)
    split = Split(x, np.arange(calibration_images) % 3)
    return Dataset("tiny", ("a", "b", "c"), split, split, "digest")


# "torch" built at run time, as a loader's string is, so the check compares values
SOURCE = SimpleNamespace(framework=read_back("torch"), name="tiny", module=object(),
                         example_input=lambda: None,
                         predict=lambda x: np.zeros((len(x), 3), np.float32))  # fmt: skip


def _step(index, keep, added, drop, validated=True) -> Step:
    return Step(step=index, keep_float=list(keep), top1=0.9, baseline_top1=0.9,
                drop_points=drop, drop_ci=[drop - 0.5, drop + 0.5], sqnr_db=20.0,
                agreement=0.95, int8_fraction=1.0, p50_ms=None, validation_passed=validated,
                added=list(added))  # fmt: skip


@pytest.fixture
def loop(monkeypatch, tmp_path):
    """Run the loop on a script: ``drops[i]`` (and ``validated[i]``) is what step i measures,
    ``evaluated`` the chosen step's drop on the evaluation half."""
    monkeypatch.setattr("edgekit.quantize.layers.find_layers",
                        lambda module: [SimpleNamespace(name=n) for n in LAYERS])  # fmt: skip
    monkeypatch.setattr("edgekit.quantize.layers.consumers", lambda module, x, names: READERS)

    def run(drops, validated=None, evaluated=None, crash=False, images=12, **options):
        validated = validated or [True] * len(drops)
        seen = SimpleNamespace(exports=[], benched=None, promoted=None, scratch=None)

        def export_step(
            source, dataset, target, keep, directory, *, calibration_samples, validation_samples
        ):
            seen.exports.append(list(keep))
            seen.samples = (calibration_samples, validation_samples)
            seen.scratch = directory.parent
            return SimpleNamespace(path=directory / "step.tflite", index=len(seen.exports) - 1)

        def measure_step(artifact, split, baseline, dataset, *, index, keep, added):
            if crash:
                raise RuntimeError("the runtime crashed")
            assert index == artifact.index
            assert len(split) == images - arguments.get("calibration_samples", 200)
            return _step(index, keep, added, drops[index], validated[index])

        def evaluate(artifact, source, dataset):
            drop = drops[artifact.index] if evaluated is None else evaluated
            return {"split": "evaluation", "samples": 12, "top1": 0.9, "drop_points": drop,
                    "drop_ci": [drop - 0.5, drop + 0.5], "agreement": 0.95}  # fmt: skip

        def promote(artifact, out_dir, steps, chosen, *, budget, evaluation, within):
            seen.promoted = (artifact.index, chosen, within, not budget.on_upper_bound)
            return artifact

        monkeypatch.setattr(accuracy_aware, "_export_step", export_step)
        monkeypatch.setattr(accuracy_aware, "_measure", measure_step)
        monkeypatch.setattr(accuracy_aware, "_bench_steps",
                            lambda steps, *rest: setattr(seen, "benched", len(steps)))  # fmt: skip
        monkeypatch.setattr(accuracy_aware, "_evaluate", evaluate)
        monkeypatch.setattr(accuracy_aware, "_promote", promote)
        arguments = {"max_drop": 1.0, "calibration_samples": 4, "ranking": list(LAYERS),
                     **options}  # fmt: skip
        arguments = {k: v for k, v in arguments.items() if v is not None}  # None: the default
        dataset = _dataset(images)
        result = export_accuracy_aware(SOURCE, dataset, "tflite", out_dir=tmp_path, **arguments)
        return result, seen

    return run


def test_a_first_export_within_budget_keeps_nothing_float(loop):
    result, seen = loop(drops=[0.4])  # upper bound 0.9 <= 1
    assert seen.exports == [[]] and [s.step for s in result.steps] == [0]
    assert seen.promoted == (0, 0, True, False) and seen.benched == 1
    assert result.within_budget and result.warnings == [] and result.max_drop_points == 1.0


def test_each_step_keeps_the_next_ranked_layer_float_with_its_readers(loop):
    result, seen = loop(drops=[3.0, 2.0, 0.2], ranking=["features.1", "features.0", "classifier"])
    assert seen.exports == [
        [],
        ["features.1", "classifier"],
        ["features.1", "classifier", "features.0"],  # its reader features.1 is float already
    ]
    assert [s.added for s in result.steps] == [[], ["features.1", "classifier"], ["features.0"]]
    assert seen.promoted == (2, 2, True, False) and seen.benched == 3


def test_a_ranked_layer_already_float_is_passed_over(loop):
    _, seen = loop(drops=[3.0, 2.0, 0.2], ranking=["features.0", "features.1", "classifier"])
    # features.1 went float with features.0's island: the next island is classifier's
    assert seen.exports[2] == ["features.0", "features.1", "classifier"]


def test_a_step_within_budget_that_failed_validation_does_not_stop_the_loop(loop):
    _, seen = loop(drops=[0.2, 0.3], validated=[False, True])
    assert len(seen.exports) == 2 and seen.promoted[:2] == (1, 1)


def test_the_point_estimate_stops_on_the_drop_not_its_upper_bound(loop):
    _, seen = loop(drops=[0.8, 0.1])  # 0.8's upper bound 1.3 is over
    assert len(seen.exports) == 2
    _, seen = loop(drops=[0.8, 0.1], point_estimate=True)
    assert len(seen.exports) == 1 and seen.promoted == (0, 0, True, True)


def test_the_loop_stops_at_the_step_limit_keeps_the_smallest_drop_and_warns(loop):
    ranking = ["classifier", "features.1", "features.0"]  # three islands, one layer each
    result, seen = loop(drops=[5.0, 3.0, 4.0], ranking=ranking, max_steps=1)
    assert seen.exports == [[], ["classifier"]] and seen.promoted == (1, 1, False, False)
    assert not result.within_budget
    assert result.warnings == [
        "--max-drop 1: the chosen step's drop on the evaluation split is +3.00 [+2.50, +3.50] "
        "after 1 float island(s) (step limit 1); kept the best step"
    ]
    result, seen = loop(drops=[5.0, 3.0, 4.0], ranking=ranking, max_steps=2)
    assert len(seen.exports) == 3 and "after 2 float island(s) (step limit 2)" in result.warnings[0]


def test_the_loop_stops_when_every_ranked_layer_is_float(loop):
    _, seen = loop(drops=[5.0, 3.0, 4.0, 2.0, 2.5], ranking=["features.1", "classifier"])
    # features.1's island holds classifier too: one island, then nothing left to keep float
    assert seen.exports == [[], ["features.1", "classifier"]]
    assert seen.promoted[1] == 1


def test_a_step_within_budget_on_selection_but_over_on_evaluation_is_kept_with_a_warning(loop):
    result, seen = loop(drops=[0.2], evaluated=0.9)  # evaluation's upper bound 1.4
    assert seen.promoted == (0, 0, False, False) and not result.within_budget
    assert result.evaluation["drop_points"] == 0.9
    assert result.warnings[0].startswith("--max-drop 1: the chosen step's drop on the evaluation")


def test_without_bench_the_steps_are_not_timed(loop):
    _, seen = loop(drops=[0.2], bench=False)
    assert seen.benched is None


def test_the_scratch_folder_of_the_steps_is_removed_even_when_a_step_fails(loop, tmp_path):
    with pytest.raises(RuntimeError, match="the runtime crashed"):
        loop(drops=[0.2], crash=True)
    assert not (tmp_path / accuracy_aware.STEPS_DIR).exists()
    _, seen = loop(drops=[0.2])
    assert seen.scratch == tmp_path / accuracy_aware.STEPS_DIR and not seen.scratch.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_drop": -0.5}, "--max-drop must be >= 0 points, got -0.5"),
        ({"calibration_samples": 11}, "tiny: no images left for choosing float layers once "
         "calibration drew 11; use fewer --calibration-samples"),
    ],
)  # fmt: skip
def test_a_budget_below_zero_or_no_images_left_to_choose_on_is_refused(loop, options, message):
    with pytest.raises(UserInputError) as error:
        loop(drops=[], **options)
    assert str(error.value) == message


def test_calibration_and_validation_draw_200_images_each_by_default(loop):
    _, seen = loop(drops=[0.2], images=203, calibration_samples=None)
    assert seen.samples == (200, 200)
    _, seen = loop(drops=[0.2], calibration_samples=5, validation_samples=50)
    assert seen.samples == (5, 50)


def test_a_budget_of_zero_points_is_a_budget(loop):
    result, seen = loop(drops=[0.0, 0.0], max_drop=0.0, max_steps=1)
    assert len(seen.exports) == 2 and not result.within_budget  # [-0.5, 0.5] may exceed 0


def test_two_images_left_are_enough_to_choose_on(loop):
    result, _ = loop(drops=[0.2], calibration_samples=10)
    assert result.within_budget


def test_a_model_that_is_not_torch_is_refused(tmp_path):
    onnx_source = SimpleNamespace(**{**vars(SOURCE), "framework": "onnx"})
    with pytest.raises(UserInputError, match=r"tiny is a onnx model; float islands are chosen"):
        export_accuracy_aware(onnx_source, _dataset(), "tflite", 1.0, tmp_path)


def test_the_kept_step_is_the_first_within_budget_that_passed_validation():
    steps = [_step(0, [], [], 2.0), _step(1, [], [], 0.3, validated=False), _step(2, [], [], 0.4),
             _step(3, [], [], 0.1)]  # fmt: skip
    assert _choose(steps, DropBudget.of(1.0, point_estimate=False)) == 2
    assert (
        _choose(steps, DropBudget.of(0.9, point_estimate=False)) == 2
    )  # 0.4's upper bound 0.9 is at it
    assert _choose(steps, DropBudget.of(0.35, point_estimate=True)) == 3
    # a drop whose interval starts within budget but ends over it is not within
    straddling = [_step(0, [], [], 0.8), _step(1, [], [], 0.2)]  # [0.3, 1.3], then [-0.3, 0.7]
    assert _choose(straddling, DropBudget.of(1.0, point_estimate=False)) == 1


def test_with_no_step_within_budget_the_smallest_upper_bound_that_passed_validation_is_kept():
    steps = [_step(0, [], [], 3.0), _step(1, [], [], 1.5, validated=False), _step(2, [], [], 2.0)]
    assert _choose(steps, DropBudget.of(0.5, point_estimate=False)) == 2
    unvalidated = [_step(0, [], [], 3.0, validated=False), _step(1, [], [], 2.0, validated=False)]
    assert _choose(unvalidated, DropBudget.of(0.5, point_estimate=False)) == 1
    wide, narrow = _step(0, [], [], 2.0), _step(1, [], [], 3.0)
    wide.drop_ci, narrow.drop_ci = [0.0, 4.0], [2.9, 3.1]  # the upper bound decides, not the drop
    assert _choose([wide, narrow], DropBudget.of(0.5, point_estimate=False)) == 1
