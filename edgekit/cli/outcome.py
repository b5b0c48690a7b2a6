"""What a command was asked for and did not make or measure: one summary line on stderr and the
exit code a CI can trust (docs/troubleshooting.md, "Exit codes"). Every command that works
through several files, recipes or devices ends with ``finish``, after it printed what it made."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError

FAILED, UNAVAILABLE, BAD_INPUT = "failed", "unavailable", "bad input"


class NotAllDone(EdgekitError):
    """Some of what was asked for was not made or not measured; the rest was."""

    exit_code = 1


@dataclass(frozen=True)
class Missing:
    """One requested item that was not made or measured. ``why`` may be empty where the command
    already printed the reason beside its results; ``device`` is where it was asked for."""

    item: str
    why: str = ""
    kind: str = FAILED  # FAILED, UNAVAILABLE (the device refused it) or BAD_INPUT
    device: str | None = None


def finish(
    verb: str,
    missing: list[Missing],
    *,
    asked: int,
    done_on: Iterable[str] = (),
    error: type[EdgekitError] = NotAllDone,
) -> None:
    """Return when nothing is missing. Else raise: exit 2 for a bad file, or for a device that
    measured nothing at all of what was asked of it (``done_on``: the devices that did); exit 1
    otherwise, with ``"<verb> 1 of 2; not <verb>: ITEM (WHY); ..."``."""
    if not missing:
        return
    bad = [m for m in missing if m.kind == BAD_INPUT]
    if bad:
        raise UserInputError(_line(bad[0].why, 300))
    worked = set(done_on)
    absent = [m for m in missing if m.kind == UNAVAILABLE and m.device not in worked]
    if absent:
        raise DeviceUnavailable(f"{absent[0].item}: {_line(absent[0].why, 300)}")
    items = "; ".join(m.item if not m.why else f"{m.item} ({_line(m.why, 160)})" for m in missing)
    raise error(f"{verb} {asked - len(missing)} of {asked}; not {verb}: {items}")


def _line(text: str, limit: int) -> str:
    """The first non-empty line of a reason (runtimes' messages run to pages)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:limit]
