"""Run the edgekit CLI as a user does, in-process or as the installed command, and read what a
user would see; copy an exported file to hand it a changed one."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# the installed command, as a user's shell finds it
EDGEKIT = str(Path(sys.executable).with_name("edgekit"))


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def _exit_code(args: tuple[str, ...]) -> int:
    """``edgekit ARGS`` through its real entry point; the exit code it ended with."""
    from edgekit.cli import main

    previous = sys.argv
    sys.argv = ["edgekit", *args]
    try:
        main()
        return 0
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        sys.argv = previous


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> CliResult:
    code = _exit_code(args)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def run_cli_captured(*args: str) -> CliResult:
    """The same outside a test (a module fixture has no capsys): what a user would see."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = _exit_code(args)
    return CliResult(code, out.getvalue(), err.getvalue())


def run_edgekit(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """``edgekit ARGS`` as the installed command in a fresh process, as a user's shell runs it:
    in ``cwd``, with ``env`` added to this process's environment."""
    return subprocess.run(
        [EDGEKIT, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
        text=True, timeout=timeout, check=False,
    )  # fmt: skip


def error_lines(stderr: str) -> list[str]:
    """edgekit's own error lines (``edgekit: error: ...``) among what a command wrote to stderr."""
    return [line for line in stderr.splitlines() if line.startswith("edgekit: error:")]


def copy_artifact(source: Path, folder: Path, name: str | None = None) -> Path:
    """An exported file copied into ``folder`` with its manifest (FILE and FILE.json), under
    its own name or ``name``: a file a test may change, or a command write into, without
    touching the session's shared export."""
    from edgekit.artifacts.artifact import manifest_path

    copy = folder / (name or source.name)
    shutil.copy(source, copy)
    shutil.copy(manifest_path(source), manifest_path(copy))
    return copy


# short measurements for tests of plumbing, not figures: `run` (with its evaluation) and the
# scenario scripts' `bench`/`run` calls
QUICK_RUN = ["--min-seconds", "0.2", "--min-runs", "20", "--rounds", "4", "--precision", "off"]
QUICK_BENCH = ["--rounds", "3", "--min-runs", "5", "--min-seconds", "0.05", "--precision", "off"]


def plumbing_config(folder: Path, *lines: str) -> Path:
    """An edgekit.toml whose runs leave the noise guard off and measure two sessions without
    the precision's stopping rule, with ``lines`` added to its [run] table: for runs that test
    plumbing, not figures, so they may run beside other tests (make test's first phase) without
    waiting for a quiet machine or a narrow interval."""
    config = folder / "edgekit.toml"
    plumbing = ["[run]", "noise_guard = false", 'precision = "off"', "sessions = 2"]
    config.write_text("\n".join([*plumbing, *lines]) + "\n")
    return config


def load_script(name: str):
    """A module of scripts/ (not a package), imported from its file under its own name (a
    dataclass of it looks its module up by that name)."""
    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
