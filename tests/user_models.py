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


def raises() -> nn.Module:
    raise RuntimeError("weights server unreachable")


def not_a_module() -> str:
    return "hello"
