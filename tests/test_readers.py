"""Property-based: any mutation of a valid manifest, results.json, edgekit.toml or .npz gives a
one-line error (UserInputError, the CLI's exit 2) or a correct result, never another exception."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import copy_artifact
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from measured_rows import RECORDED

from edgekit.errors import UserInputError

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


RECORDS = ["accuracy", "coverage", "memory", "latency_fit"]  # a row's fields that are records


@pytest.mark.parametrize("field", RECORDS)
def test_every_field_of_a_rows_record_is_checked_by_its_dataclass_type(tmp_path, field):
    """A wrong type in any field of a record is one line naming it: the checks are the record's
    own fields and types (edgekit.records, stats.LevelFit), so a field added there is checked
    with nothing else to keep in step."""
    from edgekit.common.schema import record_spec
    from edgekit.results import (
        ROW_TYPES,  # noqa: F401  (the row's own fields, typed likewise)
        load_results,
    )

    record = {"accuracy": "AccuracyRecord", "coverage": "Coverage", "memory": "MemoryRecord"}
    if field == "latency_fit":
        from edgekit.common.stats import LevelFit as kind
    else:
        import edgekit.records

        kind = getattr(edgekit.records, record[field])
    payload = json.loads(RECORDED.read_text())
    row = next(r for r in payload["rows"] if r.get(field))
    checked = 0
    for name, kind_of_field in record_spec(kind).items():
        if kind_of_field in (dict[str, Any], dict[str, Any] | None, Any):
            continue  # a free object: any object fits
        broken = copy.deepcopy(payload)
        target = next(r for r in broken["rows"] if r.get(field))
        target[field][name] = {"not": "of its type"}
        run = tmp_path / f"{field}-{name}"
        run.mkdir()
        (run / "results.json").write_text(json.dumps(broken))
        with pytest.raises(UserInputError, match=rf"\.{field}\.{name}: must be"):
            load_results(run)
        checked += 1
    assert checked >= len(record_spec(kind)) // 2 and row[field]
