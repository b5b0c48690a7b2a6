"""The errors edgekit reports to a user as one line, with the exit code the CLI uses."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Callable
from typing import Any


class EdgekitError(Exception):
    """An error with a one-line message meant for the user; ``exit_code`` is the CLI's."""

    exit_code = 2


class UserInputError(EdgekitError):
    """Bad input: a missing file, a model that does not load, a dataset that does not fit."""

    exit_code = 2


class ExportRejected(EdgekitError):
    """The artifact was made but failed validation against the source model."""

    exit_code = 1


class GateFailed(EdgekitError):
    """A regression gate (accuracy drop, agreement, latency) did not hold."""

    exit_code = 1


class DeviceUnavailable(EdgekitError):
    """The requested device (GPU delegate, adb device, emulated device) is not usable here."""

    exit_code = 2


class UnsupportedExport(EdgekitError):
    """A target cannot export this model with this recipe (an operator, a recipe, a framework)."""

    exit_code = 1


def converter_failed(label: str, kind: str, line: str) -> UnsupportedExport:
    """A converter's own exception in its words (not "a bug in edgekit"), raised alike by an
    export in process and by one whose conversion ran in a child (edgekit.export.bounded)."""
    return UnsupportedExport(f"{label}: the converter failed ({kind}: {line})")


class MovedPathWarning(DeprecationWarning):
    """An import through a module path from before the tree's move (0.3): it works for one
    release; the warning names the new path."""


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message (runtimes' errors run to pages), or its type."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:limit]


def cause_line(error: BaseException, limit: int = 300) -> str:
    """``Type: first line`` of an error, and ``<- Type: first line`` of its innermost cause when
    a library wrapped it (exporters and compiler passes hide the construct that failed under
    their own message, and their texts run to pages)."""
    root, depth = error, 0
    while depth < 8 and (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
        depth += 1

    def line(one: BaseException) -> str:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(one)).strip()  # colour codes of rich tracebacks
        first = next((part for part in text.splitlines() if part.strip()), "")
        return f"{type(one).__name__}: {first[:limit]}"

    return line(error) if root is error else f"{line(error)} <- {line(root)}"


def renamed(module: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` that still gives each old name of ``names`` (old -> new) for
    one release, under a MovedPathWarning naming the new one: ``__getattr__ = renamed(__name__,
    {"measure": "measure_interleaved"})``."""

    def old_name(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(f"{module}.{name} is now {names[name]}; the old name goes in the next "
                      "release", MovedPathWarning, stacklevel=2)  # fmt: skip
        return getattr(sys.modules[module], names[name])

    return old_name
