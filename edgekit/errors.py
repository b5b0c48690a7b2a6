"""The errors edgekit reports to a user as one line, with the exit code the CLI uses."""

from __future__ import annotations


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


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message (runtimes' errors run to pages), or its type."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:limit]
