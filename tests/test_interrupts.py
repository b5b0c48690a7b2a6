"""Commands as a user's shell or CI runs them (the real ``edgekit`` executable, its supervisor
included): Ctrl-C and SIGTERM stop them within 5 s and leave only complete files, a full disk and
a read-only folder are one line, a crashing or hanging runtime is a failed measurement, and two
runs can write one history at once."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgekit.artifact import load_artifact

EDGEKIT = str(Path(sys.executable).with_name("edgekit"))
TESTS = Path(__file__).parent
QUICK_RUN = ["--min-seconds", "0.2", "--min-runs", "10", "--rounds", "3"]


def _start(args: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    environment = dict(os.environ, PYTHONPATH=str(TESTS), **env)
    return subprocess.Popen(
        [EDGEKIT, *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(process: subprocess.Popen, sig: int, twice: bool = False) -> tuple[int, float, str]:
    started = time.monotonic()
    process.send_signal(sig)
    if twice:
        time.sleep(0.2)
        process.send_signal(sig)
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    return process.returncode, time.monotonic() - started, err


def _only_complete_artifacts(folder: Path) -> list[str]:
    """Every file is an artifact whose manifest matches it, or that manifest; nothing temporary."""
    names = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert not [n for n in names if n.startswith(".") or n.endswith((".partial", ".tmp"))], names
    for name in names:
        if not name.endswith(".json"):
            load_artifact(folder / name)  # digest checked against the manifest
            assert f"{name}.json" in names
    return names


def _own_temp_dirs() -> set[str]:
    return {p.name for p in Path("/tmp").glob("edgekit-*") if p.is_dir()}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_export_stops_within_5_seconds_and_keeps_only_complete_artifacts(tmp_path, sig):
    delay = random.Random(int(sig)).uniform(4.0, 25.0)  # a random point, reproducible
    before = _own_temp_dirs()
    process = _start(["export", "--target", "all", "--recipe", "all", "-o", "out"], tmp_path)
    time.sleep(delay)
    code, seconds, err = _stop(process, sig)
    assert code == 130 and seconds < 5.0, (delay, code, seconds, err[-500:])
    _only_complete_artifacts(tmp_path / "out")
    assert _own_temp_dirs() <= before  # the workers' scratch folders went too


@pytest.mark.slow
def test_a_run_stops_within_5_seconds_and_leaves_no_partial_run(tmp_path):
    delay = random.Random(7).uniform(5.0, 30.0)
    process = _start(
        [
            "run",
            "--targets",
            "onnx,tflite",
            "--recipes",
            "fp32,int8",
            "--devices",
            "cpu",
            "--history",
            str(tmp_path / "h.sqlite"),
            *QUICK_RUN,
        ],
        tmp_path,
    )
    time.sleep(delay)
    code, seconds, err = _stop(process, signal.SIGINT)
    assert code == 130 and seconds < 5.0, (delay, code, seconds, err[-500:])
    runs = tmp_path / "runs"
    leftover = [p.name for p in runs.iterdir()] if runs.exists() else []
    assert not [name for name in leftover if name.startswith(".")], leftover
    for name in leftover:  # a run that finished before the signal is whole
        assert (runs / name / "report.md").is_file()


@pytest.mark.slow
def test_a_second_ctrl_c_kills_at_once(tmp_path):
    process = _start(["export", "--target", "all", "--recipe", "all", "-o", "out"], tmp_path)
    time.sleep(8.0)
    code, seconds, _ = _stop(process, signal.SIGINT, twice=True)
    assert code == 130 and seconds < 2.0
    _only_complete_artifacts(tmp_path / "out")


def _mount(where: Path, options: str) -> None:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()[:80]}): needs root")


def _unmount(where: Path) -> None:
    subprocess.run(["umount", str(where)], capture_output=True)


@pytest.mark.needs_root
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("size=300k", "the export needs about"),
        ("ro,size=1m", "not writable"),
    ],
)
def test_a_full_disk_and_a_read_only_folder_are_one_line(tmp_path, options, message):
    folder = tmp_path / "mounted"
    _mount(folder, options)
    try:
        done = subprocess.run(
            [EDGEKIT, "export", "--target", "onnx", "-o", str(folder / "out")],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr[-500:]
        assert len([ln for ln in done.stderr.splitlines() if "error:" in ln]) == 1
        assert "Traceback" not in done.stderr
        assert not list(folder.rglob("*.onnx*"))
    finally:
        _unmount(folder)


def test_a_library_that_ends_the_process_silently_still_gets_a_line(tmp_path):
    done = subprocess.run(
        [EDGEKIT, "export", "--model", "user_models:exits", "-o", "out"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(TESTS)),
    )
    assert done.returncode == 1
    assert "stopped without a message (exit 1)" in done.stderr


@pytest.mark.parametrize(
    ("crash", "message"),
    [
        ("segfault", "crashed (SIGSEGV)"),
        ("hang", "timed out after 5 s"),
    ],
)
def test_a_runtime_that_crashes_or_hangs_is_a_failed_measurement(
    export_digits, tmp_path, crash, message
):
    path = export_digits("onnx", "fp32").path
    done = subprocess.run(
        [EDGEKIT, "bench", str(path), "--no-baseline", "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, EDGEKIT_TEST_CRASH=crash),
    )
    assert done.returncode == 1, done.stderr[-500:]
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("edgekit: error:")]
    assert len(errors) == 1 and message in errors[0]


@pytest.mark.slow
def test_two_runs_write_one_history_at_once(tmp_path):
    history = tmp_path / "h.sqlite"
    runs = [
        _start(
            [
                "run",
                "--targets",
                "onnx",
                "--recipes",
                "fp32",
                "--devices",
                "cpu",
                "--name",
                f"r{index}",
                "--history",
                str(history),
                *QUICK_RUN,
            ],
            tmp_path,
        )
        for index in range(2)
    ]
    for process in runs:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-1000:]
    listed = subprocess.run(
        [EDGEKIT, "history", "--history", str(history), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sorted(run["name"] for run in json.loads(listed.stdout)) == ["r0", "r1"]
    assert shutil.which(EDGEKIT)
