"""CPU interference: how much CPU other processes (and the hypervisor) took while we measured.

Read from /proc/stat: the busy time of all processes minus our own, and the steal time a
hypervisor reports. A probe here saw another process on the 2 shared cores turn a 1.8 ms median
into 7.7 ms. On a shared VM most interference is invisible to /proc/stat (another tenant's load
on the same physical cores shows up in neither figure), which is why every ratio edgekit reports
is measured interleaved (:mod:`edgekit.interleave`): both sides see the same machine state."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    busy: float  # CPU seconds all processes spent busy since boot
    steal: float  # CPU seconds the hypervisor gave to other guests


def cpu_times() -> CpuTimes | None:
    """Busy and steal seconds since boot (None where /proc/stat is missing)."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    steal = values[7] if len(values) > 7 else 0
    busy = sum(values[:7]) - idle  # user..softirq; steal is not time anything here ran
    return CpuTimes(busy / CLOCK_TICKS, steal / CLOCK_TICKS)


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


@dataclass(frozen=True)
class Reading:
    foreign: float  # cores kept busy by other processes (1.0 = one core)
    steal: float  # cores' worth of time the hypervisor took away


class ForeignCpu:
    """Measure the CPU *other* processes used between ``start()`` and ``stop()``, and the steal
    time, as fractions of the wall time."""

    def start(self) -> None:
        self._times = cpu_times()
        self._own = own_cpu_seconds()
        self._wall = time.perf_counter()

    def stop(self) -> Reading | None:
        times = cpu_times()
        if times is None or self._times is None:
            return None
        wall = max(time.perf_counter() - self._wall, 1e-6)
        foreign = (times.busy - self._times.busy) - (own_cpu_seconds() - self._own)
        steal = times.steal - self._times.steal
        return Reading(max(foreign, 0.0) / wall, max(steal, 0.0) / wall)


def wait_for_quiet(
    threshold: float = 0.15, window_s: float = 0.5, max_wait_s: float = 20.0
) -> Reading | None:
    """Wait until others use less than ``threshold`` of a core over ``window_s``; return the last
    reading (None without /proc/stat). Gives up after ``max_wait_s`` and lets the caller mark it."""
    deadline = time.monotonic() + max_wait_s
    while True:
        guard = ForeignCpu()
        guard.start()
        time.sleep(window_s)
        reading = guard.stop()
        if reading is None or reading.foreign < threshold or time.monotonic() > deadline:
            return reading
