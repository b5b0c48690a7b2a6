"""The peaks' cache file, ``cache_dir()/peaks/<fingerprint id>.json``: where it lies, its lock,
and reading and writing its entries by thread count (``edgekit.measure.peak.MachinePeaks``
holds them). A damaged or foreign file holds no entries: it is remeasured, never trusted."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edgekit.common.cache import cache_dir
from edgekit.common.fileio import write_json_atomic

SCHEMA = 1


def cache_path(machine: dict[str, Any]) -> Path:
    return cache_dir() / "peaks" / f"{machine['id']}.json"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path``: two commands started together measure once."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the atomic write still keeps the file whole
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held across the yield
    except OSError:  # a read-only cache: nothing is written there either
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def valid_entry(entry: object) -> bool:
    """An entry with an fp32 peak, every peak a positive finite rate and the kernel it came from."""
    peaks = entry.get("peaks") if isinstance(entry, dict) else None
    if not isinstance(peaks, dict) or "fp32" not in peaks:
        return False
    return all(
        isinstance(p, dict)
        and isinstance(p.get("kernel"), str)
        and isinstance(p.get("rate"), (int, float))
        and math.isfinite(p["rate"])
        and p["rate"] > 0
        for p in peaks.values()
    )


def read_entries(path: Path, machine: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The cached entries by thread count; a missing, corrupt or foreign file holds none (it is
    remeasured and rewritten, never trusted, never a crash)."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        return {}
    if (payload.get("fingerprint") or {}).get("id") != machine["id"]:
        return {}
    entries = payload.get("threads")
    if not isinstance(entries, dict):
        return {}
    return {key: entry for key, entry in entries.items() if valid_entry(entry)}


def write_entries(path: Path, machine: dict[str, Any], entries: dict[str, dict[str, Any]]) -> None:
    """The entries with an fp32 peak (one whose measurement failed is used, never cached)."""
    kept = {threads: entry for threads, entry in entries.items() if valid_entry(entry)}
    payload = {"schema": SCHEMA, "fingerprint": machine, "threads": kept}
    with contextlib.suppress(OSError):  # a read-only cache: the peaks still hold for this run
        write_json_atomic(path, payload)
