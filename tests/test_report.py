"""The run's report, recommendation, history and config, built from a recorded results.json
(a real `edgekit run` on this machine) so they are tested without re-measuring anything."""

from __future__ import annotations

import copy
import json
import multiprocessing
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_cli

from edgekit.errors import UserInputError
from edgekit.history import compare_runs, list_runs, record_run, resolve_run
from edgekit.recommend import pareto_front, recommend, row_label
from edgekit.report import load_results
from edgekit.runner import RESULTS_SCHEMA_VERSION, RunConfig

RECORDED = Path(__file__).parent / "data" / "results_recorded.json"


@pytest.fixture
def run_dir(tmp_path):
    directory = tmp_path / "runs" / "20261130-000000-digits-mobilenet"
    directory.mkdir(parents=True)
    shutil.copy(RECORDED, directory / "results.json")
    return directory


def _row(target, recipe, p50, drop, high, device="cpu", **extra):
    return {
        "kind": "artifact",
        "target": target,
        "recipe": recipe,
        "device": device,
        "threads": 1,
        "status": "ok",
        "latency": {"p50_ms": p50},
        "runtime": {},
        "accuracy": {"drop_points": drop, "drop_ci": [drop - 0.3, high]},
        **extra,
    }


def test_results_schema_of_a_recorded_run():
    results = json.loads(RECORDED.read_text())
    assert results["schema_version"] == RESULTS_SCHEMA_VERSION
    assert {"id", "created", "model", "data", "config", "machine", "peaks"} <= set(results["run"])
    for row in results["rows"]:
        assert {"kind", "target", "recipe", "device", "threads", "status", "latency"} <= set(row)
        if row["status"] == "ok" and row["kind"] == "artifact":
            assert row["latency"]["p50_ms"] > 0 and row["accuracy"]["samples"] == 899
            assert row["speedup"] > 0
        if row["status"] != "ok":
            assert row["error"]


def test_pareto_front_keeps_only_undominated_rows():
    rows = [
        _row("a", "fp32", 2.0, 0.0, 0.0),
        _row("b", "int8", 1.0, 0.5, 0.9),
        _row("c", "int8", 1.5, 0.6, 1.0),
        _row("d", "fp16", 3.0, 0.0, 0.0),
    ]
    front = [r["target"] for r in pareto_front(rows)]
    assert front == ["b", "a"]  # c is slower and worse than b; d is slower than a at the same drop


def test_recommendation_is_the_fastest_within_budget_and_says_why_others_lost():
    rows = [
        _row("onnx", "int8", 0.5, 1.2, 2.5),
        _row("executorch", "int8", 0.8, 0.2, 0.6),
        _row("tflite", "fp32", 1.0, 0.0, 0.0),
        _row("tflite", "fp32", 0.1, 0.0, 0.0, device="gpu", runtime={"software_vulkan": True}),
        {**_row("tflite", "int8", 0.3, 0.0, 0.0), "disturbed": True},
        {
            "kind": "artifact",
            "target": "onnx",
            "recipe": "fp16",
            "device": "gpu",
            "threads": 1,
            "status": "unavailable",
            "error": "no CUDA",
        },
    ]
    advice = recommend(rows, max_drop=1.0)
    assert advice.best["target"] == "executorch"
    reasons = dict(advice.reasons)
    assert "drop upper bound +2.50 > budget 1" in reasons[row_label(rows[0])]
    assert "slower" in reasons[row_label(rows[2])]
    assert "software Vulkan" in reasons[row_label(rows[3])]
    assert "disturbed" in reasons[row_label(rows[4])]
    assert row_label(rows[5]) not in reasons  # a device this machine lacks is listed elsewhere
    assert recommend(rows, max_drop=-1.0).best is None


def test_report_is_rebuilt_from_results_json_alone(run_dir, capsys):
    result = run_cli(capsys, "report", str(run_dir))
    assert result.code == 0, result.err
    markdown = (run_dir / "report.md").read_text()
    results = load_results(run_dir)
    baseline = next(r for r in results["rows"] if r["kind"] == "baseline")
    assert f"{baseline['latency']['p50_ms']:.3f}" in markdown  # figures come from the results
    assert "## Recommendation" in markdown and "executorch/int8" in markdown
    page = (run_dir / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    for name in ("pareto", "latency", "size"):
        assert (run_dir / "plots" / f"{name}.png").stat().st_size > 10_000
    assert "## Not available on this machine" in markdown
    assert "- onnx on gpu (fp32, int8): " in markdown  # once per target and device
    summary = json.loads((run_dir / "report.json").read_text())
    assert summary["recommendation"].startswith("executorch/int8")


def test_report_of_a_folder_without_results(tmp_path, capsys):
    result = run_cli(capsys, "report", str(tmp_path))
    assert result.code == 2 and "no results.json" in result.err


def _record(args):
    path, run_id = args
    results = json.loads(RECORDED.read_text())
    results["run"]["id"] = run_id
    record_run(results, Path("."), Path(path))


def test_history_survives_two_processes_writing_at_once(tmp_path):
    database = tmp_path / "history.sqlite"
    jobs = [(str(database), f"run-{index}") for index in range(8)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_record, jobs)
    runs = list_runs(database, limit=100)
    assert sorted(r["id"] for r in runs) == sorted(job[1] for job in jobs)
    rows = len(json.loads(RECORDED.read_text())["rows"])
    assert all(r["rows"] == rows for r in runs)


def test_compare_and_the_latency_gate_against_history(run_dir, tmp_path, capsys):
    database = tmp_path / "h.sqlite"
    earlier = json.loads(RECORDED.read_text())
    earlier["run"]["id"] = "earlier"
    earlier["run"]["created"] = "2026-01-01T00:00:00+00:00"
    record_run(earlier, run_dir, database)
    slower = copy.deepcopy(earlier)
    slower["run"]["id"], slower["run"]["created"] = "slower", "2026-02-01T00:00:00+00:00"
    for row in slower["rows"]:
        if row["latency"]:
            row["latency"]["p50_ms"] *= 1.5
            row["disturbed"] = False
    (run_dir / "results.json").write_text(json.dumps(slower))
    record_run(slower, run_dir, database)
    deltas = {d["key"]: d for d in compare_runs("earlier", "slower", database)}
    assert deltas["executorch/int8@cpux1"]["p50_change_pct"] == pytest.approx(50.0)
    assert resolve_run("last", database, exclude="slower") == "earlier"
    shown = run_cli(capsys, "compare", "earlier", "slower", "--history", str(database))
    assert shown.code == 0 and "+50.0 %" in shown.out
    gate = run_cli(
        capsys,
        "check",
        str(run_dir),
        "--max-latency-regression",
        "10",
        "--against",
        "last",
        "--history",
        str(database),
    )
    assert gate.code == 1 and "p50 regression" in gate.out
    relaxed = run_cli(
        capsys,
        "check",
        str(run_dir),
        "--max-latency-regression",
        "60",
        "--max-drop",
        "1",
        "--history",
        str(database),
    )
    assert relaxed.code == 0, relaxed.out
    with pytest.raises(UserInputError, match="no run 'nope'"):
        resolve_run("nope", database)


def test_config_file_round_trip(tmp_path, capsys):
    path = tmp_path / "edgekit.toml"
    written = run_cli(
        capsys,
        "run",
        "--targets",
        "onnx,tflite",
        "--recipes",
        "int8",
        "--threads",
        "1,2",
        "--max-drop",
        "0.5",
        "--write-config",
        str(path),
    )
    assert written.code == 0
    config = RunConfig.from_toml(path)
    assert (config.targets, config.recipes, config.threads, config.max_drop) == (
        ["onnx", "tflite"],
        ["int8"],
        [1, 2],
        0.5,
    )
    path.write_text(path.read_text() + "colour = 'blue'\n")
    with pytest.raises(UserInputError, match="unknown option"):
        RunConfig.from_toml(path)
    bad = run_cli(capsys, "run", "--devices", "phone", "--write-config", str(tmp_path / "x.toml"))
    assert bad.code == 2 and "unknown device 'phone'" in bad.err


def test_a_missing_device_is_unavailable_and_a_broken_one_failed():
    from edgekit.errors import DeviceUnavailable, EdgekitError
    from edgekit.runner import _failed_row

    lacks = _failed_row("onnx", "fp32", "gpu", DeviceUnavailable("no CUDA provider"), 1)
    broke = _failed_row("onnx", "fp32", "cpu", EdgekitError("the runtime crashed (SIGSEGV)"), 1)
    assert (lacks["status"], broke["status"]) == ("unavailable", "failed")
    assert broke["error"] == "the runtime crashed (SIGSEGV)"
