"""Classifier architectures defined in plain torch (torchvision has no CPU wheel for the pinned
torch). Module paths are stable and readable (``block2.dw``) because the quantization debugger
names layers by them."""

from __future__ import annotations

import torch
from torch import nn


class ConvBNAct(nn.Sequential):
    """Conv2d + BatchNorm2d (+ ReLU6 unless ``act`` is False): the unit every block is made of."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int = 3,
        stride: int = 1,
        groups: int = 1,
        act: bool = True,
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act:
            layers.append(nn.ReLU6())
        super().__init__(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 linear projection, residual add."""

    def __init__(self, cin: int, cout: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = cin * expand_ratio
        self.use_residual = stride == 1 and cin == cout
        self.expand = ConvBNAct(cin, hidden, kernel=1) if expand_ratio != 1 else nn.Identity()
        self.dw = ConvBNAct(hidden, hidden, kernel=3, stride=stride, groups=hidden)
        self.project = ConvBNAct(hidden, cout, kernel=1, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.project(self.dw(self.expand(x)))
        return x + out if self.use_residual else out


def _make_divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018), the torchvision layout, with a configurable block table.

    ``blocks`` rows are (expand ratio t, output channels c, repeats n, first stride s).
    """

    IMAGENET_BLOCKS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(
        self,
        num_classes: int = 1000,
        width: float = 1.0,
        in_channels: int = 3,
        stem_channels: int = 32,
        stem_stride: int = 2,
        last_channels: int = 1280,
        blocks: tuple[tuple[int, int, int, int], ...] = IMAGENET_BLOCKS,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        cin = _make_divisible(stem_channels * width)
        self.stem = ConvBNAct(in_channels, cin, kernel=3, stride=stem_stride)
        index = 0
        for expand_ratio, channels, repeats, stride in blocks:
            cout = _make_divisible(channels * width)
            for repeat in range(repeats):
                index += 1
                block = InvertedResidual(cin, cout, stride if repeat == 0 else 1, expand_ratio)
                self.add_module(f"block{index}", block)
                cin = cout
        self.num_blocks = index
        last = _make_divisible(last_channels * max(1.0, width))
        self.head = ConvBNAct(cin, last, kernel=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(last, num_classes)
        _init_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for index in range(1, self.num_blocks + 1):
            x = getattr(self, f"block{index}")(x)
        x = self.pool(self.head(x)).flatten(1)
        return self.classifier(self.dropout(x))


class Bottleneck(nn.Module):
    """ResNet's 1x1-3x3-1x1 bottleneck with stride on the 3x3 (the torchvision v1.5 layout)."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = ConvBNAct(cin, planes, kernel=1)
        self.conv2 = ConvBNAct(planes, planes, kernel=3, stride=stride)
        self.conv3 = ConvBNAct(planes, cout, kernel=1, act=False)
        self.downsample = (
            ConvBNAct(cin, cout, kernel=1, stride=stride, act=False)
            if stride != 1 or cin != cout
            else nn.Identity()
        )
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + self.downsample(x))


class ResNet50(nn.Module):
    """ResNet-50 (He et al. 2016): 3-4-6-3 bottlenecks, 25.6 M parameters, 4.1 G MACs at 224."""

    def __init__(self, num_classes: int = 1000, in_channels: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU()
        )
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        stages = []
        for planes, repeats, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            blocks = []
            for repeat in range(repeats):
                blocks.append(Bottleneck(cin, planes, stride if repeat == 0 else 1))
                cin = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        _init_weights(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.stem(x))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.pool(x).flatten(1))


def _init_weights(model: nn.Module) -> None:
    """Kaiming convs and non-trivial BN statistics, so random-weight models exercise BN folding
    and produce activations with realistic ranges for int8 calibration."""
    generator = torch.Generator().manual_seed(0)
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            fan_out = module.out_channels * module.kernel_size[0] * module.kernel_size[1]
            fan_out //= module.groups
            std = (2.0 / fan_out) ** 0.5
            with torch.no_grad():
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
        elif isinstance(module, nn.BatchNorm2d):
            with torch.no_grad():
                module.weight.uniform_(0.5, 1.5, generator=generator)
                module.bias.uniform_(-0.1, 0.1, generator=generator)
                module.running_mean.uniform_(-0.1, 0.1, generator=generator)
                module.running_var.uniform_(0.5, 1.5, generator=generator)
        elif isinstance(module, nn.Linear):
            with torch.no_grad():
                module.weight.normal_(0, 0.01, generator=generator)
                module.bias.zero_()


def count_macs(model: nn.Module, example: torch.Tensor) -> int:
    """Multiply-accumulates of one forward pass, counted on Conv2d and Linear layers."""
    total = 0

    def conv_hook(module: nn.Conv2d, _inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total
        kernel = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
        total += output.numel() // output.shape[0] * kernel

    def linear_hook(module: nn.Linear, _inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total
        total += module.in_features * module.out_features

    handles = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            handles.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            handles.append(module.register_forward_hook(linear_hook))
    try:
        with torch.no_grad():
            model(example[:1])
    finally:
        for handle in handles:
            handle.remove()
    return total
