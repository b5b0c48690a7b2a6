"""``edgekit device setup ssh://...``: make a board ready, saying what was done.

1. Check the board: its architecture (aarch64 or x86_64) and its Python (3.11-3.13).
2. Download, on this machine, the runtimes' wheels for the board's platform and Python
   (``pip download --platform ... --only-binary``): many boards have no internet. A runtime
   with no wheel for the board is named and left out; the others go on.
3. Push the wheels (and pip's own wheel: a board's Python need not have pip) by name, once.
4. Install them on the board with pip into ``env/`` of the work directory (``--target``, into a
   part folder renamed when complete), and stamp it. A board whose stamp already names the same
   wheels is left as it is.

The runtimes' folder is a ``pip --target`` folder rather than a venv: Debian and Raspberry Pi OS
ship ``venv`` without ``ensurepip`` unless python3-venv is installed, and edgekit runs the board's
Python with the folder first on its path (``PYTHONNOUSERSITE``), which is all a venv would add."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from edgekit.common.cache import cache_dir
from edgekit.common.progress import Progress
from edgekit.devices.arm64_emu.emulator import CORE, PTE
from edgekit.devices.ssh.connection import Connection
from edgekit.devices.ssh.fingerprint import ENV_DIR, ENV_STAMP, Fingerprint, read_fingerprint
from edgekit.errors import DeviceUnavailable

PIP = "pip==26.3"  # the Makefile's pip; its wheel runs pip on a board without one
# the pinned runtimes (the arm64 device's pins: the host's versions)
WANTED = tuple(dict.fromkeys(CORE.wheels + PTE.wheels))
MANYLINUX = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014")


def wheel_tags(machine: str, python: tuple[int, int]) -> list[str]:
    """``pip download`` options for CPython ``python`` binary wheels on ``machine`` Linux."""
    digits = f"{python[0]}{python[1]}"
    tags = ["--only-binary=:all:", "--python-version", f"{python[0]}.{python[1]}"]
    tags += ["--implementation", "cp", "--abi", f"cp{digits}", "--abi", "abi3", "--abi", "none"]
    for family in MANYLINUX:
        tags += ["--platform", f"{family}_{machine}"]
    return tags


def download(requirement: str, options: list[str], folder: Path) -> str | None:
    """``requirement`` and what it needs into ``folder``: from the wheels already there if they
    suffice (a host that is offline now), else from the index. None, or why pip found no wheel."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "-q"]
    env = dict(os.environ, PIP_CONSTRAINT="")  # the host's constraints pin x86 choices
    why = ""
    for source in (["--no-index", "--find-links", str(folder)], []):
        done = subprocess.run(
            [*pip, *options, *source, "-d", str(folder), requirement],
            capture_output=True, text=True, timeout=900, env=env, check=False,
        )  # fmt: skip
        if done.returncode == 0:
            return None
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
        why = (errors[0] if errors else (done.stderr.strip().splitlines() or ["?"])[-1])[:200]
    return why


def fill_wheelhouse(
    machine: str, python: tuple[int, int], say: Progress
) -> tuple[Path, list[str], dict[str, str]]:
    """The wheels of the pinned runtimes (and pip) for CPython ``python`` on ``machine`` Linux in
    edgekit's cache: the folder, the requirements it holds, and why each other one is left out."""
    platform = f"cp{python[0]}{python[1]}-{machine}"
    house = cache_dir() / "board-wheels" / platform
    house.mkdir(parents=True, exist_ok=True)
    held, skipped = [], {}
    for requirement in (PIP, *WANTED):
        # pip's own wheel is pure Python: no platform to match
        options = ["--no-deps"] if requirement == PIP else wheel_tags(machine, python)
        why = download(requirement, options, house)
        if why is None:
            held.append(requirement)
        elif requirement == PIP:
            raise DeviceUnavailable(f"pip download {PIP} failed: {why}")
        else:
            skipped[requirement.split("==")[0]] = f"no {platform} wheel of {requirement} ({why})"
            say(f"{requirement}: no wheel for {platform}; left out ({why})")
    say(f"wheels for {platform}: {len(list(house.glob('*.whl')))} files in {house}")
    return house, [requirement for requirement in held if requirement != PIP], skipped


def setup_board(
    connection: Connection, found: Fingerprint, progress: Progress | None = print
) -> Fingerprint:
    """Make the board of ``connection`` (as ``found`` describes it) ready; returns what it is
    then."""
    say = progress or (lambda message: None)
    board = connection.board
    refusal = found.refusal()
    if refusal:
        raise DeviceUnavailable(refusal)
    from edgekit.common.machine import describe_board

    say(describe_board(found.to_dict()).split(";")[0])  # the board; its runtimes come later
    house, installed, skipped = fill_wheelhouse(found.machine, found.python_version, say)
    wheels = sorted(house.glob("*.whl"))
    stamp = {
        "python": found.python,
        "machine": found.machine,
        "installed": installed,
        "skipped": skipped,
    }
    if (
        found.env is not None
        and found.env.get("installed") == installed
        and found.env.get("python") == found.python
    ):
        say(f"{board.name}: runtimes ready in {board.workdir}/{ENV_DIR} (already installed)")
        return found
    missing = connection.missing([f"wheelhouse/{path.name}" for path in wheels])
    for remote in missing:
        connection.push_file(house / Path(remote).name, remote)
    size = sum((house / Path(remote).name).stat().st_size for remote in missing)
    say(f"{board.name}: pushed {len(missing)} of {len(wheels)} wheels ({size / 2**20:.1f} MB)")
    pip_wheel = next(path.name for path in wheels if path.name.startswith(f"pip-{PIP[5:]}-"))
    python = shlex.quote(board.python)
    targets = " ".join(shlex.quote(requirement) for requirement in installed)
    say(f"{board.name}: pip install --target {ENV_DIR} (on the board: {', '.join(installed)})")
    connection.check(
        f"rm -rf {ENV_DIR}.part && {python} wheelhouse/{pip_wheel}/pip install -q "
        "--disable-pip-version-check --no-index --find-links wheelhouse --root-user-action=ignore "
        f"--target {ENV_DIR}.part {targets} && "
        f"printf '%s' {shlex.quote(json.dumps(stamp))} > {ENV_DIR}.part/{Path(ENV_STAMP).name} && "
        f"rm -rf {ENV_DIR} && mv {ENV_DIR}.part {ENV_DIR}",
        "installing the runtimes",
        timeout_s=1800,
    )
    found = read_fingerprint(connection)
    versions = ", ".join(f"{name} {version}" for name, version in found.runtimes.items() if version)
    left = f"; left out: {', '.join(skipped)}" if skipped else ""
    say(f"{board.name} ready: {versions} in {board.workdir}/{ENV_DIR}{left}")
    return found
