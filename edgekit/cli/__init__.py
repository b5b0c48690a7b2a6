"""The ``edgekit`` command line: thin command modules over the Python API.

Every user error is one line on stderr and an exit code that means one thing (0 done, 1 a gate,
a validation or a measurement failed, 2 bad input or a missing device, 130 interrupted);
``--debug`` shows the traceback instead."""

from __future__ import annotations

import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ start-up chatter

import typer

from edgekit.cli import export, machine, measure, qdebug, run, zoo  # noqa: F401
from edgekit.cli.app import app
from edgekit.cli.console import err_console
from edgekit.errors import EdgekitError

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the app, turning edgekit's errors into one line and an exit code."""
    import click

    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv.remove("--debug")
    else:
        warnings.filterwarnings("ignore")
    try:
        code = typer.main.get_command(app).main(standalone_mode=False, prog_name="edgekit")
    except EdgekitError as exc:
        if debug:
            raise
        err_console.print(f"edgekit: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        hint = f" (see 'edgekit {exc.ctx.info_name} --help')" if getattr(exc, "ctx", None) else ""
        if exc.ctx is not None and exc.ctx.parent is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        err_console.print(f"edgekit: error: {exc.format_message()}{hint}", markup=False,
                          highlight=False, soft_wrap=True)  # fmt: skip
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        err_console.print("edgekit: interrupted", markup=False, highlight=False)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
