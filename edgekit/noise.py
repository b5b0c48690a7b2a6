"""The noise guard: how much CPU other processes used while we measured, from /proc/stat.

A probe here saw another process on the 2 shared cores turn a 1.8 ms median into 7.7 ms, so each
timed loop records the CPU time others used during it, measurements wait for a quiet machine,
and a disturbed one is retried, then marked."""

from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def busy_seconds() -> float | None:
    """CPU seconds all processes spent busy since boot (None where /proc/stat is missing)."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / CLOCK_TICKS


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class ForeignCpu:
    """Measure the CPU seconds *other* processes used between ``start()`` and ``stop()``,
    as a fraction of the wall time (1.0 = one core kept busy by someone else)."""

    def start(self) -> None:
        self._busy = busy_seconds()
        self._own = own_cpu_seconds()
        self._wall = time.perf_counter()

    def stop(self) -> float | None:
        busy = busy_seconds()
        if busy is None or self._busy is None:
            return None
        wall = max(time.perf_counter() - self._wall, 1e-6)
        foreign = (busy - self._busy) - (own_cpu_seconds() - self._own)
        return max(foreign, 0.0) / wall


def wait_for_quiet(
    threshold: float = 0.15, window_s: float = 0.5, max_wait_s: float = 20.0
) -> float | None:
    """Wait until others use less than ``threshold`` of a core over ``window_s``; return the last
    reading (None without /proc/stat). Gives up after ``max_wait_s`` and lets the caller mark it."""
    deadline = time.monotonic() + max_wait_s
    reading = None
    while True:
        guard = ForeignCpu()
        guard.start()
        time.sleep(window_s)
        reading = guard.stop()
        if reading is None or reading < threshold or time.monotonic() > deadline:
            return reading
