"""``edgekit export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from edgekit.cli import views
from edgekit.cli.app import app
from edgekit.cli.options import (
    IO_HELP,
    DataOption,
    ForeignOptions,
    JsonOption,
    ModelOption,
    NoiseGuardOption,
    ShapeOption,
    WeightsOption,
    choices,
    parse_csv,
    parse_shape,
    with_foreign_options,
)
from edgekit.errors import UserInputError
from edgekit.targets import DEFAULT_TARGET, TARGET_MODULES, target_names


def chosen_recipes(recipe: str | None, int8: bool, fp16: bool, int8_dynamic: bool) -> list:
    from edgekit.quantize.recipes import parse_recipes

    chosen = [
        name
        for name, flag in (("int8", int8), ("fp16", fp16), ("int8-dynamic", int8_dynamic))
        if flag
    ]
    if recipe is not None:
        chosen.append(recipe)
    if len(chosen) > 1:
        raise UserInputError(f"choose one recipe, got {', '.join(chosen)}")
    return parse_recipes(chosen[0] if chosen else "fp32")


@app.command()
@with_foreign_options
def export(
    target: Annotated[
        str,
        typer.Option("--target", "-t", help=choices(target_names, TARGET_MODULES) + ", or all"),
    ] = DEFAULT_TARGET,
    recipe: Annotated[
        str | None,
        typer.Option("--recipe", "-r", help="fp32, fp16, int8, int8-dynamic, or all"),
    ] = None,
    int8: Annotated[bool, typer.Option("--int8", help="short for --recipe int8")] = False,
    fp16: Annotated[bool, typer.Option("--fp16", help="short for --recipe fp16")] = False,
    int8_dynamic: Annotated[
        bool, typer.Option("--int8-dynamic", help="short for --recipe int8-dynamic")
    ] = False,
    model: ModelOption = "digits-mobilenet",
    data: DataOption = "digits",
    weights: WeightsOption = None,
    input_shape: ShapeOption = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="output directory")] = Path(
        "edgekit-artifacts"
    ),
    calibration_samples: Annotated[int, typer.Option("--calibration-samples")] = 200,
    io: Annotated[
        str, typer.Option("--io", help=IO_HELP + "; int8 makes a full-integer tflite")
    ] = "float",
    keep_float: Annotated[
        str | None,
        typer.Option("--keep-float", help="torch module paths to keep float: block6.project,head"),
    ] = None,
    max_drop: Annotated[
        float | None,
        typer.Option(
            "--max-drop", help="int8: keep the most harmful layers float until the drop <= POINTS"
        ),
    ] = None,
    max_steps: Annotated[
        int, typer.Option("--max-steps", help="float islands --max-drop may add")
    ] = 4,
    point_estimate: Annotated[
        bool, typer.Option("--point-estimate", help="--max-drop on the drop, not its upper bound")
    ] = False,
    noise_guard: NoiseGuardOption = True,  # --max-drop's steps
    culprit: Annotated[
        bool,
        typer.Option(
            "--culprit", help="for each cell that fails, find the block that makes it fail"
        ),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="run each conversion in a child process and end it after SECONDS: a hang or "
            "crash is refused in one line and the other cells go on",
        ),
    ] = None,
    as_json: JsonOption = False,
    foreign: ForeignOptions = None,
) -> None:
    """Export (and quantize) a model, validate it against the source, write artifact + manifest.
    An .onnx model is described by --layout, --mean, --std... (see eval)."""
    from edgekit.errors import ExportRejected, UnsupportedExport
    from edgekit.export.pipeline import export_artifact
    from edgekit.sources.data import load_dataset
    from edgekit.sources.load import load_model
    from edgekit.targets import parse_targets

    if timeout is not None and timeout <= 0:
        raise UserInputError(f"--timeout {timeout:g}: give a positive number of seconds")
    recipes = chosen_recipes(recipe, int8, fp16, int8_dynamic)
    targets = parse_targets(target)
    source = load_model(
        model, weights=weights, input_shape=parse_shape(input_shape), foreign=foreign, data=data
    )
    dataset = load_dataset(data, source.preprocess)
    keep = tuple(parse_csv(keep_float or ""))
    if max_drop is not None:
        if [spec.name for spec in recipes] != ["int8"]:
            raise UserInputError("--max-drop needs --int8")
        if keep:
            raise UserInputError("--max-drop chooses the float layers itself; drop --keep-float")
        if timeout is not None:
            raise UserInputError("--max-drop converts in this process; drop --timeout")
        from edgekit.export.accuracy_aware import export_accuracy_aware
        from edgekit.worker.latency import NoiseGuard

        for name in targets:
            aware = export_accuracy_aware(
                source,
                dataset,
                name,
                max_drop,
                output,
                calibration_samples=calibration_samples,
                max_steps=max_steps,
                point_estimate=point_estimate,
                bench_guard=None if noise_guard else NoiseGuard(enabled=False),
            )
            if as_json:
                written = {"path": str(aware.artifact.path), **aware.artifact.manifest.to_dict()}
                print(json.dumps(written, indent=2))
            else:
                views.accuracy_aware(name, aware)
        return
    results, failures = [], []
    for target_name in targets:
        for spec in recipes:
            try:
                result = export_artifact(
                    source,
                    dataset,
                    target_name,
                    spec.name,
                    out_dir=output,
                    calibration_samples=calibration_samples,
                    io_dtype=io,
                    keep_float=keep,
                    timeout_s=timeout,
                )
            except (UnsupportedExport, ExportRejected) as exc:
                if len(targets) * len(recipes) == 1 and not culprit:
                    raise
                failures.append((target_name, spec.name, str(exc)))
                continue
            results.append(result)
    if culprit:
        from edgekit.cli.culprit import search_and_show

        for target_name, recipe_name, _ in failures:
            if recipe_name in ("fp32", "int8"):
                search_and_show(source, data, target_name, recipe_name,
                                output / "culprit", timeout or 300.0, as_json=False)  # fmt: skip
    if as_json:
        payload = {
            "artifacts": [
                {"path": str(r.artifact.path), **r.artifact.manifest.to_dict()} for r in results
            ],
            "unsupported": [{"target": t, "recipe": r, "reason": why} for t, r, why in failures],
        }
        print(json.dumps(payload, indent=2))
    else:
        views.exports(results, failures)
    if failures and not results:
        reasons = dict.fromkeys(why.split(": ", 1)[-1] for _, _, why in failures)
        # a converter that refuses the model is not bad input: exit 1, as for one cell
        raise UnsupportedExport("nothing exported: " + "; ".join(reasons))
    if failures:
        # a requested artifact that was not made is a failed request: what was made is kept,
        # and a CI sees the rest fail (exit 1)
        missing = ", ".join(f"{target}/{recipe}" for target, recipe, _ in failures)
        raise UnsupportedExport(
            f"exported {len(results)} of {len(results) + len(failures)}; not exported: {missing}"
        )
