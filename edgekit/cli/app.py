"""The Typer applications the command modules register on."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Export an image classifier to TFLite, ExecuTorch and ONNX, quantize it, and measure it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
zoo_app = typer.Typer(help="The built-in models: list, train, show.", no_args_is_help=True)
app.add_typer(zoo_app, name="zoo")
device_app = typer.Typer(
    help="Devices that need setting up (the emulated ARM64 core).", no_args_is_help=True
)
app.add_typer(device_app, name="device")
cluster_app = typer.Typer(
    help="A Ray cluster of machines and their devices: start, join, status, stop.",
    no_args_is_help=True,
)
app.add_typer(cluster_app, name="cluster")
