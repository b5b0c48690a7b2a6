"""``edgekit profile``: per-layer time of artifacts, the runtimes side by side, and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from edgekit.cli.app import app
from edgekit.cli.console import console, err_console
from edgekit.cli.options import (
    ArtifactsArgument,
    ForeignOptions,
    JsonOption,
    resolve_artifacts,
    with_foreign_options,
)
from edgekit.cli.outcome import Missing, finish
from edgekit.errors import UserInputError


@app.command()
@with_foreign_options
def profile(
    artifacts: ArtifactsArgument = None,
    threads: Annotated[int, typer.Option("--threads")] = 1,
    runs: Annotated[int, typer.Option("--runs", help="profiled invokes per artifact")] = 50,
    rounds: Annotated[int, typer.Option("--rounds", help="interleaved rounds for the p50")] = 10,
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of per-layer time")] = None,
    as_json: JsonOption = False,
    foreign: ForeignOptions = None,
) -> None:
    """Time of each layer of each artifact, named by the source's module paths, with the
    runtime's own profiler; the whole-model p50 interleaved; why int8/fp16 (does not) pay."""
    from edgekit.analysis.profile import profile_artifacts
    from edgekit.worker.latency import LatencyProtocol

    if not artifacts:
        raise UserInputError("profile: give one or more artifacts")
    if runs < 1 or threads < 1 or rounds < 2:
        raise UserInputError("profile: --runs and --threads must be >= 1, --rounds >= 2")
    profiles = profile_artifacts(
        resolve_artifacts(artifacts, foreign),
        threads,
        runs,
        protocol=LatencyProtocol(rounds=rounds, precision=None),  # the layers, not a decision
        progress=None if as_json else lambda m: err_console.log(m),
    )
    if plot is not None:
        from edgekit.report.plots import layer_plot

        layer_plot([p.to_dict() for p in profiles], plot)
    if as_json:
        print(json.dumps([p.to_dict() for p in profiles], indent=2))
    else:
        show(profiles)
        if plot is not None:
            console.print(f"wrote {plot}")
    finish("profiled", [m for p in profiles if (m := _missing(p))], asked=len(profiles))


def _missing(profile: object) -> Missing | None:
    """A file with no whole-model time, or one the runtime's profiler could not run."""
    untimed = next((note for note in profile.notes if note.startswith("not timed: ")), None)
    if profile.total_ms is None:
        why = untimed or "not timed"
    elif profile.method.startswith("not profiled: "):
        why = profile.method
    else:
        return None
    return Missing(Path(profile.artifact).name, why)


def show(profiles: list) -> None:
    """The most expensive layers, one column per artifact, then each artifact's summary."""
    from edgekit.records import SCALING
    from edgekit.report.profiles import layer_table

    layers = layer_table([p.to_dict() for p in profiles])
    table = Table(*layers.columns, title=f"the {len(layers.rows)} most expensive layers")
    for row in layers.rows:
        table.add_row(*[cell or "-" for cell in row])
    console.print(table)
    if any(p.total_ms for p in profiles):
        console.print(
            f"ms: {SCALING}; shares add up to 100 % per artifact", soft_wrap=True, highlight=False
        )
    for p in profiles:
        coverage = "" if p.coverage is None else f", {100 * p.coverage:.0f} % of"
        console.print(
            f"[bold]{p.label}[/] ({Path(p.artifact).name}): the profiler's op times summed to "
            f"{p.ops_ms:.3f} ms{coverage} the whole-model p50 "
            f"{p.total_ms or float('nan'):.3f} ms; {p.method}",
            soft_wrap=True,
            highlight=False,
        )
        for line in p.explanation:
            console.print(f"  - {line}", soft_wrap=True, highlight=False)
        for note in p.notes:
            console.print(f"  [dim]note: {note}[/]", soft_wrap=True, highlight=False)
