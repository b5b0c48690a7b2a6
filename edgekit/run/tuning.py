"""``edgekit run --tune``: between the exports and the device pools, each artifact's fastest
configuration is searched on every tunable device of the run (``edgekit.tune``'s search, an
equal share of ``tune_budget_s`` each). The winners go into the artifacts' manifests, so that
the pools measure the tuned files; the search's own default-against-tuned comparison goes into
results.json (``run["tuning"]``) for the report's two columns."""

from __future__ import annotations

from typing import Any

from edgekit.artifacts.artifact import Artifact
from edgekit.artifacts.runtime_options import tuned_threads
from edgekit.common.progress import Progress
from edgekit.devices import device_class
from edgekit.errors import EdgekitError, first_line
from edgekit.run.config import RunConfig
from edgekit.targets import get_target


def tunable_devices(devices: list[str]) -> list[str]:
    return [name for name in devices if device_class(name).tunable]


def tune_phase(
    config: RunConfig,
    made: dict[str, tuple[list[Artifact], list[Any]]],
    devices: list[str],
    say: Progress,
) -> list[dict[str, Any]]:
    """Tune every exported artifact on each tunable device in ``devices``; ``made`` (model spec
    -> its artifacts and failed rows) is updated in place with the tuned artifacts. A file
    tuned here before (a resumed run's) keeps its options. Returns one record per artifact and
    device: the search's result, or why it failed (the artifact then runs untuned)."""
    from edgekit.tune.api import tune_artifacts

    records: list[dict[str, Any]] = []
    for device in tunable_devices(devices):
        accelerator = device_class(device).accelerator
        wanted = [
            (spec, index, artifact)
            for spec, (artifacts, _) in made.items()
            for index, artifact in enumerate(artifacts)
            if accelerator in get_target(artifact.target).accelerators
            and tuned_threads(artifact.manifest, device) is None
        ]
        share = config.tune_budget_s / max(len(wanted), 1)
        for spec, index, artifact in wanted:
            say(f"tune {artifact.label} on {device}")
            try:
                # a file given as it is has no manifest of edgekit's: tuned in memory only
                [outcome] = tune_artifacts(
                    [artifact],
                    device=device,
                    budget_s=share,
                    guard=config.guard(),
                    timeout_s=config.timeout,
                    write=not artifact.foreign,
                )
            except EdgekitError as exc:
                error = first_line(exc) or type(exc).__name__
                records.append({"label": artifact.label, "device": device, "error": error})
                continue
            made[spec][0][index] = outcome.tuned_artifact
            records.append({"label": artifact.label, "device": device, **outcome.tuned.to_dict()})
    return records
