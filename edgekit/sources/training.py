"""Training of the zoo's trained entries: deterministic on one machine, cached by content.

edgekit does not train on a user's machine: the weights it loads ship with it
(``edgekit.sources.weights``), because training gives other bits on another CPU. Seen here: an
Intel Xeon (AVX-512, AMX) trains ``15569f7428a5`` (99.11 %), an AMD EPYC (AVX-512, VNNI, BF16)
``7e458d5284fb`` (99.00 %), with the same pinning on both. ``edgekit zoo train`` retrains (and
``--out`` remakes the shipped files); the suite checks that a retrain reaches the accuracy floor,
not that it gives the same bits.

The cache key covers the architecture, the training recipe, the training data and the pinned
numerics, so a change to any of them trains anew. Training runs in a child process with
``PINNED_NUMERICS``, which narrow what the weights depend on within one machine (same bits
twice; ATen's portable kernels and MKL's ``COMPATIBLE`` mode instead of ISA-chosen ones, no
oneDNN or NNPACK), one thread, a seeded generator and deterministic algorithms.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.common.cache import cache_dir
from edgekit.common.fileio import atomic_path, temporary_directory
from edgekit.errors import EdgekitError

if TYPE_CHECKING:
    import torch

    from edgekit.sources.zoo import ZooEntry

# Set in the training child's environment, before torch starts (ATen reads it once).
PINNED_NUMERICS = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
NUMERICS_VERSION = "pinned-1"  # part of the cache key: change it when the pinning changes


@dataclass(frozen=True)
class TrainingRecipe:
    epochs: int = 30
    batch_size: int = 32
    learning_rate: float = 4e-3
    weight_decay: float = 1e-4
    max_shift: int = 2  # random translation in pixels, the only augmentation
    seed: int = 0
    # the first N samples of the training split only (None: all of it); a short recipe for
    # checks of the training code itself, such as its determinism
    samples: int | None = None


DEFAULT_RECIPE = TrainingRecipe()


def _code(function: ModuleType | Callable[..., Any]) -> str:
    """``function``'s (or a module's) code without its import statements or comments: moving
    a module it imports (a new dotted path, the same code) must not make the shipped weights
    stale."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        if hasattr(node, "body") and isinstance(node.body, list):
            node.body = [n for n in node.body if not isinstance(n, ast.Import | ast.ImportFrom)]
    return ast.unparse(tree)


def cache_key(entry: ZooEntry, recipe: TrainingRecipe, data_digest: str) -> str:
    from edgekit.sources import architectures

    # the factory, the layers it builds and the training loop: what the weights depend on
    source = _code(entry.build) + _code(architectures) + _code(_train)
    # a field left at None is not in the key: recipes from before it keep their keys (and the
    # shipped weights theirs)
    fields = {name: value for name, value in asdict(recipe).items() if value is not None}
    payload = json.dumps(
        [entry.name, source, fields, data_digest, NUMERICS_VERSION, PINNED_NUMERICS],
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def trained_state_dict(
    entry: ZooEntry, recipe: TrainingRecipe = DEFAULT_RECIPE, *, quiet: bool = False
) -> dict:
    """Cached weights for ``entry``; trains them (and caches them atomically) on a miss."""
    import torch

    from edgekit.sources.data import load_dataset

    data = load_dataset(entry.trained_on, entry.preprocess)
    path = cache_dir() / f"{entry.name}-{cache_key(entry, recipe, data.digest)}.pt"
    if path.is_file():
        return torch.load(path, map_location="cpu", weights_only=True)
    started = time.perf_counter()
    if not quiet:
        print(f"training {entry.name} on {entry.trained_on} (once; cached in {path.parent})")
    train_in_child(entry, recipe, path, quiet=quiet)
    if not quiet:
        print(f"trained {entry.name} in {time.perf_counter() - started:.0f} s")
    return torch.load(path, map_location="cpu", weights_only=True)


def train_in_child(
    entry: ZooEntry,
    recipe: TrainingRecipe,
    destination: Path,
    *,
    quiet: bool = True,
    host_env: dict[str, str] | None = None,
    pinned: bool = True,
) -> None:
    """Train ``entry`` in a child process with the pinned numerics; the state dict lands at
    ``destination`` atomically. ``host_env`` adds variables as a different machine would have
    them (the tests simulate other ISA levels this way); ``pinned=False`` (tests only) trains
    with whatever the CPU offers."""
    env = dict(os.environ, **(host_env or {}))
    if pinned:
        env.update(PINNED_NUMERICS)
    command = [
        sys.executable,
        "-m",
        "edgekit.sources.training",
        entry.name,
        json.dumps(asdict(recipe)),
    ]
    command += [str(destination), "pinned" if pinned else "unpinned", "quiet" if quiet else "talk"]
    completed = subprocess.run(command, env=env, check=False, capture_output=quiet)
    if completed.returncode != 0 or not Path(destination).is_file():
        tail = (completed.stderr or b"").decode(errors="replace").strip().splitlines()
        raise EdgekitError(
            f"training {entry.name} failed (exit {completed.returncode}"
            + (f": {tail[-1][:200]}" if tail else "")
            + ")"
        )


def train_module(
    entry: ZooEntry,
    recipe: TrainingRecipe,
    *,
    host_env: dict[str, str] | None = None,
    pinned: bool = True,
) -> Any:
    """Train a fresh module without touching the cache (tests use this for determinism)."""
    import torch

    with temporary_directory("edgekit-train-") as tmp:
        path = tmp / "state.pt"
        train_in_child(entry, recipe, path, host_env=host_env, pinned=pinned)
        state = torch.load(path, map_location="cpu", weights_only=True)
    module = entry.build()
    module.load_state_dict(state)
    return module.eval()


def _train(
    module: Any, x: np.ndarray, y: np.ndarray, recipe: TrainingRecipe, quiet: bool, pinned: bool  # noqa: FBT001 (cache key: the code of _train)
) -> None:  # fmt: skip
    import torch
    from torch import nn

    torch.set_num_threads(1)  # the reduction order, hence the weights, depend on the thread count
    torch.use_deterministic_algorithms(True)  # noqa: FBT003 (cache key: the code of _train)
    if pinned:
        torch.backends.mkldnn.enabled = False
        torch.backends.nnpack.set_flags(False)
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed)
    inputs, labels = torch.from_numpy(x), torch.from_numpy(y)
    optimizer = torch.optim.AdamW(
        module.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay
    )
    steps_per_epoch = (len(labels) + recipe.batch_size - 1) // recipe.batch_size
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, recipe.learning_rate, total_steps=recipe.epochs * steps_per_epoch
    )
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    background = float(inputs.min())
    module.train()
    for epoch in range(recipe.epochs):
        order = torch.randperm(len(labels), generator=generator)
        total = 0.0
        for start in range(0, len(labels), recipe.batch_size):
            index = order[start : start + recipe.batch_size]
            batch = _shift(inputs[index], recipe.max_shift, generator, background)
            loss = loss_fn(module(batch), labels[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(index)
        if not quiet and (epoch + 1) % 10 == 0:
            print(
                f"  epoch {epoch + 1}/{recipe.epochs}: loss {total / len(labels):.3f}", flush=True
            )
    module.eval()


def _shift(batch: torch.Tensor, max_shift: int, generator: torch.Generator, fill: float) -> Any:
    """Translate each image by up to ``max_shift`` pixels, filling with the background value."""
    import torch

    if max_shift == 0:
        return batch
    padded = torch.nn.functional.pad(batch, (max_shift,) * 4, value=fill)
    size = batch.shape[-1]
    offsets = torch.randint(0, 2 * max_shift + 1, (len(batch), 2), generator=generator)
    return torch.stack(
        [
            padded[i, :, int(dy) : int(dy) + size, int(dx) : int(dx) + size]
            for i, (dy, dx) in enumerate(offsets)
        ]
    )


def _child_main(argv: list[str]) -> None:
    """``python -m edgekit.sources.training ENTRY RECIPE_JSON DESTINATION pinned|unpinned
    quiet|talk``"""
    import torch

    from edgekit.sources.data import load_dataset
    from edgekit.sources.zoo import ZOO

    name, recipe_json, destination, pinning, talk = argv
    entry = ZOO[name]
    recipe = TrainingRecipe(**json.loads(recipe_json))
    data = load_dataset(entry.trained_on, entry.preprocess)
    module = entry.build()
    _train(
        module,
        data.calibration.x[: recipe.samples],
        data.calibration.y[: recipe.samples],
        recipe,
        quiet=talk == "quiet",
        pinned=pinning == "pinned",
    )
    with atomic_path(Path(destination)) as tmp:
        torch.save(module.state_dict(), tmp)


if __name__ == "__main__":
    from edgekit.common.shutdown import collect_once_at_exit

    collect_once_at_exit()  # before torch's import (edgekit.common.shutdown)
    _child_main(sys.argv[1:])
