"""Android devices over adb (an emulator or a phone), chosen by serial. Each target's official
runner (``Target.official_runner()``: benchmark_model, executor_runner, onnxruntime_perf_test)
is pushed with the artifact and run; a block of the interleaved protocol is one run of it."""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.devices import register
from edgekit.devices.android_conditions import PhoneConditions
from edgekit.devices.android_memory import RunnerMemory
from edgekit.devices.base import Device, DeviceTraits
from edgekit.errors import DeviceUnavailable
from edgekit.targets import get_target
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

ADB_TIMEOUT_S = 30
REMOTE_DIR = "/data/local/tmp/edgekit"
NO_OUTPUTS = (
    "android: the official runners print timings, not outputs, so edgekit measures latency "
    "only there (evaluate the same artifact on cpu or arm64-emu for its numerics)"
)
NO_MEMORY_PROBE = (
    "android: edgekit's memory probe (the runtime's floor, load, release, a leak's slope) is a "
    "Python child of this machine and cannot run on a phone; edgekit bench --device android "
    "reports dumpsys meminfo of the runner's process"
)
# what a runner prints about its own memory (MB: its peak, its growth from its start to the end
# of loading and to its end), kept apart from what dumpsys reads
RUNNER_MEMORY = ("peak_rss_mb", "init_delta_mb", "overall_delta_mb")


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
    out = subprocess.run(
        [adb_path(), "devices", "-l"],
        capture_output=True,
        text=True,
        timeout=ADB_TIMEOUT_S,
        check=False,
    ).stdout
    return parse_devices(out)


def adb(serial: str, *args: str, timeout: float = ADB_TIMEOUT_S) -> str:
    try:
        completed = subprocess.run(
            [adb_path(), "-s", serial, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DeviceUnavailable(
            f"adb -s {serial} {args[0]}: timed out after {timeout:.0f} s"
        ) from None
    if completed.returncode != 0:
        text = completed.stderr.strip() or completed.stdout.strip() or "no output"
        raise DeviceUnavailable(f"adb -s {serial} {args[0]}: failed ({text.splitlines()[-1]})")
    return completed.stdout


def shell(serial: str, command: list[str], timeout: float = 600) -> str:
    """Run ``command`` on the device; every argument is quoted for the device's shell."""
    return adb(serial, "shell", " ".join(shlex.quote(part) for part in command), timeout=timeout)


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


def runner_path(target_name: str) -> Path:
    """The official runner binary of a target, from its environment variable."""
    import os

    runner = get_target(target_name).official_runner()
    if runner is None:
        raise DeviceUnavailable(f"android: {target_name} has no official runner in edgekit")
    chosen = os.environ.get(runner.env_var)
    if not chosen:
        raise DeviceUnavailable(
            f"android: no runner for {target_name}; set {runner.env_var} to the path of the "
            "official runner built for the device's ABI"
        )
    path = Path(chosen)
    if not path.is_file():
        raise DeviceUnavailable(f"{path}: runner for {target_name} not found")
    return path


class RunnerTimer(BlockTimer):
    """The artifact and its runner pushed to the phone; a block is one run of the runner."""

    def __init__(self, artifact: Artifact, serial: str | None, threads: int, *, gpu: bool) -> None:
        self.label = artifact.label
        self._official = get_target(artifact.target).official_runner()
        local_runner = runner_path(artifact.target)
        device = choose_device(serial)
        self.serial = device.serial
        facts = device_facts(self.serial)
        self._model = f"{REMOTE_DIR}/{artifact.path.name}"
        self._runner = f"{REMOTE_DIR}/{local_runner.name}"
        self._threads, self._gpu = threads, gpu
        self.runtime = {"runner": local_runner.name, "serial": self.serial, **facts}
        self._memory = RunnerMemory(self._shell, self.serial, local_runner.name)
        self._conditions = PhoneConditions(self._shell)
        self._runner_says: dict[str, float] = {}
        try:
            shell(self.serial, ["mkdir", "-p", REMOTE_DIR])
            adb(self.serial, "push", str(artifact.path), self._model, timeout=600)
            adb(self.serial, "push", str(local_runner), self._runner, timeout=600)
            shell(self.serial, ["chmod", "755", self._runner])
            first = self._run(1, watch=True)  # untimed: dumpsys's work beside no timed run
        except BaseException:
            self.close()  # nothing of ours stays on the phone
            raise
        self.load_ms, self.first_ms = first.get("load_ms"), first.get("first_ms")
        self.warm_ms = max(first.get("mean_ms", 1.0), 1e-3)

    def _run(self, runs: int, *, watch: bool = False) -> dict[str, float]:
        """One run of the runner; ``watch``: dumpsys reads its process meanwhile."""
        command = self._official.command(self._runner, self._model, self._threads, runs, self._gpu)
        self.runtime["command"] = json.dumps(command)
        with self._memory.watching() if watch else contextlib.nullcontext():
            output = shell(self.serial, command, timeout=1800)
        try:
            figures = self._official.parse(output)
        except ValueError as exc:
            raise DeviceUnavailable(f"android: {exc}") from None
        self._keep_runner_memory(figures)
        return figures

    def _shell(self, command: list[str]) -> str:
        return shell(self.serial, command, timeout=ADB_TIMEOUT_S)

    def _peak_rss_mb(self, figures: dict[str, float]) -> float | None:
        """The row's peak: dumpsys's TOTAL RSS where it read the process (the memory
        table's figure too), else what the runner says of itself."""
        read = (self._memory.reading or {}).get("rss_kb")
        if read is not None:
            return read / 1024.0
        return figures.get("peak_rss_mb", self.peak_rss_mb)

    def _keep_runner_memory(self, figures: dict[str, float]) -> None:
        """The highest of each figure the runner printed about its own memory, over its runs."""
        for key in RUNNER_MEMORY:
            if key in figures:
                self._runner_says[key] = max(figures[key], self._runner_says.get(key, 0.0))

    @property
    def memory(self) -> dict[str, Any]:
        """What dumpsys read of the runner's process during its first run (kB), and what the
        runner said of itself over the session's runs (MB)."""
        return {**self._memory.figures(), "runner_mb": dict(self._runner_says)}

    def block(self, runs: int) -> Block:
        before = self._read_conditions()  # outside the runner's own timing
        figures = self._run(runs)
        after = self._read_conditions()
        self.peak_rss_mb = self._peak_rss_mb(figures)
        mean = figures["mean_ms"]
        summary = {k: v for k, v in figures.items() if k.endswith("_ms") and k != "mean_ms"}
        conditions = self._conditions.block(before, after)
        return Block(
            None, mean, figures.get("p50_ms", mean), summary=summary, conditions=conditions
        )

    def _read_conditions(self) -> dict:
        try:
            return self._conditions.read()
        except DeviceUnavailable as exc:  # a reading is a note, never a failed block
            return {"readable": False, "note": f"conditions: adb could not read them ({exc})"}

    def close(self) -> None:
        if hasattr(self, "_conditions"):
            self._conditions.close()
        with contextlib.suppress(DeviceUnavailable):
            shell(self.serial, ["rm", "-rf", REMOTE_DIR])


@register
class AndroidDevice(Device):
    name = "android"
    options = ("serial",)
    summary = "an Android phone or emulator over adb, with each target's official runner"
    how_to_add = "attach a phone with USB debugging on, or start an emulator (adb devices)"
    tells_memory = False  # no Python child runs on a phone: bench reads dumpsys meminfo instead
    no_memory_probe = NO_MEMORY_PROBE

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        return DeviceTraits(
            latency_comparable=True, predicts=False, note="Android over adb", where="remote"
        )

    def unavailable_reason(self, artifact: Artifact) -> str | None:
        try:
            choose_device(self.settings.get("serial"))
            runner_path(artifact.target)
        except DeviceUnavailable as exc:
            return str(exc)
        return None

    def predict(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1
    ) -> tuple[np.ndarray, dict]:
        raise DeviceUnavailable(NO_OUTPUTS)

    def golden_unavailable_reason(self, artifact: Artifact) -> str | None:
        """Why a golden bundle cannot be checked here with this artifact's runner."""
        from edgekit.devices.android_golden import golden_refusal

        return golden_refusal(artifact) or self.unavailable_reason(artifact)

    def golden_outputs(self, artifact: Artifact, inputs: list[Path]) -> tuple[np.ndarray, dict]:
        """Raw input files (a bundle's stage 3) through the target's official runner: the
        dequantized outputs (N, classes) and what ran them."""
        from edgekit.devices.android_golden import Phone, runner_outputs

        runner = runner_path(artifact.target)
        serial = choose_device(self.settings.get("serial")).serial
        runtime = {"runner": runner.name, "serial": serial, **device_facts(serial)}
        phone = Phone(serial, REMOTE_DIR, adb, shell)
        return runner_outputs(artifact, inputs, phone, runner=runner, runtime=runtime)

    def advertise(self) -> dict[str, float]:
        try:
            ready = [d.serial for d in attached_devices() if d.state == "device"]
        except (DeviceUnavailable, OSError, subprocess.SubprocessError):
            return {}  # no adb here
        if not ready:
            return {}
        return {f"edgekit_device_{self.name}": 1.0, **{f"edgekit_adb_{s}": 1.0 for s in ready}}

    def timer(
        self,
        artifact: Artifact,
        threads: int,
        sample: np.ndarray | None,
        protocol: LatencyProtocol,
        timeout_s: float,
    ) -> BlockTimer:
        return RunnerTimer(artifact, self.settings.get("serial"), threads, gpu=False)

    def facts(self) -> dict[str, Any]:
        path = shutil.which("adb")
        if path is None:
            return {"adb": None, "devices": []}
        try:
            devices = [
                {"serial": d.serial, "state": d.state, **d.properties} for d in attached_devices()
            ]
        except (OSError, subprocess.SubprocessError) as exc:
            return {"adb": path, "devices": [], "error": str(exc)[:160]}
        return {"adb": path, "devices": devices}
