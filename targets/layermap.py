"""The one mapping from a torch source model's layers to the ops of an artifact made from it.

A *layer* is what ``edgekit.quantize.layers.find_layers`` names (``block2.dw``: a conv or
linear unit, by torch module path). Each target's census carries, per op, the module path the
file keeps (``edgekit.targets.census``); an op belongs to the longest layer name that
contains its path (``layer_of``). quantize-debug's cross-check,
``export --keep-float`` and per-layer profiling all go through this module, so a module path
one of them prints is one the others take, or they all say the same reason why not.

    >>> layers = [layer.name for layer in find_layers(source.module)]
    >>> mapping = map_layers(layers, get_target("onnx").census(path))
    >>> mapping.ops["b2.dw"]        # census op indices, in execution order
    [19]
    >>> mapping.reasons             # the layers no op carries, and why
    {}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgekit.quantize.layers import layer_of
from edgekit.targets.census import Census


@dataclass(frozen=True)
class LayerMap:
    target: str
    layers: list[str]  # every layer, in the source model's definition order
    ops: dict[str, list[int]]  # layer -> indices of its census ops (empty: see reasons)
    reasons: dict[str, str] = field(default_factory=dict)  # layer with no op -> why

    @property
    def missing(self) -> list[str]:
        return [layer for layer in self.layers if not self.ops[layer]]

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "ops": dict(self.ops), "reasons": dict(self.reasons)}


@dataclass
class LayerErrors:
    """A target's own per-layer int8 error (quantize-debug's cross-check column), by layer."""

    tool: str  # the target's tool the figures come from
    db: dict[str, float]  # layer (torch module path) -> SQNR in dB
    missing: dict[str, str] = field(default_factory=dict)  # layer without a figure -> why


def layer_errors_of(
    figures: Iterable[tuple[str | None, float | None]],
    layers: Sequence[str],
    modules: Sequence[str | None],
    *,
    target: str,
    tool: str,
) -> LayerErrors:
    """Each layer's figure from a tool's (module path, dB) pairs in execution order (a layer's
    last tensor wins: its output is the layer's), and why each layer without one has none
    (``modules``: every op's module path). The tail every target's layer_errors shares."""
    per_layer: dict[str, float] = {}
    for module, figure in figures:
        layer = layer_of(module, list(layers)) if module else None
        if layer and figure is not None:
            per_layer[layer] = figure
    return LayerErrors(tool, per_layer, missing_figures(layers, modules, per_layer, target, tool))


def map_layers(layers: Sequence[str], census: Census) -> LayerMap:
    """Each layer's census ops, and for every layer with none, the reason."""
    modules = [op.module for op in census.ops]
    ops: dict[str, list[int]] = {layer: [] for layer in layers}
    for op in census.ops:
        layer = layer_of(op.module, list(layers)) if op.module is not None else None
        if layer is not None:
            ops[layer].append(op.index)
    reasons = {
        layer: unmapped_reason(layer, modules, census.target) for layer in layers if not ops[layer]
    }
    return LayerMap(census.target, list(layers), ops, reasons)


def ops_from(path: str, modules: Sequence[str | None]) -> list[int]:
    """Positions of the ops that come from module ``path`` or a module inside it."""
    return [i for i, module in enumerate(modules) if module is not None and _inside(module, path)]


def require_modules(target: str, module: Any, source_name: str, keep_float: Sequence[str]) -> None:
    """Refuse, before any conversion, a ``keep_float`` path that names no module of the torch
    ``module``: a typo is one line at once, not after a conversion of many seconds."""
    from edgekit.errors import UserInputError

    known = dict(module.named_modules())
    missing = [path for path in keep_float if path not in known]
    if missing:
        raise UserInputError(
            f"{target}: no module {', '.join(missing)} in {source_name} "
            "(keep_float takes torch module paths such as block2.dw)"
        )


def unmapped_reason(path: str, modules: Sequence[str | None], target: str) -> str:
    """Why no op in ``modules`` (each op's module path, None where the file keeps none) comes
    from module ``path``."""
    known = [module for module in modules if module is not None]
    if not known:
        return f"the {target} file keeps no module paths"
    enclosing = [module for module in known if module and path.startswith(module + ".")]
    if enclosing:
        # torch.export puts a module in an op's scope only while the module's forward runs: a
        # module whose weights its parent uses directly (nn.MultiheadAttention's out_proj) never is
        parent = max(enclosing, key=len)
        return (
            f"its forward never runs: {parent} uses its weights in its own forward, and the "
            f"{target} file names those ops {parent}"
        )
    return f"no op of the {target} file comes from it or from a module inside it"


def _inside(module: str, path: str) -> bool:
    return module == path or module.startswith(path + ".")


def missing_figures(
    layers: Sequence[str],
    modules: Sequence[str | None],
    figures: dict[str, float],
    target: str,
    tool: str,
) -> dict[str, str]:
    """Why each layer without a figure in ``figures`` has none: no op comes from it (see
    ``unmapped_reason``; ``modules`` is each op's module path), or ``tool`` compared no
    tensor its ops produce."""
    owners = {layer_of(module, list(layers)) for module in modules if module}
    return {
        layer: unmapped_reason(layer, modules, target)
        if layer not in owners
        else f"{tool} compared no tensor its ops produce"
        for layer in layers
        if layer not in figures
    }
