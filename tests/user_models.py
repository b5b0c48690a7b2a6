"""A user's own models, as ``module:factory`` specs point at them (``user_models:tiny_cnn``)."""

from typing import ClassVar

import torch
from torch import nn


class TinyCNN(nn.Module):
    # edgekit reads the input shape, normalisation and classes from this dict
    edgekit_preprocess: ClassVar[dict] = {
        "channels": 1,
        "input_size": (32, 32),
        "mean": (0.5,),
        "std": (0.5,),
        "class_names": [str(digit) for digit in range(10)],
    }

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(self.pool(x).flatten(1))


def tiny_cnn() -> nn.Module:
    torch.manual_seed(0)
    return TinyCNN()


def no_shape() -> nn.Module:
    return nn.Linear(4, 2)


def shapeless_cnn() -> nn.Module:
    """A classifier that declares nothing: its input shape comes from the data."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, 4),
    )  # fmt: skip


def raises() -> nn.Module:
    raise RuntimeError("weights server unreachable")


def not_a_module() -> str:
    return "hello"


class _Preprocessed(nn.Module):
    edgekit_preprocess: ClassVar[dict] = {}

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(1, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


def _with(config: dict) -> nn.Module:
    module = _Preprocessed()
    module.edgekit_preprocess = config
    return module


def channels_as_a_word() -> nn.Module:
    return _with({"channels": "three", "input_size": (32, 32), "num_classes": 10})


def size_as_one_number() -> nn.Module:
    return _with({"channels": 1, "input_size": 32, "num_classes": 10})


def mean_of_three_channels() -> nn.Module:
    return _with(
        {"channels": 1, "input_size": (32, 32), "mean": (0.1, 0.2, 0.3), "num_classes": 10}
    )


class Branchy(nn.Module):
    """A data-dependent branch: inputs that take the other branch would get wrong answers from a
    traced graph that kept one."""

    edgekit_preprocess: ClassVar[dict] = {"channels": 1, "input_size": (32, 32), "num_classes": 10}

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(1, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = x.mean((2, 3))
        if pooled.sum() > 0:
            pooled = pooled * 2
        return self.fc(pooled)


def branchy() -> nn.Module:
    torch.manual_seed(0)
    return Branchy()


def rgb_16() -> nn.Module:
    """Another input shape (3x16x16) than the digits models."""
    torch.manual_seed(0)
    module = _Preprocessed()
    module.fc = nn.Linear(3, 10)
    module.edgekit_preprocess = {"channels": 3, "input_size": (16, 16), "num_classes": 10}
    return module


def exits() -> nn.Module:
    """A factory whose native code ends the process without a word (LLVM's fatal error handler
    does this when a converter cannot write)."""
    import os

    os._exit(1)
