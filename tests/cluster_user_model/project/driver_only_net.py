"""A user's own model, importable only where ``edgekit run`` runs: tests/cluster_scenario.py
puts this folder on the driver's PYTHONPATH and on no node's, so the nodes get it only as
the run ships it (``driver_only_net:tiny_cnn``)."""

from typing import ClassVar

import torch
from driver_only_layers import Block  # a helper beside it: shipped with it
from torch import nn


class TinyNet(nn.Module):
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
        self.block = Block(1, 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.block(x)).flatten(1))


def tiny_cnn() -> nn.Module:
    torch.manual_seed(0)  # the same weights on every node that builds it
    return TinyNet()
