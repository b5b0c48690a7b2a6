"""Sides without a runtime, for the measurement's own logic (the interleaver, tune's search):
a scripted timer whose block medians scatter around a latency, and the noise guard turned off
(these tests are about the logic, not about a quiet machine)."""

from __future__ import annotations

import numpy as np

from edgekit.worker.latency import Block, BlockTimer, NoiseGuard

NO_GUARD = NoiseGuard(enabled=False)


class Scripted(BlockTimer):
    """A side whose block medians scatter around ``ms`` by ``spread`` (seeded); ``closed``
    says whether it was released."""

    def __init__(self, label: str, ms: float, spread: float, seed: int) -> None:
        self.label, self.ms, self.spread, self.warm_ms, self.runtime = label, ms, spread, 1.0, {}
        self._rng = np.random.default_rng(seed)
        self.closed = False

    def block(self, runs: int) -> Block:
        value = self.ms * (1.0 + self._rng.normal(0.0, self.spread))
        return Block([value] * runs, value, value)

    def close(self) -> None:
        self.closed = True
