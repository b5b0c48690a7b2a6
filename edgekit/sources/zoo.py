"""The model zoo: named classifiers with their preprocessing, as timm's registry keeps them.

``digits-mobilenet`` is trained by edgekit on the built-in digits data (the model the accuracy
gates are about); ``mobilenet_v2`` and ``resnet50`` have random weights, for latency work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edgekit.sources.preprocess import Preprocess

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGENET_CLASSES = tuple(f"class_{index}" for index in range(1000))


DEFAULT_MODEL = "digits-mobilenet"


@dataclass(frozen=True)
class ZooEntry:
    name: str
    description: str
    preprocess: Preprocess
    build: Callable[[], object]
    trained_on: str | None  # a dataset spec, or None for random weights


ZOO: dict[str, ZooEntry] = {}


def register(entry: ZooEntry) -> ZooEntry:
    ZOO[entry.name] = entry
    return entry


def _digits_mobilenet() -> object:
    from edgekit.sources.architectures import MobileNetV2

    return MobileNetV2(
        num_classes=10,
        in_channels=1,
        stem_channels=16,
        stem_stride=1,
        last_channels=128,
        # 32x32 -> 16 -> 8 -> 4: six inverted residual blocks, three of them with a residual add
        blocks=((1, 16, 1, 1), (4, 24, 2, 2), (4, 32, 2, 2), (4, 64, 1, 2)),
        dropout=0.1,
    )


def _mobilenet_v2() -> object:
    from edgekit.sources.architectures import MobileNetV2

    return MobileNetV2(num_classes=1000)


def _resnet50() -> object:
    from edgekit.sources.architectures import ResNet50

    return ResNet50(num_classes=1000)


register(
    ZooEntry(
        name="digits-mobilenet",
        description="MobileNetV2-style (depthwise, ReLU6, BN), 1x32x32, trained on digits",
        preprocess=Preprocess(
            input_size=(32, 32),
            channels=1,
            mean=(0.5,),
            std=(0.5,),
            class_names=tuple(str(digit) for digit in range(10)),
        ),
        build=_digits_mobilenet,
        trained_on="digits",
    )
)
register(
    ZooEntry(
        name="mobilenet_v2",
        description="MobileNetV2 width 1.0, 3x224x224, 1000 classes, random weights (latency)",
        preprocess=Preprocess((224, 224), 3, IMAGENET_MEAN, IMAGENET_STD, IMAGENET_CLASSES),
        build=_mobilenet_v2,
        trained_on=None,
    )
)
register(
    ZooEntry(
        name="resnet50",
        description="ResNet-50, 3x224x224, 1000 classes, random weights (latency)",
        preprocess=Preprocess((224, 224), 3, IMAGENET_MEAN, IMAGENET_STD, IMAGENET_CLASSES),
        build=_resnet50,
        trained_on=None,
    )
)
