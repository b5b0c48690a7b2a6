"""``edgekit golden``: write a golden bundle for an app team, check one against an artifact on
a device, or verify outputs an app wrote (naming the preprocessing mistake they match)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from edgekit.cli.app import app
from edgekit.cli.console import console
from edgekit.cli.options import (
    CpuOption,
    DataOption,
    DeviceOption,
    JsonOption,
    SerialOption,
    XnnpackOption,
    named_boards,
    resolve_device,
)
from edgekit.devices import DEFAULT_DEVICE, SPREAD_DEVICES
from edgekit.errors import GateFailed, UserInputError

if TYPE_CHECKING:
    from edgekit.devices.base import Device


@app.command()
def golden(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="ARTIFACT (make, --check) or the app's OUTPUTS (--verify)"),
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="the bundle folder")] = None,
    check: Annotated[
        Path | None, typer.Option("--check", help="run BUNDLE against ARTIFACT on --device")
    ] = None,
    verify: Annotated[
        Path | None,
        typer.Option("--verify", help="compare OUTPUTS (.npy, or a folder of them) with BUNDLE"),
    ] = None,
    data: DataOption = "digits",
    count: Annotated[int, typer.Option("--count", "-n", help="images in the bundle")] = 16,
    spread_on: Annotated[
        str,
        typer.Option("--spread-on", help="devices whose outputs set the tolerance ('' for none)"),
    ] = ",".join(SPREAD_DEVICES),
    device: DeviceOption = DEFAULT_DEVICE,
    serial: SerialOption = None,
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="edgekit.toml with [devices.NAME] boards")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Golden vectors for the app: real labelled images at three stages (PNG, decoded RGB, the
    exact input tensor), the artifact's expected outputs, measured tolerances, the preprocessing
    in words, runners for the format's own runtime, and digests."""
    paths = paths or []
    if check is not None and verify is not None:
        raise UserInputError("golden: give --check or --verify, not both")
    if verify is not None:
        _verify(verify, paths, as_json)
    elif check is not None:
        if len(paths) > 1:
            raise UserInputError("golden --check BUNDLE [ARTIFACT]: one artifact at most")
        named_boards(config)
        chosen_device = resolve_device(device, serial, cpu, xnnpack)
        _check(check, paths[0] if paths else None, chosen_device, as_json)
    else:
        if len(paths) != 1 or output is None:
            raise UserInputError("golden: give one ARTIFACT and -o BUNDLE (or --check, --verify)")
        _make(paths[0], output, data, count, spread_on, as_json)


def _make(
    artifact: Path, output: Path, data: str, count: int, spread_on: str, as_json: bool
) -> None:
    from edgekit.golden.make import make_bundle

    devices = tuple(name.strip() for name in spread_on.split(",") if name.strip())
    say = (lambda line: None) if as_json else (lambda line: console.print(f"[dim]{line}[/]"))
    bundle = make_bundle(artifact, output, data=data, count=count, spread_on=devices, say=say)
    tolerance = bundle.spec["tolerance"]["logits"]
    if as_json:
        print(
            json.dumps({"bundle": str(bundle.root), "images": bundle.count, "tolerance": tolerance})
        )
        return
    measured = ", ".join(f"{k} {v:.3g}" for k, v in tolerance["measured"].items()) or "nothing"
    atols = ", ".join(f"{v:.3g} on {k}" for k, v in tolerance["atol_by_kernels"].items())
    console.print(
        f"wrote [bold]{bundle.root}[/]: {bundle.count} images of {data} at three stages, "
        f"expected outputs, atol {atols} (spread measured: {measured})",
        soft_wrap=True,
    )
    for device, why in tolerance["not_measured"].items():
        console.print(f"  [dim]not measured on {device}: {why}[/]", soft_wrap=True)


def _check(bundle: Path, artifact: Path | None, device: Device, as_json: bool) -> None:
    from edgekit.golden.check import check_bundle

    result = check_bundle(bundle, artifact=artifact, device=device)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        comparison = result.comparison
        verdict = "[bold green]PASS[/]" if result.passed else "[bold red]FAIL[/]"
        console.print(
            f"{verdict} {result.artifact} on {result.device}: "
            f"{len(comparison['per_image_max_abs_diff'])} images, "
            f"max |diff| {comparison['max_abs_diff']:.3g} (atol {result.atol:.3g}), "
            f"top-1 agreement {comparison['top1_agreement']:.3f}",
            soft_wrap=True,
        )
        if not result.same_file:
            console.print("  [dim]not the file the bundle was made from (its sha256 differs)[/]")
        if result.input_mismatch:
            console.print(f"  inputs: {result.input_mismatch}", soft_wrap=True)
        if comparison["failed_images"]:
            console.print(f"  images outside the tolerance: {comparison['failed_images']}")
    if not result.passed:
        raise GateFailed(f"{bundle}: the artifact does not reproduce the bundle on {result.device}")


def _verify(bundle: Path, paths: list[Path], as_json: bool) -> None:
    from edgekit.golden.verify import verify_outputs

    if len(paths) != 1:
        raise UserInputError("golden --verify BUNDLE OUTPUTS: give one .npy or folder of outputs")
    result = verify_outputs(bundle, paths[0])
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        for line in result.lines():
            console.print(line, soft_wrap=True)
    if not result.passed:
        raise GateFailed(result.summary)
