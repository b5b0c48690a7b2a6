"""A model int8 provably hurts in one place: digits-mobilenet with an outlier activation channel.

``damaged_models:outlier_mobilenet`` is digits-mobilenet with one output channel of
``block6.project`` (a BatchNorm with no activation after it) multiplied by :data:`FACTOR` and the
matching input channel of ``head``'s 1x1 convolution divided by it. In fp32 the two cancel: the
logits are the trained model's up to rounding. In int8 the tensor between the two layers has one
per-tensor activation scale, set by the outlier channel, so the other channels keep only a few
quantization levels. Per-channel weight scales cannot help (the damage is in an activation), and
keeping only one of the two layers float does not either: the tensor stays quantized as long as
its producer or its consumer is int8.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

DAMAGED_LAYER = "block6.project"  # the producer of the outlier tensor
CONSUMER = "head"  # the only layer that reads it
FACTOR = 150.0  # measured: int8 top-1 drops 8-23 points (per target); x100 barely hurts
CHANNEL = 18  # the channel with the widest range (|x| <= 7.5 on calibration data)

PREPROCESS = {
    "channels": 1,
    "input_size": (32, 32),
    "mean": (0.5,),
    "std": (0.5,),
    "class_names": [str(digit) for digit in range(10)],
}


def outlier_mobilenet() -> nn.Module:
    from edgekit.sources.load import load_model

    module = copy.deepcopy(load_model("digits-mobilenet", quiet=True).module).eval()
    with torch.no_grad():
        norm = module.block6.project[1]  # Conv2d, BatchNorm2d: the block's linear projection
        norm.weight[CHANNEL] *= FACTOR
        norm.bias[CHANNEL] *= FACTOR
        module.head[0].weight[:, CHANNEL] /= FACTOR  # undo it in the only consumer
    module.edgekit_preprocess = dict(PREPROCESS)
    return module
