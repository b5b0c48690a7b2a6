"""The timed loop every measurement runs, host worker and emulated guest alike: numpy and time
only, so the arm64 guest runs this very file."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

Staged = TypeVar("Staged")  # what a session's invoke takes, staged outside the timed region


def warm_up(
    invoke: Callable[[Staged], object],
    staged: Staged,
    runs: int,
    sync: Callable[[], object] | None = None,
) -> float:
    """``runs`` untimed invokes; returns the mean ms per invoke (sizes the interleaved blocks)."""
    started = time.perf_counter()
    for _ in range(max(runs, 1)):
        invoke(staged)
    if sync:
        sync()
    return (time.perf_counter() - started) * 1e3 / max(runs, 1)


def timed_block(
    invoke: Callable[[Staged], object],
    staged: Staged,
    runs: int,
    sync: Callable[[], object] | None = None,
) -> list[float]:
    """Time ``runs`` single invokes (ms each); ``sync`` waits for a device (CUDA) to finish."""
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        begin = clock()
        invoke(staged)
        if sync:
            sync()
        samples.append((clock() - begin) / 1e6)
    return samples


def first_invoke_ms(
    invoke: Callable[[Staged], object], staged: Staged, sync: Callable[[], object] | None = None
) -> float:
    begin = time.perf_counter()
    invoke(staged)
    if sync:
        sync()
    return (time.perf_counter() - begin) * 1e3


def crash_for_test(kind: str | None, moment: str) -> None:
    """Lets the tests prove isolation: ``segfault`` or ``hang`` when the child starts,
    ``segfault-in-block`` / ``hang-in-block`` in the first timed block (``EDGEKIT_TEST_CRASH``)."""
    if not kind or kind.endswith("-in-block") != (moment == "block"):
        return
    if kind.startswith("segfault"):
        import ctypes

        ctypes.string_at(0)
    if kind.startswith("hang"):
        time.sleep(3600)
