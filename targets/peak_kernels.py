"""What a peak kernel is and how it is timed, shared by ``edgekit.measure.peak`` (which collects
and runs them) and each target's ``peak`` module (which makes its runtime's kernels). Stdlib only,
so a target may import it without pulling the cache or the registry in."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

BUDGET_S = 0.15  # timed calls per kernel: at least this long and MIN_CALLS calls
MIN_CALLS = 2
Call = Callable[[], object]


@dataclass(frozen=True)
class Kernel:
    """One GEMM of ``size``^3 that a runtime runs; ``prepare(size, threads)`` gives one call.
    ``package`` is the distribution whose version its speed depends on (in the cache's
    fingerprint: a new runtime version measures the peaks anew)."""

    runtime: str
    op: str
    arithmetic: str
    size: int
    prepare: Callable[[int, int], Call]
    package: str = ""

    @property
    def name(self) -> str:
        return f"{self.runtime} {self.op} {self.size}^3"

    def rate(self, threads: int, budget_s: float = BUDGET_S) -> float:
        """Best GFLOP/s (GOP/s) over repeated calls."""
        return 2 * self.size**3 / best_seconds(self.prepare(self.size, threads), budget_s) / 1e9


def best_seconds(
    call: Call,
    budget_s: float = BUDGET_S,
    min_calls: int = MIN_CALLS,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """The fastest of repeated calls after one warm-up, for at least ``budget_s`` seconds."""
    call()
    best, calls, started = math.inf, 0, clock()
    while calls < min_calls or clock() - started < budget_s:
        start = clock()
        call()
        best = min(best, clock() - start)
        calls += 1
    return best
