"""The android device against a stand-in ``adb`` on PATH (no emulator runs on this machine), and
the official runners' output parsers on output in the tools' documented formats."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from edgekit.artifact import Artifact
from edgekit.bench import Protocol
from edgekit.devices import android

DATA = Path(__file__).parent / "data"

STAND_IN_ADB = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open(os.environ["ADB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["devices", "-l"]:
    print("List of devices attached")
    print(open(os.environ["ADB_DEVICES"]).read())
    sys.exit(0)
serial, verb, rest = args[1], args[2], args[3:]
if verb == "push":
    print("1 file pushed")
elif verb == "shell":
    command = rest[0]
    if command.startswith("getprop"):
        print({{"ro.product.cpu.abi": "arm64-v8a", "ro.build.version.release": "15",
               "ro.product.model": "sdk_gphone64_arm64"}}[command.split()[1]])
    elif "{runner}" in command:
        if os.environ.get("ADB_RUNNER_FAILS"):
            print("ERROR: could not load model", file=sys.stderr)
            sys.exit(1)
        print(open(os.environ["ADB_RUNNER_OUTPUT"]).read())
"""


@pytest.fixture
def stand_in_adb(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    adb = bin_dir / "adb"
    adb.write_text(STAND_IN_ADB.format(python=sys.executable, runner="benchmark_model"))
    adb.chmod(adb.stat().st_mode | stat.S_IEXEC)
    runner = tmp_path / "benchmark_model"
    runner.write_text("runner binary")
    devices = tmp_path / "devices.txt"
    devices.write_text(
        "emulator-5554          device product:sdk_gphone64_arm64 model:sdk_gphone64 transport_id:1"
    )
    log = tmp_path / "adb.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ADB_LOG", str(log))
    monkeypatch.setenv("ADB_DEVICES", str(devices))
    monkeypatch.setenv("ADB_RUNNER_OUTPUT", str(DATA / "benchmark_model.txt"))
    monkeypatch.setenv("EDGEKIT_BENCHMARK_MODEL", str(runner))
    return {"log": log, "devices": devices}


def _artifact(tmp_path, name="model int8.tflite"):
    path = tmp_path / name
    path.write_bytes(b"\0" * 1000)
    manifest = {
        "target": "tflite",
        "recipe": "int8",
        "file": {"size": 1000},
        "input": {"dtype": "float32"},
    }
    return Artifact(path, manifest)


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_bench_pushes_runs_pulls_and_cleans_up(stand_in_adb, tmp_path):
    record = android.bench_on_android(_artifact(tmp_path), None, 2, Protocol(warmup=1, min_runs=50))
    assert record.status == "ok", record.error
    assert record.stats["mean_ms"] == pytest.approx(0.31231)
    assert record.stats["p50_ms"] == pytest.approx(0.298)
    assert record.load_ms == pytest.approx(3.791)
    assert record.runtime["abi"] == "arm64-v8a" and record.runtime["android"] == "15"
    calls = _calls(stand_in_adb["log"])
    verbs = [call[2] for call in calls if call[0] == "-s"]
    assert verbs.count("push") == 2 and calls[-1][-1] == "rm -rf /data/local/tmp/edgekit"
    run = next(call[-1] for call in calls if "benchmark_model " in call[-1])
    # the file name has a space: every argument reaches the device's shell quoted
    assert "'--graph=/data/local/tmp/edgekit/model int8.tflite'" in run
    assert "--num_threads=2" in run and "--use_xnnpack=true" in run


def test_runner_failure_is_a_failed_row_and_still_cleans_up(stand_in_adb, tmp_path, monkeypatch):
    monkeypatch.setenv("ADB_RUNNER_FAILS", "1")
    record = android.bench_on_android(_artifact(tmp_path), None, 1, Protocol())
    assert record.status == "failed"
    assert "could not load model" in record.error
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
def test_device_problems_are_one_clear_line(stand_in_adb, tmp_path, devices, serial, message):
    stand_in_adb["devices"].write_text(devices)
    record = android.bench_on_android(_artifact(tmp_path), serial, 1, Protocol())
    assert record.status == "failed"
    assert message in record.error and "\n" not in record.error


def test_missing_runner(stand_in_adb, tmp_path, monkeypatch):
    monkeypatch.delenv("EDGEKIT_BENCHMARK_MODEL")
    record = android.bench_on_android(_artifact(tmp_path), None, 1, Protocol())
    assert "set EDGEKIT_BENCHMARK_MODEL" in record.error


def test_no_adb(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    record = android.bench_on_android(_artifact(tmp_path), None, 1, Protocol())
    assert "adb: not found on PATH" in record.error


def test_parsers_read_the_runners_real_formats():
    litert = android.parse_benchmark_model((DATA / "benchmark_model.txt").read_text())
    assert litert["count"] == 3193 and litert["min_ms"] == pytest.approx(0.283)
    assert litert["std_ms"] == pytest.approx(0.051) and litert["peak_rss_mb"] == pytest.approx(
        4.55469
    )
    executorch = android.parse_executor_runner((DATA / "executor_runner.txt").read_text())
    assert executorch == {"count": 50.0, "mean_ms": pytest.approx(27.338 / 50)}
    ort = android.parse_ort_perf_test((DATA / "onnxruntime_perf_test.txt").read_text())
    assert ort["mean_ms"] == pytest.approx(0.502) and ort["p90_ms"] == pytest.approx(0.531)
    assert ort["count"] == 50 and ort["load_ms"] == pytest.approx(21.3)
    with pytest.raises(ValueError, match="no 'Inference timings in us'"):
        android.parse_benchmark_model("Segmentation fault")


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
