"""A stand-in ``adb`` (no emulator runs on this machine): it lists one device, answers getprop,
accepts pushes and prints a runner's recorded output; while the file ``ADB_RUNNER_HOLD``
names exists, the runner holds (at most 2 minutes), as a phone still benchmarking does. Used by
the android and cluster tests."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"

STAND_IN_ADB = """#!{python}
import json, os, sys, time
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
        hold = os.environ.get("ADB_RUNNER_HOLD")
        waited = 0
        while hold and os.path.exists(hold) and waited < 2400:  # a phone still benchmarking
            time.sleep(0.05)
            waited += 1
        if os.environ.get("ADB_RUNNER_FAILS"):
            print("ERROR: could not load model", file=sys.stderr)
            sys.exit(1)
        print(open(os.environ["ADB_RUNNER_OUTPUT"]).read())
"""


def stand_in_adb_env(folder: Path, serial: str = "emulator-5554") -> dict[str, str]:
    """Write the stand-in into ``folder``; the environment a process needs to find it."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    adb = bin_dir / "adb"
    adb.write_text(STAND_IN_ADB.format(python=sys.executable, runner="benchmark_model"))
    adb.chmod(adb.stat().st_mode | stat.S_IEXEC)
    runner = folder / "benchmark_model"
    runner.write_text("runner binary")
    devices = folder / "devices.txt"
    devices.write_text(
        f"{serial}          device product:sdk_gphone64_arm64 model:sdk_gphone64 transport_id:1"
    )
    return {
        "PATH_PREFIX": str(bin_dir),
        "ADB_LOG": str(folder / "adb.log"),
        "ADB_DEVICES": str(devices),
        "ADB_RUNNER_OUTPUT": str(DATA / "benchmark_model.txt"),
        "EDGEKIT_BENCHMARK_MODEL": str(runner),
        "ADB_RUNNER_HOLD": str(folder / "hold"),
    }
