"""CPU interference: how much CPU other processes (and the hypervisor) took while we measured.

Read from /proc/stat: the busy time of all processes minus edgekit's own, and the steal time a
hypervisor reports. edgekit's own is its whole process tree, found by parent links under
/proc from the process that started the command (``EDGEKIT_ROOT_PID``: the supervisor, or the
first process that started a worker): its live progress display, the other sides' idle
sessions and an emulator are edgekit's, never "other processes".

A probe here saw another process on the 2 shared cores turn a 1.8 ms median
into 7.7 ms. On a shared VM most interference is invisible to /proc/stat (another tenant's load
on the same physical cores shows up in neither figure), which is why every ratio edgekit reports
is measured interleaved (``edgekit.measure.interleave``): both sides see the same machine
state."""

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


ROOT_ENV = "EDGEKIT_ROOT_PID"


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
    except OSError:  # gone meanwhile
        return None
    return text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds of ``root`` and every process below it, reaped children included (a
    process's cutime/cstime): what edgekit's own processes used since they started."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    parent, seconds = {}, {}
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 15:
            continue
        parent[int(pid)] = int(fields[1])
        # utime, stime, cutime, cstime (man 5 proc: fields 14-17)
        seconds[int(pid)] = sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
    if root not in parent:
        return None
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += seconds.get(pid, 0.0)
        stack.extend(children.get(pid, ()))
    return total


def edgekit_root() -> int:
    """The process whose tree is edgekit's: the one that started the command, else this one."""
    value = os.environ.get(ROOT_ENV, "")
    return int(value) if value.isdigit() else os.getpid()


@dataclass(frozen=True)
class Reading:
    foreign: float  # cores kept busy by other processes (1.0 = one core)
    steal: float  # cores' worth of time the hypervisor took away
    edgekit: float = 0.0  # cores kept busy by edgekit's other processes (not counted above)


class ForeignCpu:
    """Measure the CPU *other* processes used between ``start()`` and ``stop()``, and the steal
    time, as fractions of the wall time."""

    def __init__(self, root: int | None = None) -> None:
        self.root = root if root is not None else edgekit_root()

    def _edgekit_seconds(self) -> float | None:
        return tree_cpu_seconds(self.root)

    def start(self) -> None:
        self._times = cpu_times()
        self._own = own_cpu_seconds()
        self._tree = self._edgekit_seconds()
        self._wall = time.perf_counter()

    def stop(self) -> Reading | None:
        times = cpu_times()
        if times is None or self._times is None:
            return None
        wall = max(time.perf_counter() - self._wall, 1e-6)
        own = own_cpu_seconds() - self._own
        tree = self._edgekit_seconds()
        # the whole tree where it can be read at both ends (this process is in it), else ours
        ours = tree - self._tree if tree is not None and self._tree is not None else own
        foreign = (times.busy - self._times.busy) - max(ours, own)
        steal = times.steal - self._times.steal
        others_of_ours = max(ours - own, 0.0)
        return Reading(max(foreign, 0.0) / wall, max(steal, 0.0) / wall, others_of_ours / wall)


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
