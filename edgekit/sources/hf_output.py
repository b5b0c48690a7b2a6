"""A transformers classifier's output as the one tensor edgekit's targets take: its
``logits``, or, where its class returns none, the output's one field of the labels' shape."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch


class Logits(torch.nn.Module):
    """A transformers classifier behind edgekit's interface: an NCHW float batch in, the
    logits out (every target and the baseline take a module that returns one tensor).
    ``classes``: the labels' count, which finds the logits in an output without ``logits``.
    ``flip_channels``: the model takes BGR (``do_flip_channel_order``); the flip is part of the
    graph, so the artifact takes RGB like every other."""

    def __init__(
        self, model: torch.nn.Module, classes: int | None = None, *, flip_channels: bool = False
    ) -> None:
        super().__init__()
        self.model = model
        self.classes = classes
        self.flip_channels = flip_channels
        self.options = {"return_dict": True} if _accepts(model, "return_dict") else {}
        self.taken = "logits"  # the field a probe found them in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self._output(x)
        field = self.field(out)
        return out if field is None else getattr(out, field)

    def _output(self, x: torch.Tensor) -> Any:
        """The model's own output for ``x``: a ModelOutput, a tuple or a tensor."""
        return self.model(pixel_values=x.flip(1) if self.flip_channels else x, **self.options)

    def field(self, out: Any) -> str | None:
        """The output's field that holds the logits: ``logits``, or where a class returns none
        (PPLCNetForImageClassification's head writes ``last_hidden_state``) its one 2-D field of
        ``classes`` columns. None: the output is a tensor, or has no such field."""
        if isinstance(out, torch.Tensor):
            return None
        if getattr(out, "logits", None) is not None:
            return "logits"
        if not isinstance(out, Mapping):  # a tuple, or an object without logits: as it is
            return None
        shaped = [key for key, value in out.items() if _of_classes(value, self.classes)]
        return shaped[0] if len(shaped) == 1 else None

    def probe(self, shape: tuple[int, ...]) -> Any:
        """What one zero image of ``shape`` (C,H,W) gives; ``taken`` names its field. The model
        runs in eval mode (a factory's model may still be training: its BatchNorm statistics
        would move toward the zero image) and is left in the mode it had."""
        training = self.model.training
        try:
            with torch.no_grad():
                out = self.eval()._output(torch.zeros(1, *shape))
        finally:
            self.train(training)
        field = self.field(out)
        self.taken = field or "logits"
        return out if field is None else getattr(out, field)


def field_note(where: str, model: Logits) -> str:
    """The note that says where the logits were taken from."""
    kind, field = type(model.model).__name__, model.taken
    note = f"{where}: {kind} taken through its {field} (forward(pixel_values=x).{field})"
    if field == "logits":
        return note
    shape = f"(1, {model.classes})"
    return f"{note}: its output has no logits, and {field} is the one tensor of shape {shape}"


def takes_pixel_values(module: torch.nn.Module) -> bool:
    """A transformers vision model: its forward's first parameter is ``pixel_values``."""
    try:
        parameters = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return False
    return bool(parameters) and parameters[0] == "pixel_values"


def _accepts(model: torch.nn.Module, name: str) -> bool:
    parameters = inspect.signature(model.forward).parameters.values()
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _of_classes(value: object, classes: int | None) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[1] == classes
