"""A stand-in ``adb`` (no emulator runs on this machine): it lists one device, answers getprop,
keeps what is pushed in a folder standing for the phone (``ADB_PHONE``; ``pull`` copies back,
``mkdir -p`` and ``rm -rf`` act there) and prints a runner's recorded output, or, for a runner
asked for a golden bundle's outputs (an output-file flag), computes them with the real runtime
(stand_in_runners.py); while the file ``ADB_RUNNER_HOLD``
names exists, the runner holds (at most 2 minutes), as a phone still benchmarking does. While a
run goes on, ``pidof`` names its process (its own pid, a file in ``ADB_RUNNING``) and
``dumpsys meminfo PID`` prints a recorded reading of it; a run someone looks for (``pidof``
was asked) outlives its first reading (at most 2 s, and not while another run goes on), as a
phone's run of a second outlives one.
``ADB_DUMPSYS_FAILS`` makes dumpsys fail with that message, ``ADB_RUNNER_GONE`` answers as for
a process that has exited. edgekit's reading of the phone's conditions (cpufreq files and
``dumpsys thermalservice``) prints the recordings ``ADB_CONDITIONS`` lists, one per reading,
the last one again once they are used up. Used by the android and cluster tests."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"

STAND_IN_ADB = """#!{python}
import json, os, re, sys, time
args = sys.argv[1:]
with open(os.environ["ADB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["devices", "-l"]:
    print("List of devices attached")
    print(open(os.environ["ADB_DEVICES"]).read())
    sys.exit(0)
serial, verb, rest = args[1], args[2], args[3:]
phone = os.environ.get("ADB_PHONE")
if verb == "push":
    if phone:  # the phone's files: a folder here
        import shutil
        target = os.path.join(phone, rest[1].lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(rest[0], target)
    print("1 file pushed")
elif verb == "pull":
    import shutil
    source = os.path.join(phone or "/nonexistent", rest[0].lstrip("/"))
    if not os.path.exists(source):
        print(f"adb: error: failed to stat remote object '{{rest[0]}}': No such file or directory",
              file=sys.stderr)
        sys.exit(1)
    shutil.copyfile(source, rest[1])
    print("1 file pulled")
elif verb == "shell":
    command = rest[0]
    running = os.environ["ADB_RUNNING"]
    if phone and command.startswith(("mkdir -p /", "rm -rf /")):
        import shutil
        where = os.path.join(phone, command.split()[-1].lstrip("/"))
        if command.startswith("mkdir"):
            os.makedirs(where, exist_ok=True)
        else:
            shutil.rmtree(where, ignore_errors=True)
    elif " --output_filepath=" in command or " --output_file=" in command:  # golden outputs
        import shlex
        sys.path.insert(0, {tests!r})
        from stand_in_runners import run
        sys.exit(run(shlex.split(command), __import__("pathlib").Path(phone)))
    elif command.startswith("getprop"):
        print({{"ro.product.cpu.abi": "arm64-v8a", "ro.build.version.release": "15",
               "ro.product.model": "sdk_gphone64_arm64"}}[command.split()[1]])
    elif command.startswith("pidof "):
        open(f"{{running}}/watching", "w").close()  # someone reads the runs' memory
        pids = [name for name in os.listdir(running) if name.isdigit()]
        if not pids:
            sys.exit(1)  # toybox's pidof: nothing printed, status 1
        print(" ".join(pids))
    elif command.startswith("dumpsys meminfo "):
        pid = command.split()[-1]
        try:
            if os.environ.get("ADB_DUMPSYS_FAILS"):
                print(os.environ["ADB_DUMPSYS_FAILS"], file=sys.stderr)
                sys.exit(1)
            if os.environ.get("ADB_RUNNER_GONE") or not os.path.exists(f"{{running}}/{{pid}}"):
                print(f"No process found for: {{pid}}")
            else:
                recorded = open(os.environ["ADB_DUMPSYS_OUTPUT"]).read()
                print(re.sub(r"MEMINFO in pid \\d+", f"MEMINFO in pid {{pid}}", recorded))
        finally:
            open(f"{{running}}/{{pid}}.read", "w").close()
    elif command.startswith("sh -c 'for f in /sys/"):  # edgekit's conditions reading
        readings = os.environ["ADB_CONDITIONS"].split(os.pathsep)
        counter = f"{{running}}/conditions-read"
        done = int(open(counter).read()) if os.path.exists(counter) else 0
        open(counter, "w").write(str(done + 1))
        print(open(readings[min(done, len(readings) - 1)]).read())
    elif command.split()[0].endswith("{runner}"):
        me = f"{{running}}/{{os.getpid()}}"
        open(me, "w").close()
        try:
            hold = os.environ.get("ADB_RUNNER_HOLD")
            waited = 0
            while hold and os.path.exists(hold) and waited < 2400:  # a phone still benchmarking
                time.sleep(0.05)
                waited += 1
            if os.environ.get("ADB_RUNNER_FAILS"):
                print("ERROR: could not load model", file=sys.stderr)
                sys.exit(1)
            waited = 0
            while not os.path.exists(me + ".read") and waited < 200:  # outlives one reading
                if sum(name.isdigit() for name in os.listdir(running)) > 1:
                    break  # runs at once (the cluster's tests): edgekit reads none of them
                if waited >= 20 and not os.path.exists(f"{{running}}/watching"):
                    break  # nobody looks for this run (a timed run): it ends as it would
                time.sleep(0.01)
                waited += 1
        finally:
            for path in (me, me + ".read", f"{{running}}/watching"):
                if os.path.exists(path):
                    os.remove(path)
        print(open(os.environ["ADB_RUNNER_OUTPUT"]).read())
"""


def stand_in_adb_env(folder: Path, serial: str = "emulator-5554") -> dict[str, str]:
    """Write the stand-in into ``folder``; the variables a process's environment needs to find
    it: its folder first on this process's PATH, and where it keeps what it was asked."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    adb = bin_dir / "adb"
    adb.write_text(
        STAND_IN_ADB.format(
            python=sys.executable, runner="benchmark_model", tests=str(Path(__file__).parent)
        )
    )
    adb.chmod(adb.stat().st_mode | stat.S_IEXEC)
    runner = folder / "benchmark_model"
    runner.write_text("runner binary")
    devices = folder / "devices.txt"
    devices.write_text(
        f"{serial}          device product:sdk_gphone64_arm64 model:sdk_gphone64 transport_id:1"
    )
    running = folder / "running"
    running.mkdir(exist_ok=True)
    phone = folder / "phone"
    phone.mkdir(exist_ok=True)
    return {
        "ADB_PHONE": str(phone),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "ADB_LOG": str(folder / "adb.log"),
        "ADB_DEVICES": str(devices),
        "ADB_RUNNER_OUTPUT": str(DATA / "benchmark_model.txt"),
        "EDGEKIT_BENCHMARK_MODEL": str(runner),
        "ADB_RUNNER_HOLD": str(folder / "hold"),
        "ADB_RUNNING": str(running),
        "ADB_DUMPSYS_OUTPUT": str(DATA / "dumpsys_meminfo_benchmark_model.txt"),
        "ADB_CONDITIONS": str(DATA / "phone_conditions_cool.txt"),
    }
