"""``tune_artifacts``: each artifact's fastest configuration on a host device (the search in
``edgekit.tune.search``), written into its manifest as ``runtime_options`` with a ``tuned``
record, so that later sessions of that device open it so."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from edgekit.artifacts.artifact import Artifact, manifest_path
from edgekit.artifacts.runtime_options import tuned_options, tuned_threads, without_tuning
from edgekit.common.fileio import write_json_atomic
from edgekit.common.machine import cpu_model
from edgekit.devices import DEFAULT_DEVICE, as_device, device_class, device_names
from edgekit.errors import UserInputError
from edgekit.targets import get_target
from edgekit.targets.knobs import Knob, defaults
from edgekit.targets.manifest import Manifest
from edgekit.tune.search import Tuned, search, stages
from edgekit.worker.latency import BlockTimer, LatencyProtocol, NoiseGuard

# short rounds: a stage compares a handful of sessions, and the budget is the user's
TUNE_PROTOCOL = LatencyProtocol(
    warmup=5, min_runs=20, min_seconds=0.3, rounds=8, block_seconds=0.05
)


@dataclass
class TuneOutcome:
    artifact: Artifact
    tuned: Tuned
    written: bool
    manifest: Manifest  # the artifact's manifest with the winner: what was (or would be) written

    @property
    def tuned_artifact(self) -> Artifact:
        """The file as later sessions on the tuned device open it."""
        return Artifact(self.artifact.path, self.manifest)


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def knobs_for(artifact: Artifact, only: list[str] | None) -> list[Knob]:
    """The stages for ``artifact``: threads, then its target's knobs (``only`` some of them;
    a name no stage has is bad input)."""
    every = stages(get_target(artifact.target).tuning_knobs, usable_cores())
    if only is None:
        return every
    known = {knob.name for knob in every}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise UserInputError(
            f"{artifact.path.name}: unknown option(s) {', '.join(unknown)} for "
            f"{artifact.target} (known: {', '.join(sorted(known))})"
        )
    return [knob for knob in every if knob.name in only]


def tune_artifacts(
    artifacts: list[Artifact],
    *,
    device: str = DEFAULT_DEVICE,
    budget_s: float = 120.0,
    only: list[str] | None = None,
    threads: int | None = None,
    protocol: LatencyProtocol = TUNE_PROTOCOL,
    guard: NoiseGuard | None = None,
    timeout_s: float = 120.0,
    write: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[TuneOutcome]:
    """Search each artifact within an equal share of ``budget_s``; write each winner into its
    manifest (``write``). ``threads``: the thread count is fixed (the app's), and only the
    runtime's options are searched at it."""
    if budget_s <= 0:
        raise UserInputError(f"--budget-s must be > 0 seconds, got {budget_s}")
    if threads is not None and not 1 <= threads <= 256:
        raise UserInputError(f"--threads must be 1 to 256, got {threads}")
    if threads is not None and only is not None and "threads" in only:
        raise UserInputError("--threads fixes the thread count; leave threads out of --only")
    where = as_device(device)
    if not where.tunable:
        tunable = [name for name in device_names() if device_class(name).tunable]
        raise UserInputError(
            f"--device {device}: tune runs on {', '.join(tunable)} in this edgekit"
        )
    fixed = set() if threads is None else {"threads"}  # a fixed count is no stage
    plans = [(artifact, [k for k in knobs_for(artifact, only) if k.name not in fixed])
             for artifact in artifacts]  # fmt: skip  # bad input first
    outcomes = []
    for artifact, knobs in plans:
        untuned = Artifact(artifact.path, without_tuning(artifact.manifest))
        default = {"threads": 1, **defaults(get_target(artifact.target).tuning_knobs)}
        if only is not None:  # the rest as tuned here before: --only refines, keeps the others
            default |= tuned_options(artifact.manifest, device)
            default["threads"] = tuned_threads(artifact.manifest, device) or 1
        if threads is not None:
            default["threads"] = threads

        def open_timer(options: dict[str, Any], untuned: Artifact = untuned) -> BlockTimer:
            return where.timer(
                _configured(untuned, options, device), options["threads"], None, protocol, timeout_s
            )

        tuned = search(
            artifact.label,
            default,
            knobs,
            open_timer,
            protocol=protocol,
            guard=guard or NoiseGuard(),
            budget_s=budget_s / len(plans),
            progress=progress,
        )
        manifest = tuned_manifest(artifact, tuned, device)
        if write:
            write_json_atomic(manifest_path(artifact.path), manifest.to_dict())
        outcomes.append(TuneOutcome(artifact, tuned, write, manifest))
    return outcomes


def _configured(artifact: Artifact, options: dict[str, Any], device: str) -> Artifact:
    """``artifact`` whose manifest carries ``options`` as tuned for ``device``: the session
    opens it as a tuned file is opened later."""
    tuned = {"device": device, "cpu_model": cpu_model()}
    manifest = artifact.manifest.replace(runtime_options=options, tuned=tuned)
    return Artifact(artifact.path, manifest)


def tuned_manifest(artifact: Artifact, tuned: Tuned, device: str) -> Manifest:
    """``artifact``'s manifest with the search's winner as its runtime options for ``device``
    and the ``tuned`` record of how it won (what ``tune`` writes)."""
    record = {
        "device": device,
        "cpu_model": cpu_model(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "started_from": tuned.default,
        # the stages' winner against the start: kept when "faster", else in "rejected"
        "final": tuned.final,
        "ratio": tuned.ratio,
        "interval": tuned.interval,
        "start_p50_ms": tuned.default_p50_ms,
        "winner_p50_ms": tuned.best_p50_ms,
        "rejected": tuned.rejected,
        "untried": tuned.untried,
        # what a later session of the written options should measure: its p50 and where
        # another session's p50 should fall (bench says whether it did)
        "p50_ms": tuned.written_p50[0],
        "p50_interval_ms": tuned.written_p50[1],
    }
    return without_tuning(artifact.manifest).replace(runtime_options=tuned.best, tuned=record)
