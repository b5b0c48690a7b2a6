"""Weights that ship with edgekit: each trained zoo entry's state dict beside its card.

Training on another CPU gives other bits (a vendor's kernels sum in their own order), so the
trained entries do not train on a user's machine: they load the file that ships here, and every
machine evaluates the same weights. ``edgekit zoo train NAME --out DIR`` remakes both files; the
card records the command, the recipe, the training cache key (a change to the architecture, the
recipe, the data or the training code changes it, and the suite then asks for a retrain), where
the weights were trained and the accuracy measured there."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgekit.common.fileio import sha256_file, write_bytes_atomic
from edgekit.errors import EdgekitError

WEIGHTS_DIR = Path(__file__).parent


@dataclass(frozen=True)
class WeightsCard:
    """What a shipped weights file is and how it was made."""

    name: str
    file: str  # beside the card
    sha256: str  # of the file
    state_digest: str  # edgekit's digest of the state dict (what ``edgekit eval`` prints)
    cache_key: str  # edgekit.sources.training.cache_key of the recipe, data and code that made it
    recipe: dict[str, Any]
    command: str  # what made these files
    trained_on: str  # the machine (CPU model) the weights were trained on
    top1: float  # on the evaluation split, measured where they were trained
    samples: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def card_path(name: str, directory: Path = WEIGHTS_DIR) -> Path:
    return directory / f"{name}.json"


def shipped_card(name: str, directory: Path = WEIGHTS_DIR) -> WeightsCard | None:
    """The card of ``name``'s shipped weights, or None where none ship."""
    path = card_path(name, directory)
    if not path.is_file():
        return None
    try:
        return WeightsCard(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise EdgekitError(f"{path}: not a weights card ({exc})") from exc


def load_shipped(name: str, directory: Path = WEIGHTS_DIR) -> dict[str, Any]:
    """The shipped state dict of ``name``, checked against its card's sha256."""
    import torch

    card = shipped_card(name, directory)
    if card is None:
        raise EdgekitError(
            f"{card_path(name, directory)}: no shipped weights for {name} (edgekit zoo train "
            f"{name} --out {directory} makes them)"
        )
    path = directory / card.file
    if not path.is_file():
        raise EdgekitError(f"{path}: missing (named by {card_path(name, directory)})")
    found = sha256_file(path)
    if found != card.sha256:
        raise EdgekitError(
            f"{path}: sha256 {found[:12]} is not the card's {card.sha256[:12]} (a damaged file)"
        )
    return torch.load(path, map_location="cpu", weights_only=True)


def write_shipped(card: WeightsCard, state_file: Path, directory: Path) -> Path:
    """Copy ``state_file`` and write ``card`` into ``directory``, each atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(directory / card.file, Path(state_file).read_bytes())
    write_bytes_atomic(card_path(card.name, directory), card.to_json().encode())
    return card_path(card.name, directory)
