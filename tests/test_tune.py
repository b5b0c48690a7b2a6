"""``edgekit tune`` through the CLI on real files: the manifest's runtime_options, bad input,
the winner written, ``bench`` opening a tuned file as the live session holds it, ``--only``
keeping what was tuned before (the search itself: tests/test_tune_search.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import copy_artifact, run_cli

from edgekit.errors import UserInputError

# tune writes its winner into the manifest: each test tunes a copy of the session's shared file


def test_a_manifest_with_an_unknown_or_bad_runtime_option_is_one_line(export_digits, tmp_path):
    from edgekit.artifacts.artifact import load_artifact

    path = copy_artifact(export_digits("onnx", "fp32").path, tmp_path)
    manifest = json.loads(Path(f"{path}.json").read_text())
    for options, message in (
        ({"threads": 2, "turbo": True}, "unknown runtime option 'turbo'"),
        ({"threads": 0}, "runtime_options.threads must be an integer, 1 to 256"),
        ({"inter_op_threads": 100}, "inter_op_threads=100: choose from 1, 2"),
        ({"execution_mode": "ORT_SIDEWAYS"}, "execution_mode='ORT_SIDEWAYS': choose from"),
        ({"allow_spinning": "no"}, "allow_spinning='no' is not a bool"),
    ):
        Path(f"{path}.json").write_text(json.dumps(manifest | {
            "runtime_options": options, "tuned": {"device": "cpu"}}))  # fmt: skip
        with pytest.raises(UserInputError, match=message):
            load_artifact(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "threads,turbo"], "unknown option(s) turbo for onnx"),
        (["--device", "android"], "--device android: tune runs on cpu"),
        (["--budget-s", "0"], "--budget-s must be > 0"),
        (["--threads", "0"], "--threads must be 1 to 256, got 0"),
        (["--threads", "2", "--only", "threads"], "--threads fixes the thread count"),
    ],
)
def test_bad_tune_options_are_one_line_and_exit_2(capsys, export_digits, tmp_path, args, message):
    path = copy_artifact(export_digits("onnx", "fp32").path, tmp_path)
    before = Path(f"{path}.json").read_text()
    result = run_cli(capsys, "tune", str(path), *args)
    assert result.code == 2 and message in result.err
    assert len([line for line in result.err.splitlines() if line.strip()]) == 1
    assert Path(f"{path}.json").read_text() == before  # nothing written


def _write_tuned(path: Path, options: dict, cpu: str | None = None, **record) -> None:
    from edgekit.common.machine import cpu_model

    manifest = json.loads(Path(f"{path}.json").read_text())
    tuned = {"device": "cpu", "cpu_model": cpu or cpu_model(), **record}
    Path(f"{path}.json").write_text(json.dumps(manifest | {"runtime_options": options,
                                                           "tuned": tuned}))  # fmt: skip


def _bench(capsys, path: Path, *args: str) -> tuple[dict, str]:
    result = run_cli(capsys, "bench", str(path), *args, "--rounds", "3", "--min-seconds", "0.1",
                     "--no-baseline", "--no-noise-guard", "--precision", "off",
                     "--json")  # fmt: skip
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)
    return record, result.err


OURS = {"threads": 2, "graph_optimization_level": "ORT_ENABLE_ALL",
        "execution_mode": "ORT_PARALLEL", "inter_op_threads": 2, "allow_spinning": False,
        "enable_mem_pattern": False, "enable_cpu_mem_arena": True}  # fmt: skip
DEFAULTS = {"threads": 1, "graph_optimization_level": "ORT_ENABLE_ALL",
            "execution_mode": "ORT_SEQUENTIAL", "inter_op_threads": 1, "allow_spinning": True,
            "enable_mem_pattern": True, "enable_cpu_mem_arena": True}  # fmt: skip


def test_bench_opens_a_tuned_file_with_its_options_as_the_session_holds_them(
    capsys, export_digits, tmp_path
):
    path = copy_artifact(export_digits("onnx", "fp32").path, tmp_path)
    _write_tuned(path, OURS)
    for args, expected in (((), OURS), (("--runtime-options", "default"), DEFAULTS)):
        record, _ = _bench(capsys, path, *args)
        # what onnxruntime's live session reports, not what was asked of it
        assert record["threads"] == expected["threads"]
        assert {key: record["runtime"][key] for key in expected if key != "threads"} == {
            key: value for key, value in expected.items() if key != "threads"
        }
    # a hand-edited record whose p50 interval is no pair of numbers: no comparison, no crash
    for p50, interval in ((1.0, "abc"), ("fast", [0.9, 1.1]), (1.0, [0.9])):
        _write_tuned(path, OURS, p50_ms=p50, p50_interval_ms=interval)
        record, _ = _bench(capsys, path)
        assert record["threads"] == 2 and record["tuned_p50"] is None
    _write_tuned(path, OURS, cpu="Some Other CPU")  # tuned on another machine: not used here
    record, err = _bench(capsys, path)
    assert record["threads"] == 1 and record["runtime"]["execution_mode"] == "ORT_SEQUENTIAL"
    assert "tuned on Some Other CPU, not this" in err and "defaults" in err


def test_tune_writes_the_winner_into_the_manifest(capsys, export_digits, tmp_path):
    """Plumbing, not figures (which configuration wins is the machine's): the noise guard is
    off, so the test runs beside others."""
    path = copy_artifact(export_digits("onnx", "fp32").path, tmp_path)
    result = run_cli(capsys, "tune", str(path), "--budget-s", "20", "--no-noise-guard", "--json")
    assert result.code == 0, result.err
    (tuned,) = json.loads(result.out)
    manifest = json.loads(Path(f"{path}.json").read_text())
    assert manifest["runtime_options"] == tuned["best"]
    assert manifest["tuned"]["device"] == "cpu" and manifest["tuned"]["cpu_model"]
    assert manifest["tuned"]["started_from"] == tuned["default"] == DEFAULTS
    searched = {trial["knob"] for trial in tuned["trials"]}
    assert "threads" in searched  # the first stage always starts
    assert searched | set(tuned["untried"]) >= {"threads", "graph_optimization_level"}
    assert manifest["tuned"]["final"] == tuned["final"]
    if tuned["final"] is not None:  # the stages' winner was compared with the start
        assert (tuned["final"] == "faster") == (tuned["best"] != DEFAULTS)
    # what the chosen options measured, and where another session's p50 should fall
    low, high = manifest["tuned"]["p50_interval_ms"]
    assert low < manifest["tuned"]["p50_ms"] < high
    record, _ = _bench(capsys, path)  # a later session of the tuned file says where it fell
    assert record["threads"] == tuned["best"]["threads"]
    assert record["tuned_p50"]["interval_ms"] == [low, high]
    assert record["tuned_p50"]["within"] == (low <= record["stats"]["p50_ms"] <= high)
    printed = run_cli(capsys, "bench", str(path), "--rounds", "3", "--min-seconds", "0.1",
                      "--no-baseline", "--no-noise-guard", "--precision", "off")  # fmt: skip
    assert f"[{low:.3f}, {high:.3f}]" in printed.out
    assert ("within tune's" in printed.out) != ("outside tune's" in printed.out)
    default, _ = _bench(capsys, path, "--runtime-options", "default")
    assert default["tuned_p50"] is None  # the default options: tune's figure is not theirs


def test_tune_only_one_option_keeps_the_others_and_prints_the_code_for_the_app(
    capsys, export_digits, tmp_path
):
    path = copy_artifact(export_digits("tflite", "fp32").path, tmp_path)
    _write_tuned(path, {"threads": 2, "xnnpack": True})  # an earlier tune chose two threads
    result = run_cli(capsys, "tune", str(path), "--only", "xnnpack", "--budget-s", "30",
                     "--no-noise-guard")  # fmt: skip
    assert result.code == 0, result.err
    options = json.loads(Path(f"{path}.json").read_text())["runtime_options"]
    assert options["threads"] == 2  # not searched: as tuned before
    flag = str(options["xnnpack"]).lower()
    assert "Interpreter(model_path=" in result.out and f"setUseXNNPACK({flag})" in result.out
    assert "num_threads=2" in result.out
    before = Path(f"{path}.json").read_text()
    again = run_cli(capsys, "tune", str(path), "--only", "threads", "--budget-s", "10",
                    "--no-noise-guard", "--no-write")  # fmt: skip
    assert again.code == 0 and Path(f"{path}.json").read_text() == before  # --no-write


def test_tune_at_the_apps_thread_count_searches_the_rest_at_it(capsys, export_digits, tmp_path):
    path = copy_artifact(export_digits("tflite", "fp32").path, tmp_path)
    result = run_cli(capsys, "tune", str(path), "--threads", "2", "--budget-s", "10",
                     "--no-noise-guard", "--json")  # fmt: skip
    assert result.code == 0, result.err
    (tuned,) = json.loads(result.out)
    assert tuned["default"] == {"threads": 2, "xnnpack": True, "api": "interpreter"}
    assert tuned["best"]["threads"] == 2
    searched = [trial["knob"] for trial in tuned["trials"]]
    assert searched[0] == "xnnpack" and "threads" not in searched  # threads not searched
    assert json.loads(Path(f"{path}.json").read_text())["runtime_options"]["threads"] == 2


def test_a_file_tuned_to_litert_compiled_model_opens_so_and_prints_its_code(
    capsys, export_digits, tmp_path
):
    from edgekit.targets import get_target

    path = copy_artifact(export_digits("tflite", "fp32").path, tmp_path)
    _write_tuned(path, {"threads": 1, "xnnpack": True, "api": "compiled_model"})
    record, _ = _bench(capsys, path)
    assert record["runtime"]["runtime"].startswith("LiteRT CompiledModel")
    assert record["runtime"]["api"] == "compiled_model"
    default, _ = _bench(capsys, path, "--runtime-options", "default")
    assert default["runtime"]["runtime"].startswith("LiteRT Interpreter")
    code = get_target("tflite").runtime_code("m.tflite", {"threads": 2, "xnnpack": True,
                                                          "api": "compiled_model"})  # fmt: skip
    assert "CompiledModel.from_file(" in "\n".join(code) and "num_threads=2" in "\n".join(code)


def _run_tuned(capsys, tmp_path: Path, *args: str):
    from cli_helpers import plumbing_config

    return run_cli(capsys, "run", "--config", str(plumbing_config(tmp_path)), "--target", "onnx",
                   "--recipe", "fp32", "--device", "cpu", "--no-profile", "--min-seconds", "0.2",
                   "--min-runs", "20", "--rounds", "4", "--runs-dir", str(tmp_path / "runs"),
                   "--history", str(tmp_path / "history.sqlite"), *args)  # fmt: skip


def test_run_tune_measures_the_tuned_files_and_reports_default_against_tuned(capsys, tmp_path):
    result = _run_tuned(capsys, tmp_path, "--tune", "--tune-budget-s", "8")
    assert result.code == 0, result.err
    (run_dir,) = (tmp_path / "runs").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    (record,) = results["run"]["tuning"]
    assert record["label"] == "onnx/fp32" and record["device"] == "cpu"
    assert record["default"] == DEFAULTS and record["trials"]  # the thread stage at least ran
    assert results["run"]["config"]["tune"] is True and results["run"]["phases"]["tune_s"] > 0
    # the run's own copy of the file carries the winner, and its row was opened with it
    (manifest,) = (run_dir / "artifacts").glob("*.onnx.json")
    written = json.loads(manifest.read_text())
    assert written["runtime_options"] == record["best"] and written["tuned"]["device"] == "cpu"
    (row,) = [r for r in results["rows"] if r["target"] == "onnx"]
    assert row["status"] == "ok"
    knobs = {k: v for k, v in record["best"].items() if k != "threads"}
    assert {k: row["runtime"][k] for k in knobs} == knobs
    # both columns, in the printed line and the report's section
    (line,) = [line for line in result.out.splitlines() if line.startswith("tuned onnx/fp32")]
    assert "default " in line and "tuned/default" in line, line
    report = (run_dir / "report.md").read_text()
    section = report.split("## Tuned against default")[1]
    assert (
        "| artifact | device | default p50 ms | tuned p50 ms | tuned / default [95%] |" in section
    )
    assert re.search(r"\| onnx/fp32 \| cpu \| \d+\.\d{3} \| \d+\.\d{3} \| ", section), section
    assert record["default_p50_ms"] > 0 and record["best_p50_ms"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tune", "--tune-budget-s", "0"], "tune_budget_s must be > 0 seconds"),
        (["--tune", "--cluster", "local"], "--tune searches on this machine's CPU"),
    ],
)
def test_bad_run_tune_options_are_one_line_and_exit_2(capsys, tmp_path, args, message):
    result = _run_tuned(capsys, tmp_path, *args)
    assert result.code == 2 and message in result.err, result.err
    assert len([line for line in result.err.splitlines() if line.strip()]) == 1
    assert not (tmp_path / "runs").exists()
