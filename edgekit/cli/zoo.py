"""``edgekit zoo list|train|show``."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from edgekit.cli.app import zoo_app
from edgekit.cli.console import console
from edgekit.errors import UserInputError


@zoo_app.command("list")
def zoo_list() -> None:
    """List the zoo's models."""
    from edgekit.zoo import ZOO

    table = Table("name", "input", "classes", "weights", "description")
    for entry in ZOO.values():
        pre = entry.preprocess
        shape = f"{pre.channels}x{pre.input_size[0]}x{pre.input_size[1]}"
        weights = f"trained on {entry.trained_on}" if entry.trained_on else "random"
        table.add_row(entry.name, shape, str(pre.num_classes), weights, entry.description)
    console.print(table)


@zoo_app.command("train")
def zoo_train(name: Annotated[str, typer.Argument()] = "digits-mobilenet") -> None:
    """Train (or load from the cache) a trained zoo model and print its accuracy."""
    import numpy as np

    from edgekit.data import load_dataset
    from edgekit.models import load_model

    source = load_model(name)
    dataset = load_dataset("digits", source.preprocess)
    split = dataset.evaluation
    top1 = float(np.mean(source.predict(split.x).argmax(1) == split.y))
    console.print(
        f"{source.name} on {dataset.name} (evaluation split, {len(split)} images): "
        f"top-1 {100 * top1:.2f} %  [weights {source.digest[:12]}]"
    )


@zoo_app.command("show")
def zoo_show(name: Annotated[str, typer.Argument()] = "digits-mobilenet") -> None:
    """Show a zoo model's preprocessing config, size and compute."""
    import torch

    from edgekit.architectures import count_macs
    from edgekit.zoo import ZOO

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
