"""What a board is, asked once per run: read on the board by its own Python (``SCRIPT``, sent
on stdin) beside ``uname -m`` of its shell. Rows carry it: CPU model and cores, kernel,
Python, the runtimes' versions in edgekit's folder there."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from edgekit.devices.ssh.connection import Connection
from edgekit.errors import DeviceUnavailable

ENV_DIR = "env"  # the runtimes' folder in the work directory (``edgekit device setup``)
ENV_STAMP = f"{ENV_DIR}/.edgekit-env.json"  # written last by setup: the folder is complete
# distribution -> the module a target's session imports
RUNTIMES = {
    "numpy": "numpy",
    "ai-edge-litert": "ai_edge_litert",
    "onnxruntime": "onnxruntime",
    "executorch-numpy-runtime": "executorch_numpy_runtime",
}
SUPPORTED_MACHINES = ("aarch64", "x86_64")
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))

SCRIPT = f"""
import json, os, platform, sys
from importlib.metadata import version
def model():
    try:
        lines = open("/proc/cpuinfo").read().splitlines()
    except OSError:
        return "?"
    found = {{}}
    for line in lines:
        key, _, value = line.partition(":")
        found.setdefault(key.strip(), value.strip())
    for key in ("Model", "model name", "Hardware"):
        if found.get(key):
            return found[key]
    part = found.get("CPU part")
    return f"ARM part {{part}}" if part else "?"
def dist(name):
    try:
        return version(name)
    except Exception:
        return None
stamp = None
if os.path.exists({ENV_STAMP!r}):
    stamp = json.load(open({ENV_STAMP!r}))
print(json.dumps({{
    "cpu_model": model(), "cores": os.cpu_count(), "kernel": platform.release(),
    "machine": platform.machine(), "python": platform.python_version(),
    "runtimes": {{name: dist(name) for name in {list(RUNTIMES)!r}}}, "env": stamp,
}}))
"""


@dataclass(frozen=True)
class Fingerprint:
    board: str
    cpu_model: str
    cores: int
    kernel: str
    machine: str  # what the board's Python runs as (aarch64)
    shell_machine: str  # what its shell runs as: another one means an emulated Python
    python: str
    runtimes: dict[str, str | None] = field(default_factory=dict)
    env: dict[str, Any] | None = None  # setup's stamp: None until ``edgekit device setup``

    @property
    def emulated(self) -> bool:
        return self.machine != self.shell_machine

    @property
    def python_version(self) -> tuple[int, int]:
        major, minor = self.python.split(".")[:2]
        return int(major), int(minor)

    def refusal(self) -> str | None:
        """Why edgekit cannot use this board at all (an architecture, a Python), or None."""
        if self.machine not in SUPPORTED_MACHINES:
            hint = (
                " (32-bit ARM: the runtimes publish no wheels for it)"
                if "arm" in self.machine
                else ""
            )
            return f"{self.board}: a {self.machine} board is not supported{hint}; aarch64 or x86_64"
        if self.python_version not in SUPPORTED_PYTHONS:
            return (
                f"{self.board}: Python {self.python} on the board; edgekit needs 3.11-3.13 "
                "(set python in [devices.NAME] to another interpreter there)"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"emulated": self.emulated}


def read_fingerprint(connection: Connection) -> Fingerprint:
    """The board's facts, through its Python with edgekit's folder on the path; a board without
    that Python is one line naming the fix."""
    board = connection.board
    python = shlex.quote(board.python)
    done = connection.run(
        f"uname -m; command -v {python} >/dev/null || exit 3; "
        f"PYTHONPATH={ENV_DIR} PYTHONNOUSERSITE=1 {python} -",
        stdin=SCRIPT.encode(),
        what="reading the board",
        timeout_s=120,
    )
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode == 3:
        raise DeviceUnavailable(
            f"{board.name}: no Python '{board.python}' on the board (install python3 3.11-3.13 "
            "there, or set python in [devices.NAME]), then run 'edgekit device setup "
            f"{board.name}'"
        )
    if done.returncode != 0 or len(lines) < 2:
        said = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise DeviceUnavailable(f"{board.name}: its Python '{board.python}' failed: {said[:200]}")
    facts = json.loads(lines[-1])
    return Fingerprint(board.name, shell_machine=lines[0].strip(), **facts)
