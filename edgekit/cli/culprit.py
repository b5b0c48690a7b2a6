"""``edgekit culprit``: which block of a model makes a target fail, and a repro for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from edgekit.cli.app import app
from edgekit.cli.console import console, err_console
from edgekit.cli.options import (
    DataOption,
    JsonOption,
    ModelOption,
    ShapeOption,
    WeightsOption,
    choices,
    parse_shape,
)
from edgekit.errors import GateFailed
from edgekit.targets import DEFAULT_TARGET, TARGET_MODULES, target_names

TimeoutOption = Annotated[
    float,
    typer.Option("--timeout", help="seconds one block's conversion may take before it is a hang"),
]


def _tried_line(tried: Any) -> None:
    outcome = tried.outcome
    verdict = "ok" if outcome.failure is None else outcome.failure
    err_console.print(
        f"  {tried.path or '<model>'} ({tried.kind}): {verdict} [{outcome.seconds:g} s]",
        highlight=False,
        soft_wrap=True,
    )


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory where it lies below it."""
    try:
        return path.relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def search_and_show(
    source: Any, data: str, target: str, recipe: str, output: Path, timeout_s: float, as_json: bool
) -> Any:
    """Search and print the verdict; what ``culprit`` and ``export --culprit`` share."""
    from edgekit.culprit.find import find_culprit

    err_console.print(f"culprit: {source.name} through {target}/{recipe}, block by block")
    report = find_culprit(
        source, data, target, recipe, output=output, timeout_s=timeout_s, on_try=_tried_line
    )
    whole = report.search.whole
    if as_json:
        passed = {"model": source.spec, "target": target, "recipe": recipe, "failure": None}
        print(json.dumps(report.record or passed, indent=2))
    if not report.failed:
        if whole.degenerate:
            console.print(
                f"{source.name}: {target}/{recipe} converts, but the source itself is "
                f"degenerate: its outputs are all equal or near zero (max |x| "
                f"{whole.verdict.get('max_abs', 0):.2g}), so no comparison can fail"
            )
        else:
            console.print(
                f"{source.name}: {target}/{recipe} exports, loads and matches torch "
                f"(SQNR {whole.verdict.get('sqnr_db', float('nan')):.1f} dB over "
                f"{whole.verdict.get('inputs', 0)} inputs): nothing to find"
            )
        return report
    culprit = report.search.culprit
    outcome = culprit.outcome
    if not as_json:
        console.print(
            f"culprit: {culprit.path or '<model>'} ({culprit.kind})\n"
            f"  failure: {outcome.failure} (at {outcome.stage})\n"
            f"  op: {outcome.op or 'not named by the error'}\n"
            f"  error: {outcome.message}\n"
            f"  chain: {' > '.join(p or '<model>' for p in report.search.chain)}\n"
            f"  repro: python {_shown(report.folder / 'repro.py')} (belongs to {report.upstream})",
            highlight=False,
            soft_wrap=True,
        )
        if "weakest" in report.record:
            from edgekit.culprit.repro import builds_up_line

            console.print(
                f"  {builds_up_line(report.record['weakest'])}", highlight=False, soft_wrap=True
            )
    return report


@app.command()
def culprit(
    target: Annotated[
        str, typer.Option("--target", "-t", help=choices(target_names, TARGET_MODULES))
    ] = DEFAULT_TARGET,
    recipe: Annotated[str, typer.Option("--recipe", "-r", help="fp32 or int8")] = "fp32",
    model: ModelOption = "digits-mobilenet",
    data: DataOption = "digits",
    weights: WeightsOption = None,
    input_shape: ShapeOption = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="where the repro folder is written")
    ] = Path("edgekit-culprit"),
    timeout: TimeoutOption = 300.0,
    as_json: JsonOption = False,
) -> None:
    """Find the smallest block of a torch model that fails TARGET/RECIPE the way the whole
    model does (export, convert, load, crash, hang or mismatch), and write a repro folder for
    it. Exit 0 when the model converts, 1 when it fails, 2 for bad input."""
    from edgekit.errors import UserInputError
    from edgekit.sources.data import load_dataset
    from edgekit.sources.load import load_model
    from edgekit.targets import get_target

    if timeout <= 0:
        raise UserInputError(f"--timeout {timeout:g}: give a positive number of seconds")
    from edgekit.culprit.find import RECIPES

    get_target(target)  # an unknown target: one line, before the model loads
    if recipe not in RECIPES:
        raise UserInputError(f"--recipe {recipe}: culprit converts {' or '.join(RECIPES)}")
    source = load_model(model, weights=weights, input_shape=parse_shape(input_shape), data=data)
    load_dataset(data, source.preprocess)  # bad data: one line here, not in the worker
    report = search_and_show(source, data, target, recipe, output, timeout, as_json)
    if report.failed:
        found = report.search.culprit
        raise GateFailed(
            f"{target}/{recipe} fails ({found.outcome.failure}) in {found.path or '<model>'} "
            f"({found.kind})"
        )
