"""Options several commands share, and the parsers of their values."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgekit.devices import device_names
from edgekit.errors import UserInputError

ModelOption = Annotated[
    str, typer.Option("--model", "-m", help="zoo name, module:factory, .pt2 or .keras")
]
DataOption = Annotated[
    str, typer.Option("--data", "-d", help="digits, a class-folder directory or .npz")
]
WeightsOption = Annotated[
    Path | None, typer.Option("--weights", help="state-dict file for a module:factory model")
]
ShapeOption = Annotated[
    str | None, typer.Option("--input-shape", help="C,H,W when the model does not declare it")
]
ArtifactsArgument = Annotated[
    list[Path] | None, typer.Argument(help="artifact files (.tflite, .pte, .onnx)")
]
DeviceOption = Annotated[str, typer.Option("--device", help=", ".join(device_names()))]
HistoryOption = Annotated[
    Path | None, typer.Option("--history", help="sqlite file (default ~/.edgekit/history.sqlite)")
]
CpuOption = Annotated[
    str | None,
    typer.Option(
        "--cpu",
        help="arm64-emu core: cortex-a76 (default), cortex-a53, cortex-a55, cortex-a710, "
        "neoverse-n1, neoverse-v1",
    ),
]
XnnpackOption = Annotated[
    bool | None,
    typer.Option("--xnnpack/--no-xnnpack", help=".tflite: XNNPACK (default) or builtin kernels"),
]
SerialOption = Annotated[str | None, typer.Option("--serial", help="adb serial (android)")]
ThreadsOption = Annotated[str, typer.Option("--threads", help="thread counts, e.g. 1,2")]
RoundsOption = Annotated[
    int, typer.Option("--rounds", help="interleaved rounds, at least (each side one block each)")
]
AcrossOption = Annotated[
    bool,
    typer.Option(
        "--across-machines", help="compare latency from different machine fingerprints, labelled"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable output")]


def parse_shape(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    try:
        channels, height, width = (int(part) for part in text.split(","))
    except ValueError:
        raise UserInputError(f"--input-shape '{text}': expected C,H,W such as 3,224,224") from None
    if min(channels, height, width) < 1:
        raise UserInputError(f"--input-shape '{text}': every dimension must be positive")
    return channels, height, width


def parse_threads(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UserInputError(f"--threads '{text}': expected positive counts such as 1 or 1,2")
    return values


def parse_csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def device_options(
    serial: str | None = None, cpu: str | None = None, xnnpack: bool | None = None
) -> dict[str, object]:
    """The device options a command was given (None: not given; get_device checks they fit)."""
    return {"serial": serial, "cpu": cpu, "xnnpack": xnnpack}
