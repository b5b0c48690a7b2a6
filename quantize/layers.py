"""The layers of a torch classifier, named by torch module path (``block2.dw``), and the graph
between them.

A *layer* is a conv or linear unit: a ``Conv2d``/``Linear``, or the ``Sequential`` it opens
(conv + BatchNorm + activation, which every target fuses into one int8 op). Each layer owns its
weights and its output tensor; keeping a layer float in a real artifact means its output tensor
is float, which needs its producer *and* its consumers float (``float_island``)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.errors import UserInputError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Layer:
    name: str
    op: str
    unit: Any  # the module whose output is the layer's output
    weighted: Any  # the Conv2d / Linear holding the weights


def find_layers(module: torch.nn.Module) -> list[Layer]:
    """Conv/linear units in definition order, named by module path."""
    import torch

    modules = dict(module.named_modules())
    layers = []
    for path, child in modules.items():
        if not _weighted(child):
            continue
        parent_path, _, attr = path.rpartition(".")
        parent = modules.get(parent_path)
        unit_path, unit = path, child
        # conv + norm + activation in one Sequential: the targets fuse it into one int8 op; a
        # Sequential with a second weighted layer (an MLP: Linear, GELU, Linear) is no unit
        if (
            isinstance(parent, torch.nn.Sequential)
            and parent_path
            and attr == "0"
            and not any(_weighted(m) for name, m in parent.named_modules() if name not in ("", "0"))
        ):
            unit_path, unit = parent_path, parent
        op = "Linear" if isinstance(child, torch.nn.Linear) else type(child).__name__
        if isinstance(child, torch.nn.Conv2d) and child.groups > 1:
            op += "(depthwise)" if child.groups == child.in_channels else f"(groups={child.groups})"
        layers.append(Layer(unit_path, op, unit, child))
    if not layers:
        raise UserInputError("quantize-debug: the model has no Conv2d or Linear layer to rank")
    return layers


def _weighted(module: torch.nn.Module) -> bool:
    import torch

    return isinstance(module, torch.nn.Conv2d | torch.nn.Linear)


def layer_of(path: str, names: list[str]) -> str | None:
    """The layer a module path belongs to (the longest layer name that contains it)."""
    best = None
    for name in names:
        if (path == name or path.startswith(name + ".")) and (
            best is None or len(name) > len(best)
        ):
            best = name
    return best


def consumers(
    module: torch.nn.Module, example: np.ndarray, names: list[str]
) -> dict[str, list[str]]:
    """layer -> the layers that read its output tensor directly (from torch.export's graph),
    the tensor after the BatchNorm and activation the targets fold into the layer."""
    graph = exported_graph(module, example)
    owner = {}
    for node in graph.nodes:
        stack = node.meta.get("nn_module_stack") or {}
        if node.op == "call_function" and stack:
            layer = layer_of(str(list(stack.values())[-1][0]), names)
            if layer:
                owner[node] = layer
    last: dict[str, Any] = {}
    for node, layer in owner.items():
        last[layer] = node  # graph order: the last node of a layer produces its output
    result = {}
    for layer, node in last.items():
        node = _folded_end(node, owner)
        users = [owner.get(user) for user in node.users]
        result[layer] = sorted({u for u in users if u and u != layer}, key=names.index)
    return result


# ops every target folds into the conv or linear before them (a BatchNorm and an activation
# written as attributes or functions of the enclosing block: conv1, bn1, F.relu)
FOLDED_OPS = ("batch_norm", "relu", "hardtanh", "clamp", "getitem")


def _folded_end(node: torch.fx.Node, owner: dict[Any, str]) -> Any:
    """The node that really produces a layer's output tensor: its last node, or the BatchNorm
    and activation that read only it and belong to no other layer."""
    while len(node.users) == 1:
        user = next(iter(node.users))
        folded = user.op == "call_function" and any(k in str(user.target) for k in FOLDED_OPS)
        if not folded or user in owner:
            break
        node = user
    return node


def exported_graph(module: torch.nn.Module, example: np.ndarray) -> Any:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(module.eval(), (torch.from_numpy(example),)).graph


def float_island(layer: str, consumer_map: dict[str, list[str]]) -> list[str]:
    """The layers to keep float so that ``layer``'s output tensor stays float."""
    return [layer, *[c for c in consumer_map.get(layer, []) if c != layer]]
