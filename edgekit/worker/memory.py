"""A session's memory, phase by phase, in the child that holds it (a timing session, or the probe
of ``mode: memory``): the process's resident memory
before the runtime, with the target's trivial model loaded (the runtime's floor), after loading
the artifact, at its peak while it invokes, sampled over many invokes (a leak is a slope), and
after its session is released. Linux's /proc/self/status gives the resident set (VmRSS) and its
high-water mark (VmHWM), which /proc/self/clear_refs resets, so each phase has its own peak."""

from __future__ import annotations

import gc
import os
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

STATUS = "/proc/self/status"
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
PR_SET_THP_DISABLE = 41  # linux/prctl.h


class Opened(Protocol):
    """A session as ``open_runnable(request)`` opens it: ``invoke(staged)`` runs it once."""

    invoke: Callable[[Any], Any]
    staged: Any

    def close(self) -> None: ...


def _status_kb(field: str) -> int | None:
    try:
        with open(STATUS) as status:
            found = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.M)
    except OSError:
        return None
    return int(found.group(1)) if found else None


def rss_kb() -> int | None:
    return _status_kb("VmRSS")


def peak_kb() -> int | None:
    return _status_kb("VmHWM")


def reset_peak() -> bool:
    """The high-water mark back to the current resident set (False where the kernel refuses)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def hold_pages_small() -> str | None:
    """Transparent huge pages off for this process, where the machine has them ``always``: there
    khugepaged collapses a process's pages into huge ones in the background, and each collapse
    raises the resident set with no invoke behind it. On a 2-core AMD EPYC VM with huge pages
    ``always``, torch.jit's session of the default model grew 1.6 MB over 40 s of invokes while
    its huge pages went from 32 to 137 MB, and 8 kB with them off for the process; a CI run
    flagged the same session as a 46 kB-per-1000 leak. Returns the note to carry, or None."""
    try:
        with open(THP_MODE) as mode:
            always = "[always]" in mode.read()
    except OSError:
        return None
    if not always:
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        return (
            "transparent huge pages are 'always' here and the probe could not turn them off: "
            "khugepaged's background collapses may read as growth"
        )
    return (
        "transparent huge pages are 'always' here: the probe turned them off for its own "
        "process, so khugepaged's background collapses do not read as growth"
    )


def keep_everything(runnable: Opened) -> None:
    """A session that leaks on purpose (``EDGEKIT_TEST_LEAK``): it keeps a copy of every input
    and output, as an app that never frees its results does."""
    import numpy as np

    kept: list[Any] = []
    inner = runnable.invoke

    def leaking(x: object) -> Any:
        result = inner(x)
        kept.append((np.array(x, copy=True), np.array(result, copy=True)))
        return result

    runnable.invoke = leaking


def runtime_floor(
    request: dict[str, Any], open_runnable: Callable[[dict[str, Any]], Opened]
) -> int | None:
    """The resident set (kB) with the runtime imported and its trivial model loaded and invoked
    once, then released (None where the target ships no trivial model)."""
    if not request.get("trivial"):
        return None
    try:
        trivial = open_runnable(
            {
                **request,
                "artifact": request["trivial"],
                "input": None,
                "manifest": request["trivial_manifest"],
                "session_options": {},
            }
        )
        trivial.invoke(trivial.staged)
    except Exception:  # no floor then (the artifact's own session says what is wrong)
        return None
    floor = rss_kb()
    trivial.close()
    del trivial
    gc.collect()
    return floor


class Phases:
    """The figures (kB) of one session, phase by phase, as the child meets them."""

    def __init__(
        self, request: dict[str, Any], open_runnable: Callable[[dict[str, Any]], Opened]
    ) -> None:
        self.figures: dict[str, Any] = {"start_kb": rss_kb()}
        self.figures["floor_kb"] = runtime_floor(request, open_runnable)
        self.figures["startup_peak_kb"] = peak_kb()  # since exec: the imports, the floor
        self.figures["peak_resettable"] = reset_peak()
        self.figures["before_load_kb"] = rss_kb()
        self.samples: list[list[int | None]] = []
        self.invokes = 0

    def loaded(self) -> None:
        """After the session opened: its size, and the load's own peak; the peak restarts."""
        self.figures["loaded_kb"], self.figures["load_peak_kb"] = rss_kb(), peak_kb()
        reset_peak()

    def ran(self, invokes: int) -> None:
        """After ``invokes`` more invokes: one sample of the resident set."""
        self.invokes += invokes
        self.samples.append([self.invokes, rss_kb()])

    def before_release(self) -> None:
        self.figures["invoke_peak_kb"] = peak_kb()

    def released(self) -> dict[str, Any]:
        gc.collect()
        peaks = [self.figures.get(k) for k in ("startup_peak_kb", "load_peak_kb", "invoke_peak_kb")]
        known = [peak for peak in peaks if peak is not None]
        return {
            **self.figures,
            "process_peak_kb": max(known) if known else None,
            "released_kb": rss_kb(),
            "samples": self.samples,
        }


def probe(
    request: dict[str, Any],
    open_runnable: Callable[[dict[str, Any]], Opened],
    reply: Callable[[dict[str, Any]], None],
) -> None:
    """Every phase's figure (kB) in one reply, over as many invokes as fit in
    ``request["seconds"]`` (at most ``invokes``, sampled at ``points`` moments).
    ``open_runnable(request)`` opens a session as the timing children do; ``request["trivial"]``
    names the target's trivial model, if it has one."""
    small_pages = hold_pages_small()
    phases = Phases(request, open_runnable)
    if small_pages:
        phases.figures["note"] = small_pages
    runnable = open_runnable(request)
    phases.loaded()
    if os.environ.get("EDGEKIT_TEST_LEAK"):
        keep_everything(runnable)
    started = time.perf_counter()
    for _ in range(max(1, request["warmup"])):
        runnable.invoke(runnable.staged)
    per_invoke = (time.perf_counter() - started) / max(1, request["warmup"])
    phases.ran(max(1, request["warmup"]))
    count = int(min(request["invokes"], max(request["points"], request["seconds"] / per_invoke)))
    step = max(1, count // request["points"])
    for _ in range(count // step):
        for _ in range(step):
            runnable.invoke(runnable.staged)
        phases.ran(step)
    phases.before_release()
    runnable.close()
    del runnable
    reply({"event": "memory", **phases.released()})
