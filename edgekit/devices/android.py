"""Android devices over adb (an emulator or a phone), chosen by serial."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

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


def list_devices() -> list[dict[str, object]]:
    out = subprocess.run(
        [adb_path(), "devices", "-l"],
        capture_output=True,
        text=True,
        timeout=ADB_TIMEOUT_S,
        check=False,
    )
    return [
        {"serial": device.serial, "state": device.state, **device.properties}
        for device in parse_devices(out.stdout)
    ]
