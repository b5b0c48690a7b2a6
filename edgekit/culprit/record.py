"""Which blocks of a model can be converted alone, and the inputs each one sees: forward hooks
on one real forward pass find every module called with one float tensor (the rest constants),
and a later pass captures one block's inputs for all the samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from edgekit.culprit.harness import BoundBlock, first_tensor

CONSTANTS = (type(None), bool, int, float, str)


@dataclass
class BlockCall:
    """How a block was called in the model's forward: ``rest`` and ``kwargs`` are bound as
    constants. ``skipped`` says why a module cannot be converted alone (it still counts as a
    level of the tree, its children may be)."""

    path: str
    kind: str
    module: str = ""  # the module that defines ``kind`` (a repro unpickles the block from it)
    input_shape: list[int] = field(default_factory=list)
    rest: list = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "module": self.module,
            "input_shape": self.input_shape,
            "rest": self.rest,
            "kwargs": self.kwargs,
            "skipped": self.skipped,
        }


def _constant(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_constant(item) for item in value)
    return isinstance(value, CONSTANTS)


def _why_not(args: tuple, kwargs: dict, output: Any) -> str | None:
    if not args or not isinstance(args[0], torch.Tensor):
        return "not called with a tensor first"
    if not args[0].is_floating_point():
        return f"called with a {args[0].dtype} tensor"
    for value in [*args[1:], *kwargs.values()]:
        if not _constant(value):
            return f"called with more than one tensor or a {type(value).__name__}"
    if first_tensor(output) is None:
        return "returns no tensor"
    return None


def block_calls(model: torch.nn.Module, sample: np.ndarray) -> dict[str, BlockCall]:
    """Every module of ``model`` that ran in one forward pass of ``sample`` (batch 1), in call
    order, with how it was called; a module called twice keeps its first call."""
    calls: dict[str, BlockCall] = {}
    names = {id(module): name for name, module in model.named_modules()}
    handles = []

    def after(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        name = names.get(id(module))
        if name is None or name in calls:
            return
        why = _why_not(args, kwargs, output)
        calls[name] = BlockCall(
            path=name,
            kind=type(module).__name__,
            module=type(module).__module__,
            input_shape=list(args[0].shape) if why is None else [],
            rest=list(args[1:]) if why is None else [],
            kwargs=dict(kwargs) if why is None else {},
            skipped=why,
        )

    for module in model.modules():
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        with torch.no_grad():
            model(torch.from_numpy(sample))
    finally:
        for handle in handles:
            handle.remove()
    # hooks fire as each module returns: children before their parent; order by first call
    order = [name for name, _ in model.named_modules() if name in calls]
    return {name: calls[name] for name in order}


def bound_block(model: torch.nn.Module, call: BlockCall) -> BoundBlock:
    return BoundBlock(model.get_submodule(call.path), call.rest, call.kwargs).eval()


def block_inputs(model: torch.nn.Module, path: str, samples: np.ndarray) -> np.ndarray:
    """The input ``path`` sees for each sample (batch 1 each): shape (samples, *input)."""
    block = model.get_submodule(path)
    seen: list[np.ndarray] = []

    def before(module: torch.nn.Module, args: tuple) -> None:
        if len(seen) == index:  # a block called twice in one pass keeps its first call
            seen.append(args[0].detach().clone().numpy())

    handle = block.register_forward_pre_hook(before)
    try:
        with torch.no_grad():
            for index, sample in enumerate(samples):  # noqa: B007 (read by the hook)
                model(torch.from_numpy(sample[None]))
    finally:
        handle.remove()
    return np.stack(seen)


def parent_of(path: str, paths: list[str]) -> str | None:
    """The nearest ancestor of ``path`` among ``paths`` ("" is the root)."""
    if path == "":
        return None
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:cut])
        if candidate in paths:
            return candidate
    return ""
