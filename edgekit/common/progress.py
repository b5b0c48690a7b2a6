"""``Progress``: the callable every long stage reports its steps to (one line each); the CLI
prints them, a test collects them, and Python callers may pass None for silence."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


def silent(message: str) -> None:
    """A Progress that says nothing (the default where a caller passes None)."""
