"""What runs a run's cells (``Executor``): every export and every device pool of a run, in this
process (``LocalExecutor``), as Ray tasks on a cluster (``edgekit.cluster.executor``), or only
the missing ones of a resumed run (``edgekit.run.resume``). ``run_matrix`` talks to an executor
through this contract alone, so a new way of running cells is one class that meets it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from edgekit.artifacts.artifact import Artifact
from edgekit.common.progress import Progress
from edgekit.results import Row
from edgekit.run.cells import PoolResult, device_pool, export_all
from edgekit.run.config import RunConfig
from edgekit.run.subject import Subject

# one model's exports: the artifacts made, and the rows of those that were not
Exported = tuple[list[Artifact], list[Row]]
# one model's export job: the run's settings for that model, and the model
ExportJob = tuple[RunConfig, Subject]


class Executor(Protocol):
    """The contract ``run_matrix`` calls."""

    # run --tune searches on this machine's CPU before the pools: only where the pools run here
    tunes_here: bool
    # each export's own time and where it ran (``run["phases"]["exports"]``)
    timings: list[dict[str, Any]]

    def export_many(self, jobs: list[ExportJob], out_dir: Path, say: Progress) -> list[Exported]:
        """Every model's exports, in the order of ``jobs`` (a cluster runs them at once)."""
        ...

    def device_pools(
        self, config: RunConfig, subject: Subject, exported: list[Artifact], say: Progress
    ) -> list[PoolResult]:
        """One pool per device of ``config``: the artifacts evaluated and timed there."""
        ...

    def absent_devices(self, devices: list[str]) -> dict[str, str]:
        """The devices that cannot run anything here at all, with why (skipped before any
        cell; a cluster has none: a device may hang off any node)."""
        ...


class LocalExecutor:
    """Every cell in this process, one after the other (the default)."""

    tunes_here = True

    def __init__(self) -> None:
        self.timings: list[dict[str, Any]] = []

    def export_many(self, jobs: list[ExportJob], out_dir: Path, say: Progress) -> list[Exported]:
        return [
            export_all(config, subject.source, subject.dataset, out_dir, say, self.timings)
            for config, subject in jobs
        ]

    def device_pools(
        self, config: RunConfig, subject: Subject, exported: list[Artifact], say: Progress
    ) -> list[PoolResult]:
        # one forward pass of the source per run, not per device: SourceModel.predict's memo
        return [
            device_pool(config, device, exported, subject.source, subject.dataset, say)
            for device in config.devices
        ]

    def absent_devices(self, devices: list[str]) -> dict[str, str]:
        from edgekit.devices import get_device

        found = {name: get_device(name).absent() for name in devices}
        return {name: why for name, why in found.items() if why}
