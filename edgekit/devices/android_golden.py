"""A golden bundle's stage-3 tensors through a target's official runner on an Android phone:
the artifact, the runner and each raw input file are pushed, the runner runs once per image
with the flags its target gives (``OfficialRunner.golden_command``), and the raw output file it
writes is pulled back and dequantized with the artifact's output spec."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgekit.errors import DeviceUnavailable
from edgekit.targets import get_target
from edgekit.targets.session import dequantize

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

RUN_TIMEOUT_S = 600


def golden_refusal(artifact: Artifact) -> str | None:
    """Why the target's official runner cannot give this artifact's outputs (None: it can)."""
    official = get_target(artifact.target).official_runner()
    if official is None:
        return f"android: {artifact.target} has no official runner in edgekit"
    if official.golden_command is None or official.golden_output is None:
        return (
            f"android: {artifact.target}'s official runner cannot check a golden bundle: "
            f"{official.no_golden} (check it on cpu or arm64-emu)"
        )
    return None


@dataclass(frozen=True)
class Phone:
    """The phone as edgekit's adb helpers reach it (edgekit.devices.android's adb and shell)."""

    serial: str
    remote_dir: str
    adb: Callable[..., str]  # adb(serial, verb, *args, timeout=) -> stdout
    shell: Callable[..., str]  # shell(serial, command words, timeout=) -> stdout

    def push(self, local: Path, remote: str) -> None:
        self.adb(self.serial, "push", str(local), remote, timeout=RUN_TIMEOUT_S)

    def pull(self, remote: str, local: Path) -> None:
        self.adb(self.serial, "pull", remote, str(local), timeout=RUN_TIMEOUT_S)

    def run(self, command: list[str]) -> str:
        return self.shell(self.serial, command, timeout=RUN_TIMEOUT_S)


def runner_outputs(
    artifact: Artifact, inputs: list[Path], phone: Phone, *, runner: Path, runtime: dict
) -> tuple[np.ndarray, dict]:
    """Each raw input file through the artifact on the phone with the target's official
    ``runner`` (a local binary): the dequantized outputs (N, classes) float32, and ``runtime``
    with the last command added."""
    refusal = golden_refusal(artifact)
    if refusal:
        raise DeviceUnavailable(refusal)
    official = get_target(artifact.target).official_runner()
    model = f"{phone.remote_dir}/{artifact.path.name}"
    remote_runner = f"{phone.remote_dir}/{runner.name}"
    rows = []
    try:
        phone.run(["mkdir", "-p", phone.remote_dir])
        phone.push(artifact.path, model)
        phone.push(runner, remote_runner)
        phone.run(["chmod", "755", remote_runner])
        with tempfile.TemporaryDirectory(prefix="edgekit-golden-") as pulled:
            for index, path in enumerate(inputs):
                tensor = f"{phone.remote_dir}/input-{index:03d}.bin"
                output = f"{phone.remote_dir}/output-{index:03d}"
                phone.push(path, tensor)
                command = official.golden_command(
                    remote_runner, model, tensor, output, artifact.manifest.input
                )
                phone.run(command)
                local = Path(pulled) / f"{index:03d}.bin"
                phone.pull(official.golden_output(output), local)
                rows.append(read_output(local, artifact, index))
                runtime["command"] = json.dumps(command)
    finally:  # nothing of ours stays on the phone
        with contextlib.suppress(DeviceUnavailable):
            phone.run(["rm", "-rf", phone.remote_dir])
    return np.concatenate(rows), runtime


def read_output(local: Path, artifact: Artifact, index: int) -> np.ndarray:
    """The raw output file the runner wrote, as the output spec's dtype and shape, dequantized."""
    spec = artifact.manifest.output
    dtype = np.dtype(spec.dtype)
    count = int(np.prod(spec.shape))
    data = local.read_bytes()
    if len(data) < count * dtype.itemsize:
        raise DeviceUnavailable(
            f"android: the runner wrote {len(data)} bytes of outputs for image {index}; the "
            f"output {spec.dtype}{spec.shape} takes {count * dtype.itemsize}"
        )
    # several outputs are written one after the other: the first is the logits
    raw = np.frombuffer(data, dtype=dtype, count=count).reshape(spec.shape)
    return dequantize(raw, spec)
