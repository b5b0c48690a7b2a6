"""The android device against a stand-in ``adb`` on PATH (no emulator runs on this machine),
through the CLI as a user calls it, and the official runners' output parsers on output in the
tools' documented formats."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from cli_helpers import copy_artifact, plumbing_config, run_cli
from stand_ins import stand_in_adb_env

from edgekit.devices import android, get_device
from edgekit.devices.android_memory import RunnerMemory, parse_meminfo, parse_pids
from edgekit.targets.executorch.official_runner import parse as parse_executor_runner
from edgekit.targets.onnx.official_runner import parse as parse_ort_perf_test
from edgekit.targets.tflite.official_runner import parse as parse_benchmark_model
from edgekit.worker.latency import LatencyProtocol

# no timing mark: the phone is a stand-in whose latency is recorded, so every measurement here
# turns the noise guard off and runs beside other tests

DATA = Path(__file__).parent / "data"
RECORDED_PSS_KB, RECORDED_RSS_KB = 6178, 12268  # tests/data/dumpsys_meminfo_benchmark_model.txt


@pytest.fixture
def stand_in_adb(tmp_path, monkeypatch):
    env = stand_in_adb_env(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {"log": Path(env["ADB_LOG"]), "devices": Path(env["ADB_DEVICES"])}


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_bench_on_android_pushes_runs_and_cleans_up(stand_in_adb, export_digits, tmp_path, capsys):
    # a space in the name: arguments must be quoted
    spaced = copy_artifact(export_digits("tflite", "int8").path, tmp_path, "model int8.tflite")
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
        "--no-noise-guard",
        "--precision",
        "off",
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
        "--config",
        str(plumbing_config(tmp_path)),
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
    # the phone's memory as dumpsys read the runner: its RSS as the peak, no share of the model
    assert phone["memory"]["process_peak_mb"] == pytest.approx(RECORDED_RSS_KB / 1024)
    assert phone["memory"]["model_mb"] is None
    report = (run_dir / "report.md").read_text()
    assert "android" in report and f"{RECORDED_RSS_KB / 1024:.0f} / -" in report


def test_a_failing_runner_is_a_failed_measurement_and_still_cleans_up(
    stand_in_adb, export_digits, monkeypatch, capsys
):
    monkeypatch.setenv("ADB_RUNNER_FAILS", "1")
    path = export_digits("tflite", "int8").path
    result = run_cli(capsys, "bench", str(path), "--device", "android", "--no-noise-guard")
    assert result.code == 1 and "could not load model" in result.err
    assert _calls(stand_in_adb["log"])[-1][-1] == "rm -rf /data/local/tmp/edgekit"


def _bench_android(capsys, path, *extra):
    quick = ("--min-seconds", "0.2", "--rounds", "3", "--no-noise-guard", "--precision", "off")
    return run_cli(capsys, "bench", str(path), "--device", "android", *quick, *extra)


def test_bench_on_android_reports_dumpsys_meminfo_of_the_runners_process(
    stand_in_adb, export_digits, capsys
):
    path = export_digits("tflite", "int8").path
    result = _bench_android(capsys, path, "--json")
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)
    memory = record["memory"]
    # what the recorded dumpsys says: TOTAL PSS 6178 kB, TOTAL RSS 12268 kB
    assert memory["status"] == "ok"
    assert memory["pss_mb"] == pytest.approx(RECORDED_PSS_KB / 1024)
    assert memory["process_peak_mb"] == pytest.approx(RECORDED_RSS_KB / 1024)
    assert memory["file_mb"] == pytest.approx(path.stat().st_size / 2**20)
    # no trivial model runs on the phone: no floor, so no share of the model and no residual
    assert memory["floor_mb"] is memory["model_mb"] is memory["residual_mb"] is None
    (note,) = memory["notes"]
    assert "dumpsys meminfo of the runner's process on emulator-5554" in note
    assert "floor" in note and "not measured" in note
    # benchmark_model's own figures, kept apart from the parts
    assert memory["runner_mb"] == {"peak_rss_mb": pytest.approx(4.55469),
                                   "init_delta_mb": pytest.approx(2.8125),
                                   "overall_delta_mb": pytest.approx(3.14844)}  # fmt: skip
    shell = [call[3] for call in _calls(stand_in_adb["log"]) if call[2:3] == ["shell"]]
    assert "pidof benchmark_model" in shell
    assert any(command.startswith("dumpsys meminfo ") for command in shell)
    text = _bench_android(capsys, path)
    assert text.code == 0, text.err
    assert f"PSS {RECORDED_PSS_KB / 1024:.2f} MB, RSS {RECORDED_RSS_KB / 1024:.2f} MB" in text.out
    assert "peak_rss 4.55, init_delta 2.81, overall_delta 3.15" in text.out


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("ADB_DUMPSYS_FAILS", "Can't find service: meminfo", "Can't find service: meminfo"),
        ("ADB_RUNNER_GONE", "1", "the process had exited (No process found for: "),
    ],
)
def test_a_dumpsys_that_reads_nothing_is_one_line_and_the_latency_stands(
    stand_in_adb, export_digits, capsys, monkeypatch, variable, value, why
):
    monkeypatch.setenv(variable, value)
    result = _bench_android(capsys, export_digits("tflite", "int8").path)
    assert result.code == 0, result.err
    assert "0.298" in result.out  # the row's latency, as the runner printed it
    (line,) = [line for line in result.out.splitlines() if line.startswith("memory:")]
    assert line.startswith(
        "memory: android: dumpsys meminfo of the runner's process on emulator-5554 "
        "(benchmark_model) read nothing: "
    )
    assert why in line and "memory (MB)" not in result.out


def test_checks_memory_probe_says_in_one_line_it_cannot_run_on_a_phone(
    stand_in_adb, export_digits, capsys
):
    path = export_digits("tflite", "int8").path
    result = run_cli(capsys, "check", str(path), "--device", "android", "--max-peak-mb", "100",
                     "--json")  # fmt: skip
    assert result.code == 1, result.err
    (gate,) = json.loads(result.out)["gates"]
    assert not gate["passed"] and "\n" not in gate["detail"]
    assert "cannot run on a phone" in gate["detail"]
    assert "edgekit bench --device android reports dumpsys meminfo" in gate["detail"]
    assert not stand_in_adb["log"].exists()  # no adb call: nothing ran on the phone


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


def test_dumpsys_meminfo_is_read_in_each_releases_format():
    recorded = (DATA / "dumpsys_meminfo_benchmark_model.txt").read_text()
    both = {"pss_kb": RECORDED_PSS_KB, "rss_kb": RECORDED_RSS_KB}
    assert parse_meminfo(recorded) == both
    assert parse_meminfo(recorded.split(" App Summary")[0]) == both  # the table's TOTAL row
    # thousands grouped; Android 9's summary (a TOTAL of PSS, no RSS) under its older table
    grouped = "** MEMINFO in pid 321 [benchmark_model] **\n TOTAL PSS: 155,956 TOTAL RSS: 285,640"
    assert parse_meminfo(grouped) == {"pss_kb": 155_956, "rss_kb": 285_640}
    older = (
        "                   Pss  Private  Private  SwapPss     Heap     Heap     Heap\n"
        "                 Total    Dirty    Clean    Dirty     Size    Alloc     Free\n"
        "                ------   ------   ------   ------   ------   ------   ------\n"
        "        TOTAL     5000     3000      100        0     4096     2000     2096\n"
        "           TOTAL:     5000       TOTAL SWAP PSS:        0\n"
    )
    assert parse_meminfo(older) == {"pss_kb": 5000}
    with pytest.raises(ValueError, match="had exited"):
        parse_meminfo("No process found for: 12345\n")
    with pytest.raises(ValueError, match=r"no TOTAL PSS \(Can't find service: meminfo\)"):
        parse_meminfo("Can't find service: meminfo\n")
    assert parse_pids("12345\n") == [12345] and parse_pids("") == []
    assert parse_pids("4321 12345\n") == [4321, 12345]


def test_several_runners_or_none_at_all_give_no_reading_and_say_why(export_digits):
    from edgekit.measure.memory import dumpsys_record

    def phone(pids):
        def shell(command):
            if command[0] == "pidof":
                return pids
            raise AssertionError(f"dumpsys of one of several processes: {command}")

        return shell

    several = RunnerMemory(phone("4321 12345\n"), "R58M123", "benchmark_model")
    with several.watching():
        time.sleep(0.05)  # the run
    figures = several.figures()
    assert figures["readings"] == 0 and "pids 4321 12345" in figures["failure"]
    none = RunnerMemory(phone(""), "R58M123", "benchmark_model")
    with none.watching():
        pass  # a run over before pidof saw it
    path = export_digits("tflite", "int8").path
    record = dumpsys_record("tflite/int8", "android", 1, none.figures(), path, "tflite")
    assert record.status == "unavailable" and record.error == (
        "android: dumpsys meminfo of the runner's process on R58M123 (benchmark_model) read "
        "nothing: every run ended before it could be read"
    )


def test_benchmark_models_own_memory_lines_in_its_releases_formats():
    timings = "INFO: Inference timings in us: Init: 1, First inference: 2, Warmup (avg): 3, " \
              "Inference (avg): 4\n"  # fmt: skip
    newer = timings + (
        "INFO: Memory footprint delta from the start of the tool (MB): init=156.055 "
        "overall=178.805\n"
        "INFO: Overall peak memory footprint (MB) via periodic monitoring: 183.27\n"
    )
    figures = parse_benchmark_model(newer)
    assert figures["peak_rss_mb"] == pytest.approx(183.27)
    assert figures["init_delta_mb"] == pytest.approx(156.055)
    assert figures["overall_delta_mb"] == pytest.approx(178.805)
    assert "peak_rss_mb" not in parse_benchmark_model(timings)


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
    timer = get_device("android").timer(artifact, 1, None, LatencyProtocol(), 60)
    try:
        block = timer.block(25)
    finally:
        timer.close()
    assert block.samples_ms is None and block.median_ms == pytest.approx(0.298)
    assert "--num_runs=25" in timer.runtime["command"]


def test_a_pool_asks_a_device_once_per_artifact_whether_it_can_run_it(export_digits):
    # the pool, then evaluate and bench: one answer (a phone's check is an adb round trip)
    from edgekit.devices import get_device

    device, asked = get_device("android"), []
    device.unavailable_reason = lambda artifact: asked.append(artifact.path) or "no phone"
    artifact = export_digits("tflite", "fp32")
    assert device.why_unavailable(artifact) == device.why_unavailable(artifact) == "no phone"
    assert asked == [artifact.path]


def test_a_phone_that_heats_up_during_a_run_marks_its_measurement_throttled(
    stand_in_adb, export_digits, monkeypatch, capsys
):
    """The first reading is cool, every later one hot: the big cores capped at 1.80 GHz and
    Android's thermal status moderate (tests/data/phone_conditions_*.txt)."""
    readings = [str(DATA / "phone_conditions_cool.txt"), str(DATA / "phone_conditions_hot.txt")]
    monkeypatch.setenv("ADB_CONDITIONS", os.pathsep.join(readings))
    artifact = str(export_digits("tflite", "int8").path)
    args = ["bench", artifact, "--device", "android", "--rounds", "3", "--no-noise-guard",
            "--precision", "off", "--json"]  # fmt: skip
    result = run_cli(capsys, *args)
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)
    assert record["throttled"] and record["rounds_throttled"] >= 1
    assert any(w.startswith("THROTTLED") for w in record["warnings"])
    assert record["conditions"]["max_c"] == pytest.approx(47.9)


def test_a_cool_phone_s_conditions_are_recorded_and_not_throttled(
    stand_in_adb, export_digits, capsys
):
    artifact = str(export_digits("tflite", "int8").path)
    args = ["bench", artifact, "--device", "android", "--rounds", "3", "--no-noise-guard",
            "--precision", "off", "--json"]  # fmt: skip
    result = run_cli(capsys, *args)
    (record,) = json.loads(result.out)
    assert not record["throttled"] and record["conditions"]["readable"]
    assert record["conditions"]["mhz"]["max"] == pytest.approx(2842, abs=1)
    assert record["conditions"]["max_c"] == pytest.approx(38.5)
