"""The old way of reading a row's records, kept for one release: before 0.3 a result row held
its accuracy, coverage, memory and accuracy-aware loop as JSON objects, and code read
``row.accuracy["drop_ci"]``. Such a read still answers, under a warning naming the field."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from edgekit.errors import MovedPathWarning


class ReadByKey:
    """``record["name"]`` and ``record.get("name")`` for a dataclass record, each warning once
    per call site that the record is read by attribute now (``record.name``)."""

    def __getitem__(self, name: str) -> Any:
        if name not in _names(self):
            raise KeyError(name)
        _warn(self, name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        if name not in _names(self):
            return default
        _warn(self, name)
        return getattr(self, name)


def _names(record: object) -> set[str]:
    return {field.name for field in dataclasses.fields(record)}  # type: ignore[arg-type]


def _warn(record: object, name: str) -> None:
    kind = type(record).__name__
    warnings.warn(
        f"a row's {kind} is a record now: read .{name}, not [{name!r}] or .get({name!r}); the "
        "old reading goes in the next release",
        MovedPathWarning,
        stacklevel=3,
    )
