"""``edgekit golden --check BUNDLE --device android``: a bundle made on the host, its stage-3
raw files through each target's official runner on a phone. No phone runs here: the stand-in
``adb`` keeps pushed files in a folder and, for a runner asked for outputs, runs the real
runtime on this machine and writes the outputs as the runner does (tests/stand_in_runners.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli
from stand_ins import stand_in_adb_env

RUNNERS = {"tflite": "benchmark_model", "executorch": "executor_runner"}


@pytest.fixture
def phone(tmp_path, monkeypatch):
    """The stand-in adb on PATH, with a runner binary for each target whose runner gives
    outputs; the folder that stands for the phone's files and the adb log."""
    env = stand_in_adb_env(tmp_path / "adb")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    executor_runner = tmp_path / "adb" / "executor_runner"
    executor_runner.write_text("runner binary")
    monkeypatch.setenv("EDGEKIT_EXECUTOR_RUNNER", str(executor_runner))
    return {"files": Path(env["ADB_PHONE"]), "log": Path(env["ADB_LOG"])}


def _bundle(capsys, artifact: Path, bundle: Path) -> Path:
    made = run_cli(capsys, "golden", str(artifact), "-o", str(bundle), "--count", "4",
                   "--spread-on", "")  # fmt: skip
    assert made.code == 0, made.err
    return bundle


def _runs(log: Path) -> list[str]:
    """The runner commands adb ran on the phone."""
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    commands = [call[-1] for call in calls if call[2:3] == ["shell"]]
    return [command for command in commands if "--graph=" in command or "--model_path=" in command]


@pytest.mark.parametrize("target", sorted(RUNNERS))
def test_a_bundle_passes_through_the_official_runner_on_a_phone(
    target, phone, export_digits, tmp_path, capsys
):
    bundle = _bundle(capsys, export_digits(target, "int8").path, tmp_path / "bundle")

    result = run_cli(capsys, "golden", "--check", str(bundle), "--device", "android", "--json")

    assert result.code == 0, result.err
    checked = json.loads(result.out)
    assert checked["passed"] and checked["device"] == "android" and checked["same_file"]
    assert checked["max_abs_diff"] <= checked["atol"] and checked["top1_agreement"] == 1.0
    assert checked["runtime"]["runner"] == RUNNERS[target]
    assert "inputs_match was checked on the host" in checked["note"]
    runs = _runs(phone["log"])
    assert len(runs) == 4  # one run per image, each on its raw stage-3 file
    if target == "tflite":
        assert "--input_layer_value_files=input:/data/local/tmp/edgekit/input-000.bin" in runs[0]
        assert "--output_filepath=/data/local/tmp/edgekit/output-000" in runs[0]
    else:
        assert "--inputs=/data/local/tmp/edgekit/input-000.bin" in runs[0]
        assert "--output_file=/data/local/tmp/edgekit/output-000" in runs[0]
    assert not (phone["files"] / "data/local/tmp/edgekit").exists()  # nothing left on the phone


@pytest.mark.parametrize("target", sorted(RUNNERS))
def test_another_artifact_fails_the_bundle_on_a_phone(
    target, phone, export_digits, tmp_path, capsys
):
    bundle = _bundle(capsys, export_digits(target, "int8").path, tmp_path / "bundle")
    other = export_digits(target, "fp32").path

    result = run_cli(capsys, "golden", "--check", str(bundle), str(other), "--device", "android")

    assert result.code == 1, result.err
    assert "FAIL" in result.out and "on android" in result.out
    assert "not the file the bundle was made from" in result.out


def test_onnxruntime_runners_are_refused_in_one_line(phone, export_digits, tmp_path, capsys):
    bundle = tmp_path / "bundle"
    made = run_cli(capsys, "golden", str(export_digits("onnx", "int8").path), "-o", str(bundle),
                   "--count", "2", "--spread-on", "")  # fmt: skip
    assert made.code == 0, made.err

    refused = run_cli(capsys, "golden", "--check", str(bundle), "--device", "android")

    assert refused.code == 2
    line = refused.err.strip()
    assert len(line.splitlines()) == 1
    assert "onnxruntime_perf_test" in line and "onnx_test_runner" in line
    assert "check it on cpu or arm64-emu" in line
    assert not phone["log"].exists() or _runs(phone["log"]) == []  # nothing ran on the phone
