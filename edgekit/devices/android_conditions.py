"""A phone's conditions before and after each run of the official runner, over adb: the
cpufreq and thermal files of its sysfs (where the shell user may read them: many phones hide
``/sys/class/thermal``) and Android's own thermal status and temperatures (``dumpsys
thermalservice``: the status the framework throttles by, 0 NONE to 6 SHUTDOWN). One shell
command per reading; the files are mirrored into a folder laid out as sysfs, which
``edgekit.worker.conditions`` reads as it reads this machine's."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from edgekit.worker.conditions import block_conditions, read_conditions

SYSFS_FILES = (
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_max_freq",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor",
    "/sys/class/thermal/thermal_zone*/type",
    "/sys/class/thermal/thermal_zone*/temp",
    "/sys/class/thermal/thermal_zone*/trip_point_*",
)
MARK = "=== dumpsys thermalservice ==="
SCRIPT = (
    f"for f in {' '.join(SYSFS_FILES)}; do "
    '[ -r "$f" ] && echo "$f=$(cat "$f" 2>/dev/null)"; done; '
    f"echo '{MARK}'; dumpsys thermalservice 2>/dev/null"
)
# android.os.PowerManager's THERMAL_STATUS_* names
STATUS = ("none", "light", "moderate", "severe", "critical", "emergency", "shutdown")
_HAL = re.compile(r"Temperature\{mValue=([-\d.]+), mType=-?\d+, mName=([^,]+), mStatus=(\d+)")


class PhoneConditions:
    """Readings of one phone, through ``run_shell`` (``sh -c SCRIPT`` there)."""

    def __init__(self, run_shell: Callable[[list[str]], str]) -> None:
        self._run_shell = run_shell
        self._folder = tempfile.TemporaryDirectory(prefix="edgekit-phone-sysfs-")

    def read(self) -> dict:
        text = self._run_shell(["sh", "-c", SCRIPT])
        files, _, thermal = text.partition(MARK)
        root = Path(self._folder.name)
        cpus = set()
        for line in files.splitlines():
            path, sep, value = line.partition("=")
            if not sep or not path.startswith("/sys/"):
                continue
            mirrored = root / path.lstrip("/")
            mirrored.parent.mkdir(parents=True, exist_ok=True)
            mirrored.write_text(value.strip() + "\n")
            found = re.search(r"/cpu(\d+)/", path)
            if found:
                cpus.add(int(found.group(1)))
        snapshot = read_conditions(str(root), sorted(cpus))
        return with_thermal_service(snapshot, thermal)

    def block(self, before: dict, after: dict) -> dict:
        """What a block records: ``block_conditions``, and Android's thermal status when the
        framework was throttling (status light or above at either end)."""
        judged = block_conditions(before, after)
        status = max(before.get("android_status", 0), after.get("android_status", 0))
        if status and not judged.get("throttled"):
            judged.update(
                readable=True,
                throttled=f"Android thermal status {STATUS[min(status, 6)]} ({status}) during "
                "the run (dumpsys thermalservice)",
            )
        if "android_status" in after:
            judged["android_status"] = after["android_status"]
        return judged

    def close(self) -> None:
        self._folder.cleanup()


def with_thermal_service(snapshot: dict, text: str) -> dict:
    """``snapshot`` with ``dumpsys thermalservice``'s status and, where sysfs gave no zone, the
    HAL's current temperatures (°C by sensor name)."""
    status = re.search(r"^\s*Thermal Status:\s*(\d+)", text, re.M)
    if status:
        snapshot["android_status"] = int(status.group(1))
    current = text.split("Current temperatures from HAL:", 1)
    if not snapshot.get("zones") and len(current) == 2:
        for value, name, _ in _HAL.findall(current[1].split("Current cooling devices", 1)[0]):
            snapshot.setdefault("zones", {})[name] = {"temp_c": float(value), "trips": []}
    if status or snapshot.get("zones"):
        snapshot["readable"] = True
        snapshot.pop("note", None)
    return snapshot
