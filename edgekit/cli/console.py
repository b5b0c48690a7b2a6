"""The two consoles every command prints to: results on stdout, progress and warnings on stderr.
Piped output (CI logs, files) gets wide tables instead of rich's 80-column default. Progress
lines (`err_console.log`) carry the time but not the source location rich adds by default: a
`run.py:137` at the end of every line means nothing to a user."""

from __future__ import annotations

import sys

from rich.console import Console

console = Console() if sys.stdout.isatty() else Console(width=180)
err_console = (
    Console(stderr=True, log_path=False)
    if sys.stderr.isatty()
    else Console(stderr=True, width=180, log_path=False)
)


def warn(message: str) -> None:
    err_console.print(f"[bold yellow]warning[/] {message}", soft_wrap=True, highlight=False)
