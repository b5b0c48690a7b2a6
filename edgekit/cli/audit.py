"""``edgekit audit``: what model files are, read from the files, against what they should be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from edgekit.cli.app import app
from edgekit.cli.console import console
from edgekit.cli.options import IO_HELP, JsonOption
from edgekit.errors import GateFailed, UserInputError


@app.command()
def audit(
    files: Annotated[list[Path] | None, typer.Argument(help=".tflite, .pte or .onnx files")] = None,
    expect: Annotated[
        str | None, typer.Option("--expect", help="fp32, fp16, int8 (static) or int8-dynamic")
    ] = None,
    expect_io: Annotated[str | None, typer.Option("--expect-io", help=IO_HELP)] = None,
    require_full_delegation: Annotated[
        bool,
        typer.Option("--require-full-delegation", help="every op inside the delegate/fast path"),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Op census by compute dtype, quantization, float islands, I/O, Q/DQ and fallbacks of any
    model file; exit 1 with one line per reason when a file is not what --expect says."""
    from edgekit.artifacts.audit import audit_file

    if not files:
        raise UserInputError("audit: give one or more model files")
    reports = [
        audit_file(f, expect, expect_io, require_full_delegation=require_full_delegation)
        for f in files
    ]
    if as_json:
        print(json.dumps([report.to_dict() for report in reports], indent=2))
    else:
        for report in reports:
            show(report)
    reasons = [reason for report in reports for reason in report.reasons]
    if reasons:
        if not as_json:
            for reason in reasons:
                console.print(f"[bold red]NOT AS EXPECTED[/] {reason}", soft_wrap=True)
        failed = sum(not report.passed for report in reports)
        raise GateFailed(f"{failed} of {len(reports)} file(s) are not what was expected")


def show(report: object) -> None:
    """One block per file: the census in a few lines, then each check."""
    r = report
    shares = " | ".join(
        f"{dtype} {v['ops']} ops, {100 * v['mac_share']:.1f} % of MACs"
        for dtype, v in r.compute.items()
        if v["ops"]
    )
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(r.kinds.items()))
    weights = ", ".join(f"{label} x{count}" for label, count in r.weights.items()) or "-"
    io = "; ".join(
        f"{side} {spec['name']} {spec['dtype']} {spec['shape']}"
        for side, specs in (("in", r.inputs), ("out", r.outputs))
        for spec in specs
    )
    lines = [
        f"[bold]{r.path}[/] ({r.target}): looks like [bold]{r.looks_like}[/]"
        + (f", {r.quantization} quantization" if r.quantization != "none" else ""),
        f"  ops       {r.ops} ({kinds}); fast path {r.fast_ops}/{r.ops}",
        f"  compute   {shares or 'no conv/matmul ops'}",
        f"  weights   {weights}",
        f"  I/O       {io}",
    ]
    if r.float_islands:
        islands = "; ".join(
            f"{', '.join(i['modules'][:4])} ({len(i['ops'])} ops, "
            f"{100 * i['mac_share']:.1f} % of MACs)"
            for i in r.float_islands[:8]
        )
        lines.append(f"  float islands ({len(r.float_islands)}): {islands}")
    if r.qdq_pairs:
        lines.append(f"  Q/DQ round trips ({len(r.qdq_pairs)}): " + "; ".join(r.qdq_pairs[:4]))
    if r.float_by_rule:
        lines.append(f"  float by the converter's rule: {r.float_by_rule}")
    if r.off_fast_path:
        off = ", ".join(f"{name} x{count}" for name, count in r.off_fast_path.items())
        lines.append(f"  off the fast path: {off}")
    for check in r.checks:
        verdict = "[green]PASS[/]" if check.passed else "[bold red]FAIL[/]"
        lines.append(f"  {check.check}: {verdict}")
    for line in lines:
        console.print(line, soft_wrap=True, highlight=False)
