"""The ``edgekit`` command line: thin command modules over the Python API.

Every user error is one line on stderr and an exit code that means one thing (0 done, 1 a gate,
a validation or a measurement failed, 2 bad input or a missing device, 130 interrupted);
``--debug`` shows the traceback instead, and ``--verbose`` the libraries' own log lines."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ start-up chatter

import typer

from edgekit.cli import (  # noqa: F401
    audit,
    cluster,
    culprit,
    export,
    golden,
    machine,
    measure,
    profile,
    qdebug,
    run,
    tune,
    zoo,
)
from edgekit.cli.app import app
from edgekit.cli.console import err_console
from edgekit.common.quiet import VERBOSE_ENV
from edgekit.errors import EdgekitError

__all__ = ["app", "commands", "main"]


def commands(groups: bool = False) -> dict[str, Any]:
    """Every command of ``edgekit`` by its path (``"zoo list"``), as click sees it; with
    ``groups``, the groups too (``""`` the app itself, ``"zoo"``). The docs' option tables, the
    bad-input cases and the wheel smoke's ``--help`` calls all walk this one tree."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if groups or not subcommands:
            found[" ".join(path)] = command
        for name, sub in sorted((subcommands or {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def _click_classes(name: str) -> tuple[type, ...]:
    """``name`` from click and from the copy of click typer vendors (typer >= 0.20 raises its
    own), so a bad option value is one line whichever raised it."""
    import importlib

    found = []
    for module in ("click.exceptions", "typer._click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


CLICK_ERRORS = _click_classes("ClickException")
CLICK_ABORTS = _click_classes("Abort")


class _OneLine(logging.Handler):
    """edgekit's warnings (``logging.getLogger("edgekit")``) as one stderr line each."""

    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(
            f"edgekit: warning: {record.getMessage()}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _mark_finished() -> None:
    """Tell the supervisor the command ended by itself (it said what it had to say)."""
    journal = os.environ.get("EDGEKIT_TEMP_JOURNAL")
    if journal:
        with contextlib.suppress(OSError), open(journal, "a") as handle:
            handle.write("#finished\n")


def _finish(code: int) -> None:
    _mark_finished()
    sys.exit(code)


def main() -> None:
    """Entry point: run the app, turning edgekit's errors into one line and an exit code."""
    logger = logging.getLogger("edgekit")
    if not any(isinstance(h, _OneLine) for h in logger.handlers):
        logger.addHandler(_OneLine())
        logger.propagate = False

    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv.remove("--debug")
    if "--verbose" in sys.argv[1:]:  # the libraries' own chatter, unfiltered (children too)
        sys.argv.remove("--verbose")
        os.environ[VERBOSE_ENV] = "1"
    if not debug and os.environ.get(VERBOSE_ENV) != "1":
        warnings.filterwarnings("ignore")
    try:
        code = typer.main.get_command(app).main(standalone_mode=False, prog_name="edgekit")
    except EdgekitError as exc:
        if debug:
            _mark_finished()
            raise
        err_console.print(f"edgekit: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        _finish(exc.exit_code)
    except CLICK_ERRORS as exc:
        context = getattr(exc, "ctx", None)
        path = context.command_path if context is not None else "edgekit"
        err_console.print(
            f"edgekit: error: {exc.format_message()} (see '{path} --help')",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        _finish(exc.exit_code)
    except BrokenPipeError:  # `edgekit ... | head` closed the pipe: what was read is enough
        _quiet_closed_stdout()
        _finish(0)
    except SystemExit as exc:  # rich's answer to a closed pipe is exit 1, with no word
        if isinstance(exc.__context__, BrokenPipeError):
            _quiet_closed_stdout()
            _finish(0)
        raise
    except OSError as exc:  # a full disk, a read-only folder: the system's words and the file
        if debug:
            _mark_finished()
            raise
        where = exc.filename or "edgekit"
        err_console.print(
            f"edgekit: error: {where}: {exc.strerror or exc}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        _finish(2)
    except (*CLICK_ABORTS, KeyboardInterrupt):
        err_console.print("edgekit: interrupted", markup=False, highlight=False)
        _finish(130)
    except Exception as exc:  # a bug: one line, and the traceback with --debug
        if debug:
            _mark_finished()
            raise
        from edgekit.common.pipcheck import missing_runtime
        from edgekit.errors import first_line

        missing = missing_runtime(exc)  # neither onnxruntime extra installed: not a bug
        if missing is not None:
            err_console.print(
                f"edgekit: error: {missing}", markup=False, highlight=False, soft_wrap=True
            )
            _finish(2)
        err_console.print(
            f"edgekit: internal error: {type(exc).__name__}: {first_line(exc)} "
            "(a bug in edgekit; rerun with --debug for the traceback)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        _finish(1)
    try:
        sys.stdout.flush()  # here, not at exit, where a closed pipe would go unexplained
    except BrokenPipeError:
        _quiet_closed_stdout()
    _finish(code if isinstance(code, int) else 0)


def _quiet_closed_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
