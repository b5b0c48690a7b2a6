"""Property-based: any mutation of a valid manifest, results.json, edgekit.toml or .npz gives a
one-line error (UserInputError, the CLI's exit 2) or a correct result, never another exception."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import copy_artifact
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from measured_rows import RECORDED

from edgekit.errors import MovedPathWarning, UserInputError
from edgekit.results import check_row

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:3]):
            found += _paths(inner, (*prefix, index))
    return found


@st.composite
def mutated(draw, original: dict) -> dict:
    """``original`` with one value replaced by a random JSON value, or one key deleted."""
    payload = copy.deepcopy(original)
    path = draw(st.sampled_from(_paths(payload)[1:]))
    parent = payload
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return payload


def _accepts_or_one_line(call) -> None:
    try:
        call()
    except UserInputError as exc:
        assert "\n" not in str(exc)


# ---- manifests --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def manifest_case(export_digits, tmp_path_factory):
    path = copy_artifact(export_digits("onnx", "int8").path, tmp_path_factory.mktemp("manifest"))
    return path, json.loads(Path(str(path) + ".json").read_text())


def _read_artifact(path: Path) -> None:
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.sources.preprocess import Preprocess

    artifact = load_artifact(path)
    assert artifact.label and artifact.size_bytes >= 0
    assert artifact.manifest.input.shape and artifact.manifest.output.shape
    if artifact.manifest.preprocessing is not None:  # null: a foreign non-classifier
        Preprocess.from_dict(artifact.manifest.preprocessing).input_shape()


def test_any_mutated_manifest_is_read_or_refused_in_one_line(manifest_case):
    path, original = manifest_case

    @SETTINGS
    @given(mutated(original))
    def check(payload):
        Path(str(path) + ".json").write_text(json.dumps(payload))
        _accepts_or_one_line(lambda: _read_artifact(path))

    check()


# ---- results.json -----------------------------------------------------------------------------


def _read_results(folder: Path) -> None:
    from edgekit.report.changes import prediction_change_section
    from edgekit.report.profiles import profile_section
    from edgekit.report.recommend import pareto_front, recommend
    from edgekit.report.tables import accuracy_aware_section, machine_line, table_rows, unavailable
    from edgekit.results import load_results

    results = load_results(folder)
    table_rows(results)
    unavailable(results)
    accuracy_aware_section(results)
    prediction_change_section(results)
    profile_section(results)
    machine_line(results.run)
    budget = results.run["config"].get("max_drop", 1.0)
    recommend(results.rows, budget).summary  # noqa: B018
    pareto_front(results.rows)


def test_any_mutated_results_file_is_read_or_refused_in_one_line(tmp_path):
    original = json.loads(RECORDED.read_text())
    original["rows"] = original["rows"][:3]  # keep the search space small

    @SETTINGS
    @given(mutated(original))
    def check(payload):
        (tmp_path / "results.json").write_text(json.dumps(payload))
        _accepts_or_one_line(lambda: _read_results(tmp_path))

    check()


# ---- edgekit.toml -----------------------------------------------------------------------------


toml_values = st.sampled_from(['"many"', "5", "-1", "0", "true", "[]", '["x"]', "[1, 2]",
                               '"onnx"', "1.5", '["cpu", "phone"]', '""', "[0]"])  # fmt: skip


@SETTINGS
@given(key=st.sampled_from(["model", "data", "targets", "recipes", "devices", "threads",
                            "max_drop", "rounds", "warmup", "noise_guard", "timeout", "colour",
                            "min_seconds", "calibration_samples", "name"]),
       value=toml_values)  # fmt: skip
def test_any_config_value_is_taken_or_refused_in_one_line(tmp_path, key, value):
    from edgekit.run.config import RunConfig

    path = tmp_path / "edgekit.toml"
    path.write_text(f"[run]\n{key} = {value}\n")
    _accepts_or_one_line(lambda: RunConfig.from_toml(path).validate())


@SETTINGS
@given(text=st.text(max_size=40))
def test_any_config_text_is_taken_or_refused_in_one_line(tmp_path, text):
    from edgekit.run.config import RunConfig

    path = tmp_path / "edgekit.toml"
    path.write_text(text)
    _accepts_or_one_line(lambda: RunConfig.from_toml(path).validate())


# ---- .npz datasets ----------------------------------------------------------------------------


@st.composite
def arrays(draw):
    n = draw(st.integers(0, 6))
    dims = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
    dtype = draw(st.sampled_from(["uint8", "float32", "float64", "int16", "bool", "complex64"]))
    shape = (n, *dims)
    count = math.prod(shape)
    values = (
        draw(
            st.lists(
                st.floats(-300, 300) | st.sampled_from([math.nan, math.inf]),
                min_size=count,
                max_size=count,
            )
        )
        if count <= 2000
        else [0.0] * count
    )
    with np.errstate(all="ignore"):
        return np.asarray(values, dtype=np.float64).reshape(shape).astype(dtype)


@SETTINGS
@given(x=arrays(), labels=st.lists(st.integers(-2, 12), max_size=8),
       names=st.none() | st.lists(st.text(max_size=3), max_size=11))  # fmt: skip
def test_any_npz_is_loaded_or_refused_in_one_line(tmp_path, digits_model, x, labels, names):
    from edgekit.sources.data import load_dataset

    path = tmp_path / "data.npz"
    extra = {} if names is None else {"class_names": np.array(names, dtype=str)}
    np.savez(path, x=x, y=np.array(labels, dtype=np.int64), **extra)

    def load():
        dataset = load_dataset(str(path), digits_model.preprocess)
        assert np.isfinite(dataset.evaluation.x).all()  # only finite images get through

    _accepts_or_one_line(load)


def _records() -> list[tuple[str, type, Any]]:
    """Where each record sits in a results file, its dataclass, and a valid one to plant there
    (None: the recorded run has one already)."""
    from dataclasses import asdict

    from edgekit.common.metrics import VersusHost
    from edgekit.common.stats import LevelFit
    from edgekit.records import (
        AccuracyRecord,
        AwareLoop,
        Collapse,
        Coverage,
        FlippedImage,
        Flips,
        GoldenLink,
        MemoryRecord,
        SharedFlips,
        Step,
    )

    step = Step(0, [], 0.9, 0.9, 0.0, [-0.5, 0.5], 30.0, 1.0, 1.0, 0.2, validation_passed=True)
    image = FlippedImage(3, "7", "right to wrong", [["7", 0.9]], [["1", 0.8]], png="cG5n")
    link = GoldenLink("artifacts/a.tflite", "golden/a", 0.01)
    return [
        ("accuracy", AccuracyRecord, None),
        ("coverage", Coverage, None),
        ("memory", MemoryRecord, None),
        ("latency_fit", LevelFit, None),
        ("accuracy.flips", Flips, None),
        ("accuracy.collapse", Collapse, None),
        ("run.flips_across.digits-mobilenet", SharedFlips, None),
        ("accuracy.versus_host", VersusHost, asdict(VersusHost(0.1, 0.01, 1.0, 3, 10))),
        ("accuracy.gallery.0", FlippedImage, asdict(image)),
        ("accuracy_aware", AwareLoop, asdict(AwareLoop(1.0, True, 0, [step]))),
        ("run.golden.digits-mobilenet", GoldenLink, link.to_dict()),
    ]


def _place(payload: dict, path: str) -> tuple[Any, str | int, str]:
    """The container and key of ``path`` (a row's field: the first row that has it, else the
    first with accuracy), made where missing, and the words a message names it by."""
    *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
    field = (parents or [last])[0]
    rows = [r for r in payload["rows"] if r.get(field)] or [
        r for r in payload["rows"] if r.get("accuracy")
    ]
    node = payload if field == "run" else rows[0]
    for part in parents:
        if isinstance(node, dict) and part not in node:
            node[part] = [] if part == "gallery" else {}
        node = node[part]
    if isinstance(node, list) and last >= len(node):
        node.append(None)
    return node, last, path.replace(".0", "[0]")


@pytest.mark.parametrize("path", [path for path, _, _ in _records()])
def test_every_field_of_a_record_is_checked_by_its_dataclass(tmp_path, path):
    """The records of a row and inside it or the run (accuracy, coverage, memory, the latency
    fit; flips, collapse, the gallery, the device's logits against the host's, the
    accuracy-aware loop, flips shared across artifacts, a golden link) are checked against their
    dataclasses' own fields and types, with no table to keep in step: a wrong type in any field
    is one line naming it, and a valid record loads."""
    from edgekit.common.schema import matches, record_spec
    from edgekit.results import load_results

    kind, planted = next((k, v) for p, k, v in _records() if p == path)
    payload = json.loads(RECORDED.read_text())
    if planted is not None:
        node, key, _ = _place(payload, path)
        node[key] = planted
    valid = tmp_path / "valid"
    valid.mkdir()
    (valid / "results.json").write_text(json.dumps(payload))
    load_results(valid)  # the planted record is one the checks accept
    checked = 0
    for name, kind_of_field in record_spec(kind).items():
        if matches({"not": "of its type"}, kind_of_field):
            continue  # a free object, or a record whose every field has a default: it fits
        broken = copy.deepcopy(payload)
        node, key, said = _place(broken, path)
        node[key][name] = {"not": "of its type"}
        run = tmp_path / f"broken-{name}"
        run.mkdir()
        (run / "results.json").write_text(json.dumps(broken))
        with pytest.raises(UserInputError, match=rf"{re.escape(said)}\.{name}: must be"):
            load_results(run)
        checked += 1
    assert checked >= len(record_spec(kind)) // 2


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("run.flips_across.digits-mobilenet.pairs.0.both", "two", "pairs[0].both"),
        ("accuracy_aware.evaluation.drop_points", "small", "accuracy_aware.evaluation.drop_points"),
    ],
)
def test_a_fault_deep_inside_a_record_is_named_where_it_is(tmp_path, path, value, named):
    """A record inside a record (a pair of the shared flips, the loop's evaluation) is checked
    field by field: the one line names the field, not the whole record's type."""
    from dataclasses import asdict

    from edgekit.records import AwareEvaluation, AwareLoop
    from edgekit.results import load_results

    payload = json.loads(RECORDED.read_text())
    row = next(r for r in payload["rows"] if r["accuracy"])
    row["accuracy_aware"] = asdict(AwareLoop(1.0, True, 0, [], evaluation=AwareEvaluation(0.1)))
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = payload if parents[0] == "run" else row
    for part in parents:
        node = node[part]
    node[last] = value
    (tmp_path / "results.json").write_text(json.dumps(payload))
    with pytest.raises(UserInputError, match=rf"{re.escape(named)}: must be"):
        load_results(tmp_path)


def test_a_row_read_from_an_older_file_is_written_back_as_it_was():
    """Its records lack fields a later edgekit added: they read as None, and are left out again
    on writing, so a resumed or re-reported old run reads again."""
    step = {"step": 0, "keep_float": [], "drop_points": 0.1, "drop_ci": [0.0, 0.3]}
    entry = {
        **{"kind": "artifact", "target": "onnx", "recipe": "int8", "status": "ok"},
        "accuracy": {"drop_points": 0.1, "drop_ci": [0.0, 0.3]},
        "memory": {"status": "ok"},
        "coverage": {"total_ops": 4, "fast_ops": 3},
        "accuracy_aware": {"max_drop_points": 1.0, "within_budget": True, "chosen_step": 0,
                           "steps": [step]},
    }  # fmt: skip
    row = check_row(entry, "old/results.json: rows[0]")
    assert row.accuracy.drop_ci == (0.0, 0.3) and row.accuracy.top1 is None
    assert row.coverage.fast_fraction == 0.75 and row.accuracy_aware.steps[0].sqnr_db is None
    written = json.loads(json.dumps(row.to_dict()))
    assert check_row(written, "new/results.json: rows[0]") == row
    assert "top1" not in written["accuracy"] and "label" not in written["memory"]
    assert written["accuracy_aware"]["steps"][0].keys() >= step.keys()
    assert "sqnr_db" not in written["accuracy_aware"]["steps"][0]


def test_code_that_read_a_rows_record_by_key_still_works_for_one_release():
    row = check_row(
        {"kind": "artifact", "target": "onnx", "recipe": "int8", "status": "ok",
         "accuracy": {"drop_points": 0.1, "drop_ci": [0.0, 0.3]}},
        "results.json: rows[0]",
    )  # fmt: skip
    with pytest.warns(MovedPathWarning, match=r"read \.drop_ci, not \['drop_ci'\]"):
        assert row.accuracy["drop_ci"] == (0.0, 0.3)
    with pytest.warns(MovedPathWarning):
        assert row.accuracy.get("drop_points") == 0.1
    assert row.accuracy.get("no such field", "default") == "default"
    with pytest.raises(KeyError):
        row.accuracy["no such field"]
