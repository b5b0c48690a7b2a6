"""``edgekit run --golden``: a golden bundle (``edgekit golden``) of each model's recommended
artifact, written into the run directory as ``golden/<artifact stem>/`` and recorded in
results.json (``run.golden``) so the report links it and ``edgekit report`` links it again. A
bundle that cannot be made (synthetic data, a file with no preprocessing) is recorded with why
in one line; the run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.common.fileio import write_json_atomic
from edgekit.common.progress import Progress
from edgekit.errors import EdgekitError, cause_line, first_line
from edgekit.records import GoldenLink
from edgekit.report import render_report
from edgekit.report.recommend import Recommendation
from edgekit.results import Results, Row
from edgekit.run.config import RunConfig
from edgekit.run.subject import Subject

GOLDEN_DIR = "golden"


def spread_devices(config: RunConfig) -> tuple[str, ...]:
    """The run's own devices that a bundle's tolerance is measured on besides the host: a run
    that measured on the ARM64 guest or a GPU measures its bundles' spread there too."""
    from edgekit.devices import DEFAULT_DEVICE, SPREAD_DEVICES

    return tuple(d for d in config.devices if d != DEFAULT_DEVICE and d in SPREAD_DEVICES)


def add_golden(
    results: Results,
    run_dir: Path,
    models: list[Subject],
    config: RunConfig,
    advice: dict[str, Recommendation],
    say: Progress,
) -> dict[str, Recommendation]:
    """A bundle per model's recommended artifact into ``run_dir``, recorded in its results, and
    the report rendered again to link them; returns the recommendations it holds."""
    results.run["golden"] = {
        model.name: golden_bundle(
            advice[model.name].best if model.name in advice else None,
            run_dir,
            data=model.data,
            spread_on=spread_devices(config),
            say=say,
        )
        for model in models
    }
    write_json_atomic(run_dir / "results.json", results.to_dict())
    return render_report(results, run_dir).recommendations


def golden_bundle(
    best: Row | None,
    run_dir: Path,
    *,
    data: str,
    spread_on: tuple[str, ...],
    say: Progress,
) -> dict[str, Any]:
    """The bundle of the recommended row's artifact, as results.json records it: its folder
    (relative to the run directory) and tolerance, or why none was made."""
    if best is None or not best.artifact:
        return GoldenLink(why="no artifact was recommended").to_dict()
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.golden.make import make_bundle

    relative = Path(best.artifact)
    folder = Path(GOLDEN_DIR) / relative.stem
    say(f"golden vectors of {relative.name}")
    try:
        bundle = make_bundle(
            load_artifact(run_dir / relative),
            run_dir / folder,
            data=data,
            spread_on=spread_on,
            say=lambda line: say(f"golden: {line}"),
        )
    except Exception as exc:  # the run's measurements stand without its bundle: never lost to it
        why = first_line(exc) if isinstance(exc, EdgekitError) else cause_line(exc)
        # the message names the run's hidden folder, gone once the run is renamed into place
        why = why.replace(f"{run_dir.resolve()}/", "").replace(f"{run_dir}/", "")
        return GoldenLink(artifact=best.artifact, why=why).to_dict()
    return GoldenLink(best.artifact, folder.as_posix(), bundle.atol).to_dict()
