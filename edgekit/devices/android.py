"""Android devices over adb (an emulator or a phone), chosen by serial."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import DeviceUnavailable

ADB_TIMEOUT_S = 30


@dataclass(frozen=True)
class AdbDevice:
    serial: str
    state: str  # device, offline, unauthorized, ...
    properties: dict[str, str]


def adb_path() -> str:
    path = shutil.which("adb")
    if path is None:
        raise DeviceUnavailable(
            "adb: not found on PATH (install Debian's 'adb' package or Android platform-tools)"
        )
    return path


def parse_devices(output: str) -> list[AdbDevice]:
    """Parse ``adb devices -l``: ``SERIAL STATE key:value ...`` after the header line."""
    devices = []
    for line in output.splitlines():
        line = line.strip()
        if not line or line.startswith(("List of devices", "*")):
            continue
        fields = line.split()
        if len(fields) < 2:
            continue
        properties = dict(field.split(":", 1) for field in fields[2:] if ":" in field)
        devices.append(AdbDevice(fields[0], fields[1], properties))
    return devices


def attached_devices() -> list[AdbDevice]:
    """``adb devices -l``, parsed."""
    out = subprocess.run(
        [adb_path(), "devices", "-l"],
        capture_output=True,
        text=True,
        timeout=ADB_TIMEOUT_S,
        check=False,
    ).stdout
    return parse_devices(out)


def list_devices() -> list[dict[str, object]]:
    return [
        {"serial": device.serial, "state": device.state, **device.properties}
        for device in attached_devices()
    ]


# --- running an artifact with the official runners ---

REMOTE_DIR = "/data/local/tmp/edgekit"
RUNNER_ENV = {  # where a user points edgekit at each official runner binary (built for the ABI)
    "tflite": "EDGEKIT_BENCHMARK_MODEL",  # LiteRT's benchmark_model
    "executorch": "EDGEKIT_EXECUTOR_RUNNER",  # ExecuTorch's executor_runner
    "onnx": "EDGEKIT_ORT_PERF_TEST",  # onnxruntime_perf_test
}


def _adb(serial: str, *args: str, timeout: float = ADB_TIMEOUT_S) -> str:
    completed = subprocess.run(
        [adb_path(), "-s", serial, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        reason = (completed.stderr.strip() or completed.stdout.strip() or "no output").splitlines()[
            -1
        ]
        raise DeviceUnavailable(f"adb -s {serial} {args[0]}: failed ({reason})")
    return completed.stdout


def shell(serial: str, command: list[str], timeout: float = 600) -> str:
    """Run ``command`` on the device; every argument is quoted for the device's shell."""
    return _adb(serial, "shell", " ".join(shlex.quote(part) for part in command), timeout=timeout)


def choose_device(serial: str | None) -> AdbDevice:
    devices = attached_devices()
    if serial is not None:
        devices = [device for device in devices if device.serial == serial]
        if not devices:
            raise DeviceUnavailable(f"adb: no device with serial {serial} (see 'adb devices')")
    if not devices:
        raise DeviceUnavailable("adb: no device attached (start an emulator or plug in a phone)")
    if len(devices) > 1:
        serials = ", ".join(device.serial for device in devices)
        raise DeviceUnavailable(f"adb: several devices ({serials}); choose one with --serial")
    device = devices[0]
    if device.state == "unauthorized":
        raise DeviceUnavailable(
            f"adb: {device.serial} is unauthorized (accept the prompt on the phone)"
        )
    if device.state != "device":
        raise DeviceUnavailable(f"adb: {device.serial} is {device.state}")
    return device


def device_facts(serial: str) -> dict[str, str]:
    return {
        "abi": shell(serial, ["getprop", "ro.product.cpu.abi"]).strip(),
        "android": shell(serial, ["getprop", "ro.build.version.release"]).strip(),
        "model": shell(serial, ["getprop", "ro.product.model"]).strip(),
    }


def runner_path(target: str, runner: str | None = None) -> Path:
    variable = RUNNER_ENV[target]
    chosen = runner or os.environ.get(variable)
    if not chosen:
        raise DeviceUnavailable(
            f"android: no runner for {target}; set {variable} to the path of the official runner "
            "built for the device's ABI"
        )
    path = Path(chosen)
    if not path.is_file():
        raise DeviceUnavailable(f"{path}: runner for {target} not found")
    return path


def runner_command(
    target: str, runner: str, model: str, threads: int, protocol: Any, gpu: bool
) -> list[str]:
    """The official runner's command line for one measurement."""
    if target == "tflite":
        return [
            runner,
            f"--graph={model}",
            f"--num_threads={threads}",
            f"--warmup_runs={protocol.warmup}",
            f"--num_runs={protocol.min_runs}",
            f"--min_secs={protocol.min_seconds}",
            f"--use_gpu={'true' if gpu else 'false'}",
            f"--use_xnnpack={'false' if gpu else 'true'}",
        ]
    if target == "executorch":
        return [
            runner,
            f"--model_path={model}",
            f"--num_executions={protocol.min_runs}",
            f"--cpu_threads={threads}",
        ]
    return [runner, "-m", "times", "-r", str(protocol.min_runs), "-x", str(threads), "-I", model]


def parse_benchmark_model(output: str) -> dict[str, float]:
    """LiteRT benchmark_model: its `Inference timings in us` and `count=... avg=...` lines."""
    figures: dict[str, float] = {}
    timings = re.search(
        r"Inference timings in us: Init: ([\d.]+), First inference: ([\d.]+), "
        r"Warmup \(avg\): ([\d.e+]+), Inference \(avg\): ([\d.e+]+)",
        output,
    )
    if not timings:
        raise ValueError("benchmark_model output has no 'Inference timings in us' line")
    figures["load_ms"] = float(timings.group(1)) / 1e3
    figures["first_ms"] = float(timings.group(2)) / 1e3
    figures["mean_ms"] = float(timings.group(4)) / 1e3
    runs = [line for line in output.splitlines() if re.search(r"count=\d+ first=", line)]
    if runs:  # the last such line is the timed runs (the one before is warm-up)
        fields = dict(re.findall(r"(\w+)=([\d.e+]+)", runs[-1]))
        figures.update(
            count=float(fields["count"]),
            min_ms=float(fields["min"]) / 1e3,
            max_ms=float(fields["max"]) / 1e3,
            std_ms=float(fields.get("std", 0)) / 1e3,
        )
        median = fields.get("median", fields.get("p50"))  # newer releases print percentiles
        if median is not None:
            figures["p50_ms"] = float(median) / 1e3
    memory = re.search(r"Peak memory footprint \(MB\): init=([\d.]+) overall=([\d.]+)", output)
    if memory:
        figures["peak_rss_mb"] = float(memory.group(2))
    return figures


def parse_executor_runner(output: str) -> dict[str, float]:
    """ExecuTorch ``executor_runner``: ``Model executed successfully N time(s) in T ms.``"""
    match = re.search(r"Model executed successfully (\d+) time\(s\) in ([\d.]+) ms", output)
    if not match:
        raise ValueError("executor_runner output has no 'Model executed successfully' line")
    count, total = int(match.group(1)), float(match.group(2))
    return {"count": float(count), "mean_ms": total / count}


def parse_ort_perf_test(output: str) -> dict[str, float]:
    """``onnxruntime_perf_test``: average, min/max and percentile latencies (seconds)."""
    average = re.search(r"Average inference time cost: ([\d.e+-]+) ms", output)
    if not average:
        raise ValueError("onnxruntime_perf_test output has no 'Average inference time cost' line")
    figures = {"mean_ms": float(average.group(1))}
    for key, label in (
        ("min_ms", "Min"),
        ("max_ms", "Max"),
        ("p50_ms", "P50"),
        ("p90_ms", "P90"),
        ("p99_ms", "P99"),
    ):
        match = re.search(rf"{label} Latency: ([\d.e+-]+) s", output)
        if match:
            figures[key] = float(match.group(1)) * 1e3
    runs = re.search(r"Total inference requests: (\d+)", output)
    if runs:
        figures["count"] = float(runs.group(1))
    creation = re.search(r"Session creation time cost: ([\d.e+-]+) s", output)
    if creation:
        figures["load_ms"] = float(creation.group(1)) * 1e3
    peak = re.search(r"Peak working set size: (\d+) bytes", output)
    if peak:
        figures["peak_rss_mb"] = int(peak.group(1)) / 2**20
    return figures


PARSERS = {
    "tflite": parse_benchmark_model,
    "executorch": parse_executor_runner,
    "onnx": parse_ort_perf_test,
}


def bench_on_android(
    artifact: Any,
    serial: str | None,
    threads: int,
    protocol: Any,
    runner: str | None = None,
    gpu: bool = False,
) -> Any:
    """Push the artifact and the target's official runner, run it, parse its output, clean up."""
    from edgekit.bench import LatencyRecord

    record = LatencyRecord.for_artifact(artifact, "android", threads)
    try:
        device = choose_device(serial)
        local_runner = runner_path(artifact.target, runner)
        facts = device_facts(device.serial)
        shell(device.serial, ["mkdir", "-p", REMOTE_DIR])
        remote_model = f"{REMOTE_DIR}/{artifact.path.name}"
        remote_runner = f"{REMOTE_DIR}/{local_runner.name}"
        try:
            _adb(device.serial, "push", str(artifact.path), remote_model, timeout=600)
            _adb(device.serial, "push", str(local_runner), remote_runner, timeout=600)
            shell(device.serial, ["chmod", "755", remote_runner])
            command = runner_command(
                artifact.target, remote_runner, remote_model, threads, protocol, gpu
            )
            output = shell(device.serial, command, timeout=1800)
        finally:
            shell(device.serial, ["rm", "-rf", REMOTE_DIR])
        figures = PARSERS[artifact.target](output)
    except (DeviceUnavailable, ValueError, subprocess.TimeoutExpired) as exc:
        record.error = str(exc)
        return record
    record.status = "ok"
    record.load_ms = figures.pop("load_ms", None)
    record.first_ms = figures.pop("first_ms", None)
    record.peak_rss_mb = figures.pop("peak_rss_mb", None)
    figures.setdefault("p50_ms", figures["mean_ms"])
    record.stats = figures
    record.runtime = {
        "runner": local_runner.name,
        "serial": device.serial,
        **facts,
        "command": json.dumps(command),
    }
    if "std_ms" not in figures:
        record.warnings.append("the runner reports only a mean: no spread or percentiles")
    return record
