"""``edgekit zoo list|train|show``."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from edgekit.cli.app import zoo_app
from edgekit.cli.console import console
from edgekit.errors import UserInputError


@zoo_app.command("list")
def zoo_list() -> None:
    """List the zoo's models."""
    from edgekit.sources.zoo import ZOO

    table = Table("name", "input", "classes", "weights", "description")
    for entry in ZOO.values():
        pre = entry.preprocess
        shape = f"{pre.channels}x{pre.input_size[0]}x{pre.input_size[1]}"
        weights = f"trained on {entry.trained_on}" if entry.trained_on else "random"
        table.add_row(entry.name, shape, str(pre.num_classes), weights, entry.description)
    console.print(table)


@zoo_app.command("train")
def zoo_train(
    name: Annotated[str, typer.Argument()] = "digits-mobilenet",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="write the weights and their card here (edgekit/sources/weights)"
        ),
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="default: the recipe's")] = None,
) -> None:
    """Train a trained zoo model anew on this machine (cached) and print its accuracy; the
    model edgekit loads is the one that ships, which --out remakes."""
    import numpy as np
    import torch

    from edgekit.common.fileio import sha256_file, temporary_directory
    from edgekit.common.machine import cpu_model
    from edgekit.sources.data import load_dataset
    from edgekit.sources.source import SourceModel, torch_digest
    from edgekit.sources.training import DEFAULT_RECIPE, cache_key, trained_state_dict
    from edgekit.sources.weights import WeightsCard, write_shipped
    from edgekit.sources.zoo import ZOO

    entry = ZOO.get(name.removeprefix("zoo:"))
    if entry is None:
        raise UserInputError(f"{name}: no such zoo model (have: {', '.join(ZOO)})")
    if entry.trained_on is None:
        trained = [e.name for e in ZOO.values() if e.trained_on]
        raise UserInputError(
            f"{name}: random weights, nothing to train (trained: {', '.join(trained)})"
        )
    name = entry.name
    recipe = DEFAULT_RECIPE if epochs is None else replace(DEFAULT_RECIPE, epochs=epochs)
    if recipe.epochs < 1:
        raise UserInputError(f"--epochs {epochs}: train for at least one epoch")
    module = entry.build()
    module.load_state_dict(trained_state_dict(entry, recipe))
    module.eval()
    dataset = load_dataset(entry.trained_on, entry.preprocess)
    split = dataset.evaluation
    digest = torch_digest(module)
    source = SourceModel(name, "torch", module, entry.preprocess, digest, f"zoo:{name}")
    top1 = float(np.mean(source.predict(split.x).argmax(1) == split.y))
    console.print(
        f"{name} trained here on {dataset.name} (evaluation split, {len(split)} images): "
        f"top-1 {100 * top1:.2f} %  \\[weights {digest[:12]}]"
    )
    if out is not None:
        with temporary_directory("edgekit-weights-") as tmp:
            state = tmp / f"{name}.pt"
            torch.save(module.state_dict(), state)
            card = WeightsCard(
                name=name,
                file=state.name,
                sha256=sha256_file(state),
                state_digest=digest,
                cache_key=cache_key(entry, recipe, dataset.digest),
                recipe=asdict(recipe),
                command=f"edgekit zoo train {name}"
                + ("" if epochs is None else f" --epochs {epochs}")
                + f" --out {out}",
                trained_on=cpu_model(),
                top1=top1,
                samples=len(split),
            )
            console.print(f"wrote {write_shipped(card, state, out)}")


@zoo_app.command("show")
def zoo_show(name: Annotated[str, typer.Argument()] = "digits-mobilenet") -> None:
    """Show a zoo model's preprocessing config, size and compute."""
    import torch

    from edgekit.sources.architectures import count_macs
    from edgekit.sources.zoo import ZOO

    if name not in ZOO:
        raise UserInputError(f"{name}: no such zoo model (have: {', '.join(ZOO)})")
    entry = ZOO[name]
    module = entry.build()
    params = sum(p.numel() for p in module.parameters())
    macs = count_macs(module.eval(), torch.zeros(entry.preprocess.input_shape()))
    payload = {
        "name": name,
        "description": entry.description,
        "trained_on": entry.trained_on,
        "parameters": params,
        "macs": macs,
        "preprocess": entry.preprocess.to_dict(),
    }
    payload["preprocess"]["class_names"] = payload["preprocess"]["class_names"][:12]
    console.print_json(json.dumps(payload))
