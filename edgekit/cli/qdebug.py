"""``edgekit quantize-debug``: which layer int8 hurts, by torch module path, what to keep float."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from edgekit.cli.app import app
from edgekit.cli.console import console
from edgekit.cli.options import DATA_HELP, JsonOption, WeightsOption


@app.command("quantize-debug")
def quantize_debug(
    model: Annotated[
        str, typer.Option("--model", "-m", help="zoo name, module:factory or .pt2 (torch)")
    ] = "digits-mobilenet",
    data: Annotated[str, typer.Option("--data", "-d", help=DATA_HELP)] = "digits",
    weights: WeightsOption = None,
    target: Annotated[
        str | None,
        typer.Option("--target", "-t", help="cross-check on this target's own quantizer"),
    ] = None,
    samples: Annotated[
        int, typer.Option("--samples", help="calibration samples to measure on")
    ] = 64,
    top: Annotated[int, typer.Option("--top", help="layers that get the all-but-this run")] = 5,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="write the per-layer SQNR plot (PNG) here")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Per-layer int8 sensitivity (SQNR, dB) on calibration data, most harmful layer first."""
    from edgekit.quantize.calibration import sample_calibration
    from edgekit.quantize.sensitivity import analyze, table
    from edgekit.quantize.sensitivity import plot as draw
    from edgekit.sources.data import load_dataset
    from edgekit.sources.load import load_model
    from edgekit.targets import get_target

    if target is not None:
        get_target(target)  # an unknown target is bad input before any work
    source = load_model(model, weights=weights, quiet=as_json)
    dataset = load_dataset(data, source.preprocess)
    calibration = sample_calibration(dataset, max(samples, 1))
    report = analyze(source, calibration.x, samples=samples, top=top)
    if target is not None:
        from edgekit.analysis.crosscheck import crosscheck_report

        report = crosscheck_report(report, source, calibration.x, target)
    written = draw(report, plot) if plot is not None else None
    if as_json:
        payload = report.to_dict()
        payload["plot"] = None if written is None else str(written)
        print(json.dumps(payload, indent=2))
        return
    header, rows = table(report)
    view = Table(
        *header,
        title=f"{report.model}: int8 sensitivity on {report.samples} calibration samples "
        f"(all int8: {report.all_int8_db:.1f} dB at the output)",
    )
    for row in rows:
        view.add_row(*row)
    console.print(view)
    console.print(
        "only int8: model output SQNR with only this layer (weights + output tensor) int8; "
        "all but: everything int8 except it; cumulative: this layer's output, all int8"
        + (f"; {report.target}: {report.crosscheck}" if report.crosscheck else ""),
        soft_wrap=True,
    )
    worst = report.layers[0]
    console.print(
        f"most harmful: {worst.name}; keep it float with "
        f"--keep-float {','.join(worst.float_island)}",
        soft_wrap=True,
    )
    for note in report.notes:
        console.print(f"note: {note}", soft_wrap=True)
    if written is not None:
        console.print(f"wrote {written}")
