"""The android device against a stand-in ``adb`` on PATH (no emulator runs on this machine),
through the CLI as a user calls it, and the official runners' output parsers on output in the
tools' documented formats."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import run_cli
from stand_ins import stand_in_adb_env

from edgekit.devices import android, get_device
from edgekit.targets.executorch.android import parse as parse_executor_runner
from edgekit.targets.onnx.android import parse as parse_ort_perf_test
from edgekit.targets.tflite.android import parse as parse_benchmark_model
from edgekit.worker.latency import Protocol

pytestmark = pytest.mark.timing  # measures with the noise guard on: runs alone

DATA = Path(__file__).parent / "data"


@pytest.fixture
def stand_in_adb(tmp_path, monkeypatch):
    env = stand_in_adb_env(tmp_path)
    monkeypatch.setenv("PATH", f"{env.pop('PATH_PREFIX')}{os.pathsep}{os.environ['PATH']}")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {"log": Path(env["ADB_LOG"]), "devices": Path(env["ADB_DEVICES"])}


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_bench_on_android_pushes_runs_and_cleans_up(stand_in_adb, export_digits, tmp_path, capsys):
    spaced = tmp_path / "model int8.tflite"  # a space in the name: arguments must be quoted
    source = export_digits("tflite", "int8").path
    spaced.write_bytes(source.read_bytes())
    (tmp_path / "model int8.tflite.json").write_text(Path(str(source) + ".json").read_text())
    result = run_cli(
        capsys,
        "bench",
        str(spaced),
        "--device",
        "android",
        "--threads",
        "2",
        "--rounds",
        "3",
        "--json",
    )
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)  # android rows have no host baseline beside them
    assert record["status"] == "ok" and record["device"] == "android"
    assert record["stats"]["p50_ms"] == pytest.approx(0.298)
    assert len(record["rounds_ms"]) >= 3 and record["traits"]["where"] == "remote"
    assert record["runtime"]["abi"] == "arm64-v8a" and record["runtime"]["android"] == "15"
    calls = _calls(stand_in_adb["log"])
    verbs = [call[2] for call in calls if call[0] == "-s"]
    assert verbs.count("push") == 2 and calls[-1][-1] == "rm -rf /data/local/tmp/edgekit"
    run = next(call[-1] for call in calls if "benchmark_model " in call[-1])
    assert "'--graph=/data/local/tmp/edgekit/model int8.tflite'" in run
    assert "--num_threads=2" in run and "--use_xnnpack=true" in run


def test_run_with_android_benchmarks_the_phone(stand_in_adb, tmp_path, capsys):
    result = run_cli(
        capsys,
        "run",
        "--target",
        "tflite",
        "--recipe",
        "int8",
        "--device",
        "cpu,android",
        "--min-seconds",
        "0.2",
        "--rounds",
        "3",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--history",
        str(tmp_path / "h.sqlite"),
        "--json",
    )
    assert result.code == 0, result.err
    run_dir = Path(json.loads(result.out)["run_dir"])
    rows = json.loads((run_dir / "results.json").read_text())["rows"]
    (phone,) = [row for row in rows if row["device"] == "android"]
    assert phone["status"] == "ok" and phone["latency"]["p50_ms"] == pytest.approx(0.298)
    assert phone["accuracy"] is None  # the official runners print timings, not outputs
    assert "android" in (run_dir / "report.md").read_text()


def test_a_failing_runner_is_a_failed_measurement_and_still_cleans_up(
    stand_in_adb, export_digits, monkeypatch, capsys
):
    monkeypatch.setenv("ADB_RUNNER_FAILS", "1")
    path = export_digits("tflite", "int8").path
    result = run_cli(capsys, "bench", str(path), "--device", "android")
    assert result.code == 1 and "could not load model" in result.err
    assert _calls(stand_in_adb["log"])[-1][-1] == "rm -rf /data/local/tmp/edgekit"


@pytest.mark.parametrize(
    ("devices", "serial", "message"),
    [
        ("", None, "no device attached"),
        ("emulator-5554 offline", None, "emulator-5554 is offline"),
        ("R58M123 unauthorized usb:1-1", None, "R58M123 is unauthorized"),
        ("emulator-5554 device\nemulator-5556 device", None, "several devices"),
        ("emulator-5554 device", "R58M123", "no device with serial R58M123"),
    ],
)
def test_device_problems_are_one_clear_line_and_exit_2(
    stand_in_adb, export_digits, capsys, devices, serial, message
):
    stand_in_adb["devices"].write_text(devices)
    args = ["bench", str(export_digits("tflite", "int8").path), "--device", "android"]
    result = run_cli(capsys, *args, *(["--serial", serial] if serial else []))
    assert result.code == 2 and message in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_missing_runner_and_missing_adb(stand_in_adb, export_digits, monkeypatch):
    artifact_path = export_digits("tflite", "int8").path
    from edgekit.artifacts.artifact import load_artifact

    artifact = load_artifact(artifact_path)
    monkeypatch.delenv("EDGEKIT_BENCHMARK_MODEL")
    assert "set EDGEKIT_BENCHMARK_MODEL" in get_device("android").unavailable_reason(artifact)
    monkeypatch.setenv("EDGEKIT_BENCHMARK_MODEL", "/bin/true")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "adb: not found on PATH" in get_device("android").unavailable_reason(artifact)


def test_android_cannot_evaluate_and_says_why(stand_in_adb, export_digits, capsys):
    result = run_cli(
        capsys, "eval", str(export_digits("tflite", "int8").path), "--device", "android"
    )
    assert result.code == 2 and "print timings, not outputs" in result.err


def test_parsers_read_the_runners_real_formats():
    litert = parse_benchmark_model((DATA / "benchmark_model.txt").read_text())
    assert litert["count"] == 3193 and litert["min_ms"] == pytest.approx(0.283)
    assert litert["std_ms"] == pytest.approx(0.051)
    assert litert["peak_rss_mb"] == pytest.approx(4.55469)
    executorch = parse_executor_runner((DATA / "executor_runner.txt").read_text())
    assert executorch == {"count": 50.0, "mean_ms": pytest.approx(27.338 / 50)}
    ort = parse_ort_perf_test((DATA / "onnxruntime_perf_test.txt").read_text())
    assert ort["mean_ms"] == pytest.approx(0.502) and ort["p90_ms"] == pytest.approx(0.531)
    assert ort["count"] == 50 and ort["load_ms"] == pytest.approx(21.3)
    with pytest.raises(ValueError, match="no 'Inference timings in us'"):
        parse_benchmark_model("Segmentation fault")


def test_adb_devices_listing():
    out = (
        "List of devices attached\nemulator-5554\tdevice product:sdk model:Pixel_8 transport_id:3\n"
    )
    (device,) = android.parse_devices(out)
    assert (device.serial, device.state, device.properties["model"]) == (
        "emulator-5554",
        "device",
        "Pixel_8",
    )


def test_a_block_is_one_run_of_the_runner(stand_in_adb, export_digits):
    from edgekit.artifacts.artifact import load_artifact

    artifact = load_artifact(export_digits("tflite", "int8").path)
    timer = get_device("android").timer(artifact, 1, None, Protocol(), 60)
    try:
        block = timer.block(25)
    finally:
        timer.close()
    assert block.samples_ms is None and block.median_ms == pytest.approx(0.298)
    assert "--num_runs=25" in timer.runtime["command"]
