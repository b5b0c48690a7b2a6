"""The two consoles every command prints to: results on stdout, progress and warnings on stderr.
Piped output (CI logs, files) gets wide tables instead of rich's 80-column default."""

from __future__ import annotations

import sys

from rich.console import Console

console = Console() if sys.stdout.isatty() else Console(width=180)
err_console = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=180)


def warn(message: str) -> None:
    err_console.print(f"[bold yellow]warning[/] {message}", soft_wrap=True, highlight=False)
