"""Models with one planted failure inside one block of a larger model, for ``edgekit culprit``
(``planted_models:log_gamma``): the culprit must name ``body.1.odd`` each time."""

import os
import signal
import time
from typing import ClassVar

import torch
from torch import nn


class LogGamma(nn.Module):
    """lgamma: no lowering in litert-torch, no ONNX function, not in ExecuTorch's core ATen."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.lgamma(x.abs() + 1)


class SignBranch(nn.Module):
    """Python control flow on a tensor's value: torch.export cannot trace it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.sum() > 0 else -x


class Spike(nn.Sequential):
    """Exact in float: ``spike`` puts 1000 on channel 0 and ``drop`` ignores that channel. In
    int8 the spike sets the per-tensor scale near 8, so every other channel rounds to zero."""

    def __init__(self, channels: int) -> None:
        eye = torch.eye(channels).view(channels, channels, 1, 1)
        spike, drop = nn.Conv2d(channels, channels, 1), nn.Conv2d(channels, channels, 1)
        with torch.no_grad():
            spike.weight.copy_(eye)
            spike.bias.zero_()
            spike.bias[0] = 1000.0
            drop.weight.copy_(eye)
            drop.weight[:, 0] = 0.0
            drop.bias.zero_()
        super().__init__(spike, drop)


class SleepsWhenExported(nn.Module):
    """A stand-in for a converter that hangs: tracing it never ends."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            time.sleep(3600)
        return x


class CrashesWhenExported(nn.Module):
    """A stand-in for a converter that crashes: tracing it ends the process with SIGSEGV."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            os.kill(os.getpid(), signal.SIGSEGV)
        return x


class Block(nn.Module):
    def __init__(self, channels: int, odd: nn.Module | None = None) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.act = nn.ReLU()
        self.odd = odd if odd is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.odd(self.act(self.conv(x)))


class Planted(nn.Module):
    edgekit_preprocess: ClassVar[dict] = {
        "channels": 1,
        "input_size": (16, 16),
        "mean": (0.5,),
        "std": (0.5,),
        "class_names": [str(digit) for digit in range(10)],
    }

    def __init__(self, odd: nn.Module | None) -> None:
        super().__init__()
        # no biases: the logits follow the input, so a block that loses it shows in them
        self.stem = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.body = nn.Sequential(Block(8), Block(8, odd), Block(8))
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10, bias=False)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.stem(x)))


def _planted(odd: nn.Module | None) -> nn.Module:
    torch.manual_seed(0)  # the planted block is built after the seed, with the rest
    return Planted(odd).eval()


def log_gamma() -> nn.Module:
    return _planted(LogGamma())


def sign_branch() -> nn.Module:
    return _planted(SignBranch())


def spike() -> nn.Module:
    torch.manual_seed(0)
    return Planted(Spike(8)).eval()


def sleeps_when_exported() -> nn.Module:
    return _planted(SleepsWhenExported())


def crashes_when_exported() -> nn.Module:
    return _planted(CrashesWhenExported())


def clean() -> nn.Module:
    return _planted(None)


def flat() -> nn.Module:
    """A head of zeros: logits that never move with the input, as some random inits give."""
    model = _planted(None)
    with torch.no_grad():
        model.head[2].weight.zero_()
    return model


class NearTie(nn.Module):
    """``project`` gives ten signed scores whose top-1 follows the input; ``lift`` adds their
    sum to each, with the score itself at 1/1000: float keeps each input's top-1, but int8
    rounds ``lift``'s weights (1 and 1.001) to one value, so every logit ties. No block's own
    output is wrong by SQNR; only the whole model's top-1 agreement shows the error."""

    edgekit_preprocess: ClassVar[dict] = Planted.edgekit_preprocess

    def __init__(self) -> None:
        super().__init__()
        self.project = nn.Linear(256, 10, bias=False)
        self.lift = nn.Linear(10, 10, bias=False)
        with torch.no_grad():
            self.lift.weight.copy_(torch.ones(10, 10) + 1e-3 * torch.eye(10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lift(self.project(torch.flatten(x, 1)))


def near_tie() -> nn.Module:
    torch.manual_seed(0)
    return NearTie().eval()


def faint() -> nn.Module:
    """Logits that move with the input but stay near 1e-5, as some random inits give
    (SwiftFormer's): int8 at PT2E's smallest scale (2^-12) rounds them all to one value."""
    model = _planted(None)
    with torch.no_grad():
        model.head[2].weight.mul_(5e-3)  # largest |logit| about 9e-5, spread about 8e-6
    return model
