"""``edgekit tune``: each artifact's fastest runtime configuration, searched interleaved and
tie-aware, written into its manifest for every later session (and for the app's code)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from edgekit.cli.app import app
from edgekit.cli.console import console, err_console
from edgekit.cli.options import ArtifactsArgument, JsonOption, NoiseGuardOption
from edgekit.cli.outcome import Missing, finish
from edgekit.devices import DEFAULT_DEVICE
from edgekit.errors import EdgekitError, UserInputError


@app.command()
def tune(
    artifacts: ArtifactsArgument = None,
    device: Annotated[str, typer.Option("--device", help="where to tune")] = DEFAULT_DEVICE,
    budget_s: Annotated[
        float, typer.Option("--budget-s", help="seconds for the whole search, all files")
    ] = 120.0,
    only: Annotated[
        str | None, typer.Option("--only", help="search these options only, e.g. threads,xnnpack")
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option("--threads", help="fix the thread count (your app's); search the rest at it"),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write/--no-write", help="write the winner into the manifest")
    ] = True,
    noise_guard: NoiseGuardOption = True,
    as_json: JsonOption = False,
) -> None:
    """Search the thread count, then each runtime option, with the candidates interleaved
    against the incumbent; a candidate wins only when its interval lies below 1 (else a tie,
    and the default stays). Writes the winner into the manifest (runtime_options)."""
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.tune.api import knobs_for, tune_artifacts
    from edgekit.worker.latency import NoiseGuard

    if not artifacts:
        raise UserInputError("tune: give one or more artifacts")
    loaded = [load_artifact(path) for path in artifacts]
    foreign = [a.path.name for a in loaded if a.foreign]
    if write and foreign:
        raise UserInputError(
            f"{foreign[0]}: made by another tool, it has no edgekit manifest "
            "to write into; tune --no-write prints the winner"
        )
    names = None if only is None else [name.strip() for name in only.split(",") if name.strip()]
    for artifact in loaded:  # bad input in any file first, before one manifest is written
        knobs_for(artifact, names)
    outcomes, missing = [], []
    for artifact in loaded:  # one file whose runtime crashes: the others are still tuned
        try:
            outcomes += tune_artifacts(
                [artifact],
                device=device,
                budget_s=budget_s / len(loaded),  # the equal share tune_artifacts would give
                only=names,
                threads=threads,
                guard=NoiseGuard(enabled=noise_guard),
                write=write,
                progress=None if as_json else lambda message: err_console.log(message),
            )
        except EdgekitError as exc:
            if isinstance(exc, UserInputError):
                raise
            missing.append(Missing(artifact.path.name, str(exc)))
    if as_json:
        print(
            json.dumps(
                [{"artifact": str(o.artifact.path), **o.tuned.to_dict()} for o in outcomes],
                indent=2,
            )
        )
    else:
        _show(outcomes, device, only)
    finish("tuned", missing, asked=len(loaded))


def _show(outcomes: list, device: str, only: str | None) -> None:
    """Each file's trials, its winner and the code that opens it so in an app."""
    from edgekit.report.tuning import ms_or_dash, ratio_text
    from edgekit.targets import get_target
    from edgekit.tune.search import FINAL_SESSIONS

    for outcome in outcomes:
        tuned = outcome.tuned
        table = Table(title=f"{tuned.label} on {device}: each option against the incumbent")
        for column in ("option", "value", "its time / the incumbent's [95 %]", "verdict"):
            table.add_column(column)
        for trial in tuned.trials:
            verdict = trial.verdict if trial.error is None else f"failed: {trial.error}"
            table.add_row(
                trial.knob, str(trial.value), ratio_text(trial.ratio, trial.interval), verdict
            )
        console.print(table)
        start = "the default" if only is None else "the options it started from"
        if tuned.changed:
            console.print(
                f"best: {tuned.changed}; its time / {start}'s "
                f"{ratio_text(tuned.ratio, tuned.interval)}, p50 "
                f"{ms_or_dash(tuned.default_p50_ms)} -> {ms_or_dash(tuned.best_p50_ms)} "
                "ms"
            )
        elif tuned.rejected is not None:
            winner = tuned.tied
            console.print(
                f"best: {start}; the stages' winner {winner} against it at the end: "
                f"{tuned.final} {ratio_text(tuned.ratio, tuned.interval)}"
            )
        else:
            console.print(f"best: {start} (every other configuration was a tie or slower)")
        p50, interval = tuned.written_p50
        if interval is not None:
            console.print(
                f"p50 of what was chosen: {p50:.3f} ms; another session's p50 should "
                f"fall in [{interval[0]:.3f}, {interval[1]:.3f}] ms (95 %, from "
                f"{FINAL_SESSIONS} sessions)"
            )
        if tuned.untried:
            console.print(f"not tried within --budget-s: {', '.join(tuned.untried)}")
        console.print(f"searched in {tuned.elapsed_s:.0f} s of a {tuned.budget_s:.0f} s share")
        code = get_target(outcome.artifact.target).runtime_code(
            outcome.artifact.path.name, tuned.best
        )
        if code:
            console.print("in your app:", *code, sep="\n  ", soft_wrap=True, markup=False)
        if outcome.written:
            console.print(f"wrote runtime_options into {outcome.artifact.path.name}.json")
