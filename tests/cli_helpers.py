"""Run the edgekit CLI in-process and capture what a user would see."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> CliResult:
    from edgekit.cli import main

    previous = sys.argv
    sys.argv = ["edgekit", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = previous
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)
