"""Synthetic sides with known variance components, for checking the latency statistics by
simulation rather than by the machine (the suite's tests/test_intervals.py, and the figure of
docs/concepts.md): a simulated machine drifts from one round to the next (what a shared VM does,
and what interleaving cancels), every side's session lands at its own offset (what reopening
samples), and each block scatters around its session's level."""

from __future__ import annotations

import numpy as np

from edgekit.worker.latency import Block, BlockTimer


class SimulatedMachine:
    """The shared machine: one log offset per round (every side's block of a round sees it),
    and simulated seconds: a block takes ``block_s``, reopening a side ``reopen_s``."""

    def __init__(
        self,
        rng: np.random.Generator,
        sides: int,
        drift_sd: float = 0.3,
        block_s: float = 0.1,
        reopen_s: float = 1.0,
    ) -> None:
        self.rng, self.sides, self.drift_sd = rng, sides, drift_sd
        self.block_s, self.reopen_s = block_s, reopen_s
        self.blocks = 0
        self.offsets: list[float] = []
        self.now = 0.0

    def offset(self) -> float:
        round_index = self.blocks // self.sides
        self.blocks += 1
        self.now += self.block_s
        while len(self.offsets) <= round_index:
            self.offsets.append(float(self.rng.normal(0.0, self.drift_sd)))
        return self.offsets[round_index]

    def clock(self) -> float:
        return self.now


class SimulatedSide(BlockTimer):
    """A side of true latency ``true_ms``: each session lands at a log offset of sd
    ``session_sd``, each block scatters by ``round_sd`` around it, on the shared machine."""

    def __init__(
        self,
        label: str,
        true_ms: float,
        session_sd: float,
        round_sd: float,
        machine: SimulatedMachine,
    ) -> None:
        self.label, self.true_ms, self.warm_ms, self.runtime = label, true_ms, 1.0, {}
        self.session_sd, self.round_sd, self.machine = session_sd, round_sd, machine
        self.session = float(machine.rng.normal(0.0, session_sd))

    def reopen(self) -> BlockTimer:
        self.machine.now += self.machine.reopen_s
        return SimulatedSide(self.label, self.true_ms, self.session_sd, self.round_sd, self.machine)

    def reopen_many(self, count: int) -> list[BlockTimer]:
        return [self.reopen() for _ in range(count)]

    def block(self, runs: int) -> Block:
        drift = self.machine.offset()
        noise = float(self.machine.rng.normal(0.0, self.round_sd))
        value = self.true_ms * float(np.exp(drift + self.session + noise))
        return Block([value] * runs, value, value)


def simulated_pool(
    seed: int,
    true_ms: list[float],
    session_sd: float,
    round_sd: float,
) -> tuple[list[BlockTimer], SimulatedMachine]:
    """Sides of ``true_ms`` on one seeded machine, and the machine (its ``clock``)."""
    machine = SimulatedMachine(np.random.default_rng(seed), len(true_ms))
    sides: list[BlockTimer] = [
        SimulatedSide(f"side {index}", ms, session_sd, round_sd, machine)
        for index, ms in enumerate(true_ms)
    ]
    return sides, machine
