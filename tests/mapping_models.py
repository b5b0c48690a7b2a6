"""Models from outside the zoo, written the way a user writes them, for the layer mapping tests
(``mapping_models:se_resnet`` and so on): random seeded weights, 3x32x32 inputs, 10 classes.

- :func:`se_resnet`: residual blocks with squeeze-excite (``nn.Linear`` gates), a conv and its
  BatchNorm as two attributes, ``nn.Sequential`` conv units and shortcuts, a ``Linear`` head;
- :func:`tiny_vit`: a vision-transformer block: patch-embedding conv, LayerNorm, hand-written
  q/k/v attention in one block and ``nn.MultiheadAttention`` in the other, a GELU MLP;
- :func:`shuffle_upsample`: grouped 1x1 convs with a channel shuffle (view/transpose/reshape),
  ``nn.Upsample`` and ``F.interpolate`` back up to a skip connection.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

PREPROCESS = {
    "channels": 3,
    "input_size": (32, 32),
    "mean": (0.5, 0.5, 0.5),
    "std": (0.25, 0.25, 0.25),
    "class_names": [f"class{index}" for index in range(10)],
}


def conv_bn(cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1,
            relu: bool = True) -> nn.Sequential:  # fmt: skip
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


def _randomise_norms(module: nn.Module) -> None:
    """BatchNorm statistics that are not the identity, so that folding them is visible."""
    generator = torch.Generator().manual_seed(1)
    for unit in module.modules():
        if isinstance(unit, nn.BatchNorm2d):
            count = unit.num_features
            unit.running_mean.copy_(0.1 * torch.randn(count, generator=generator))
            unit.running_var.copy_(1.0 + 0.2 * torch.rand(count, generator=generator))


def _finish(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        _randomise_norms(module)
    module.edgekit_preprocess = dict(PREPROCESS)
    return module.eval()


# --------------------------------------------------------------------------------------------
# (a) residual blocks with squeeze-excite


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduction: int = 4) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.fc2(F.relu(self.fc1(self.pool(x).flatten(1)))))
        return x * gate[:, :, None, None]


class SEBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int = 2) -> None:
        super().__init__()
        hidden = cin * expand
        # the expansion written out as conv + norm attributes (ResNet's style), the rest as units
        self.conv1 = nn.Conv2d(cin, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.dw = conv_bn(hidden, hidden, 3, stride, groups=hidden)
        self.se = SqueezeExcite(hidden)
        self.project = conv_bn(hidden, cout, 1, relu=False)
        self.shortcut = (
            conv_bn(cin, cout, 1, stride, relu=False)
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.dw(F.relu(self.bn1(self.conv1(x))))
        return F.relu(self.project(self.se(out)) + self.shortcut(x))


class SEResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2)
        self.b1 = SEBlock(16, 16, 1)
        self.b2 = SEBlock(16, 24, 2)
        self.b3 = SEBlock(24, 32, 2)
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b3(self.b2(self.b1(self.stem(x))))
        return self.head(x.mean(dim=(2, 3)))


def se_resnet() -> nn.Module:
    torch.manual_seed(0)
    return _finish(SEResNet())


# --------------------------------------------------------------------------------------------
# (b) a small vision transformer


class Attention(nn.Module):
    """Multi-head self-attention written out: q/k/v projections, softmax, output projection."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, tokens, self.heads, dim // self.heads).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        weights = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(batch, tokens, dim))


class TorchAttention(nn.Module):
    """The same with ``nn.MultiheadAttention`` (one packed q/k/v projection)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=False)[0]


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, attention: type[nn.Module]) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    def __init__(self, classes: int = 10, dim: int = 32, patch: int = 8) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.pos = nn.Parameter(0.02 * torch.randn(1, (32 // patch) ** 2, dim))
        self.blocks = nn.Sequential(
            TransformerBlock(dim, 4, Attention), TransformerBlock(dim, 4, TorchAttention)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.blocks(tokens)).mean(dim=1))


def tiny_vit() -> nn.Module:
    torch.manual_seed(0)
    return _finish(TinyViT())


# --------------------------------------------------------------------------------------------
# (c) channel shuffle, grouped convs and upsampling


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, channels, height, width = x.shape
    x = x.view(batch, groups, channels // groups, height, width).transpose(1, 2)
    return x.reshape(batch, channels, height, width)


class ShuffleUnit(nn.Module):
    def __init__(self, channels: int, groups: int = 4) -> None:
        super().__init__()
        self.groups = groups
        self.reduce = conv_bn(channels, channels, 1, groups=groups)
        self.dw = conv_bn(channels, channels, 3, groups=channels, relu=False)
        self.restore = conv_bn(channels, channels, 1, groups=groups, relu=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.restore(self.dw(channel_shuffle(self.reduce(x), self.groups)))
        return F.relu(x + out)


class ShuffleUpsample(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2)  # 16x16
        self.unit1 = ShuffleUnit(16)
        # pooled, not a strided conv: litert-torch 0.10's int8 converter refuses a tensor that
        # feeds both a strided conv's explicit PAD and a concatenation (same-scale conflict)
        self.pool = nn.AvgPool2d(2)  # 8x8
        self.down = conv_bn(16, 32, 3, groups=4)
        self.unit2 = ShuffleUnit(32)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")  # back to 16x16
        self.fuse = conv_bn(48, 32, 1, groups=2)
        self.refine = conv_bn(32, 32, 3)
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.unit1(self.stem(x))
        deep = self.unit2(self.down(self.pool(skip)))
        x = self.fuse(torch.cat([self.up(deep), skip], dim=1))
        x = self.refine(x) + F.interpolate(deep, size=x.shape[-2:], mode="bilinear")
        return self.head(x.mean(dim=(2, 3)))


def shuffle_upsample() -> nn.Module:
    torch.manual_seed(0)
    return _finish(ShuffleUpsample())
