"""``edgekit doctor`` and ``edgekit device setup``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from edgekit.cli.app import app, device_app
from edgekit.cli.console import console, err_console
from edgekit.cli.options import CpuOption, JsonOption, named_boards

# an edgekit.toml whose [devices.NAME] tables name boards (edgekit.devices.ssh.board)
BoardsOption = Annotated[
    Path | None, typer.Option("--config", help="edgekit.toml whose [devices.NAME] names boards")
]


def _yes(flag: object) -> str:
    return "[green]yes[/]" if flag else "[red]no[/]"


@app.command()
def doctor(
    as_json: JsonOption = False,
    device: Annotated[
        str | None,
        typer.Option("--device", help="only this device's state, e.g. a board: ssh://pi5"),
    ] = None,
    config: BoardsOption = None,
) -> None:
    """Which runtimes, delegates, GPUs and devices this machine has, and its fingerprint."""
    from edgekit.analysis.doctor import device_words, diagnose
    from edgekit.common.machine import describe

    named_boards(config)
    if device is not None:
        _doctor_device(device, as_json=as_json)
        return
    facts = diagnose()
    if as_json:
        print(json.dumps(facts, indent=2))
        return
    fingerprint = facts["fingerprint"]
    console.print(
        f"[bold]edgekit doctor[/]  Python {facts['python']} on {facts['machine']}; "
        f"{describe(fingerprint)}; fingerprint {fingerprint['id']}",
        soft_wrap=True,
    )
    versions = Table("package", "version", title="versions")
    for name, version in facts["versions"].items():
        versions.add_row(name, version)
    console.print(versions)
    targets = Table("target", "export", "run", "problems", title="targets")
    for name, state in facts["targets"].items():
        targets.add_row(
            name, _yes(state["export"]), _yes(state["run"]), "; ".join(state["problems"])
        )
    console.print(targets)
    for name, state in facts["targets"].items():
        if "xnnpack" in state:
            console.print(
                f"XNNPACK in {name}'s runtime: {_yes(state['xnnpack'])} "
                f"(backends: {', '.join(state.get('backends', []))})"
            )
    cuda = facts["cuda"]
    console.print(
        f"CUDA GPU: {cuda.get('device') if cuda['available'] else 'none'}; "
        f"onnxruntime providers: {', '.join(facts['onnxruntime_providers'])}"
    )
    vulkan = facts["vulkan"]
    label = "none" if not vulkan["available"] else ", ".join(vulkan["devices"]) or "ICD present"
    if vulkan.get("software_only"):
        label += " (software Vulkan: GPU-delegate latency here is not a GPU's)"
    console.print(f"Vulkan: {label}")
    devices = Table("device", "on this machine", title="devices")
    for name, state in facts["devices"].items():
        devices.add_row(name, escape(device_words(state)))
    console.print(devices)


def _doctor_device(name: str, *, as_json: bool) -> None:
    """One device's state; exit 1 when it is not ready (a script can gate on it)."""
    from edgekit.analysis.doctor import device_words
    from edgekit.devices import get_device

    state = get_device(name).facts()
    if as_json:
        print(json.dumps({"device": name, **state}, indent=2))
    else:
        console.print(f"{name}: {escape(device_words(state))}", soft_wrap=True)
    if state.get("ready") is False:
        raise typer.Exit(1)


@device_app.command("setup")
def device_setup(
    name: Annotated[
        str, typer.Argument(help="the device to set up: arm64-emu, or a board ssh://[user@]host")
    ],
    cpu: CpuOption = None,
    with_pte: Annotated[
        bool, typer.Option("--with-pte", help="also run .pte (trixie userland, ~150 MB)")
    ] = False,
    config: BoardsOption = None,
) -> None:
    """Build a device that needs building into the cache (idempotent)."""
    from edgekit.devices import get_device

    named_boards(config)

    def say(message: str) -> None:
        err_console.print(message, markup=False, highlight=False)

    get_device(name, cpu=cpu).setup(say, with_pte=with_pte)
