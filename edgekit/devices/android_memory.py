"""The memory of a runner's process on an Android device, read while it runs: ``adb shell pidof``
finds the process, ``adb shell dumpsys meminfo PID`` reads its proportional and resident set
sizes (TOTAL PSS and TOTAL RSS, kB). Read during a session's first, untimed run only: dumpsys
makes the phone's system_server walk the process's page maps, work that would otherwise run on the
phone beside timed invokes."""

from __future__ import annotations

import contextlib
import itertools
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

from edgekit.errors import DeviceUnavailable, first_line

SOURCE = "dumpsys meminfo"  # what a timer's memory figures are, for edgekit.measure.bench
POLL_S = 0.02  # between two pidof calls while the run has not started (each adb call takes longer)
STOP_S = 60.0  # at most this long for a reading under way when the run has ended
NO_PROCESS = "No process found for"  # what dumpsys prints for a pid that has exited


def parse_pids(output: str) -> list[int]:
    """``pidof NAME``: the pids on one line, separated by spaces (nothing when none runs)."""
    return [int(word) for word in output.split() if word.isdigit()]


def _kb(text: str) -> int:
    return int(text.replace(",", ""))  # some builds group the thousands


def _summary_totals(output: str) -> dict[str, int]:
    """The App Summary's ``TOTAL PSS: n  TOTAL RSS: n  TOTAL SWAP PSS: n`` line (Android 10 on),
    or its older ``TOTAL: n  TOTAL SWAP PSS: n`` (PSS only)."""
    found = {}
    for key, pattern in (
        ("pss_kb", r"TOTAL PSS:\s*([\d,]+)"),
        ("rss_kb", r"TOTAL RSS:\s*([\d,]+)"),
        ("pss_kb", r"^\s*TOTAL:\s*([\d,]+)"),
    ):
        match = re.search(pattern, output, re.M)
        if match and key not in found:
            found[key] = _kb(match.group(1))
    return found


def _columns(lines: list[str]) -> list[str]:
    """The table's column names from its two header lines (``Pss``/``Total`` -> ``Pss Total``)."""
    for upper, lower in itertools.pairwise(lines):
        words, below = upper.split(), lower.split()
        if words[:1] == ["Pss"] and len(words) == len(below):
            return [f"{a} {b}" for a, b in zip(words, below, strict=True)]
    return []


def _table_totals(output: str) -> dict[str, int]:
    """The table's ``TOTAL`` row, read through its header: the columns differ between Android
    releases and between ``-a`` and the default (Rss Total from Android 10, SwapPss or Swap)."""
    lines = output.splitlines()
    row = next((line.split()[1:] for line in lines if line.split()[:1] == ["TOTAL"]), None)
    if not row or not all(re.fullmatch(r"[\d,]+", value) for value in row):
        return {}
    values = dict(zip(_columns(lines), map(_kb, row), strict=False))
    if not values:  # no header read: the first figure is always Pss Total
        return {"pss_kb": _kb(row[0])}
    found = {"pss_kb": values.get("Pss Total"), "rss_kb": values.get("Rss Total")}
    return {key: value for key, value in found.items() if value is not None}


def parse_meminfo(output: str) -> dict[str, int]:
    """``dumpsys meminfo PID``: ``pss_kb`` and, where the release prints it, ``rss_kb``. The App
    Summary's totals first, the table's TOTAL row where a summary lacks them. ValueError with one
    line when it names no total (the process exited, or dumpsys printed an error)."""
    if NO_PROCESS in output:
        line = next(line for line in output.splitlines() if NO_PROCESS in line)
        raise ValueError(f"the process had exited ({line.strip()})")
    totals = {**_table_totals(output), **_summary_totals(output)}
    if "pss_kb" not in totals:
        said = next((line.strip() for line in output.splitlines() if line.strip()), "nothing")
        raise ValueError(f"dumpsys meminfo printed no TOTAL PSS ({said[:120]})")
    return totals


Shell = Callable[[list[str]], str]  # a command on the device -> what it printed


class RunnerMemory:
    """What dumpsys read of a runner's process in one session (a session watches one run, its
    first): its TOTAL PSS and TOTAL RSS, or why it read nothing."""

    def __init__(self, shell: Shell, serial: str, process: str) -> None:
        self.shell, self.serial, self.process = shell, serial, process
        self.reading: dict[str, int] | None = None
        self.failure: str | None = None

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Around one run of the runner (which blocks the caller): a thread reads it meanwhile."""
        ended = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(ended,), daemon=True)
        watcher.start()
        try:
            yield
        finally:
            ended.set()
            watcher.join(STOP_S)

    def _watch(self, ended: threading.Event) -> None:
        """Waits for the runner's process, then reads it once."""
        try:
            while not ended.is_set():
                pids = self._pids()
                if len(pids) > 1:
                    self.failure = (
                        f"several processes named {self.process} on {self.serial} "
                        f"(pids {' '.join(map(str, pids))}): dumpsys cannot tell "
                        "which is this run"
                    )
                    return
                if pids:
                    self._read(pids[0])
                    return
                ended.wait(POLL_S)
        except (DeviceUnavailable, OSError, subprocess.SubprocessError) as exc:
            self.failure = first_line(exc)

    def _pids(self) -> list[int]:
        try:
            return parse_pids(self.shell(["pidof", self.process]))
        except DeviceUnavailable:  # pidof's status is 1 while no such process runs
            return []

    def _read(self, pid: int) -> None:
        try:
            self.reading = parse_meminfo(self.shell(["dumpsys", "meminfo", str(pid)]))
        except (DeviceUnavailable, ValueError) as exc:
            self.failure = first_line(exc)

    def figures(self) -> dict[str, Any]:
        """The session's memory for ``edgekit.measure.memory`` (kB)."""
        reading = self.reading or {}
        return {
            "source": SOURCE,
            "serial": self.serial,
            "process": self.process,
            "readings": 0 if self.reading is None else 1,
            "pss_kb": reading.get("pss_kb"),
            "rss_kb": reading.get("rss_kb"),
            "failure": self.failure,
        }
