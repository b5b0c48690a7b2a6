"""Run the edgekit CLI in-process and capture what a user would see."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


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
