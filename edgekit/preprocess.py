"""A model's preprocessing config (as timm keeps one per model): input size, channels,
normalisation, layout and class names. Datasets are turned into model inputs with it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from PIL import Image


@dataclass(frozen=True)
class Preprocess:
    """How raw images in [0, 1] become the model's float input.

    ``layout`` is the source model's input layout: ``NCHW`` for torch, ``NHWC`` for Keras.
    edgekit's datasets hold NCHW float32 arrays; sessions convert at their boundary.
    """

    input_size: tuple[int, int]
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    class_names: tuple[str, ...]
    layout: str = "NCHW"
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def input_shape(self, batch: int = 1) -> tuple[int, int, int, int]:
        """The NCHW shape of a batch, whatever the model's own layout."""
        height, width = self.input_size
        return (batch, self.channels, height, width)

    def apply(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, C) images in [0, 1] -> normalised NCHW float32 at the model's input size."""
        images = resize_images(to_channels(images, self.channels), self.input_size)
        mean = np.asarray(self.mean, np.float32).reshape(1, 1, 1, -1)
        std = np.asarray(self.std, np.float32).reshape(1, 1, 1, -1)
        normalised = (images - mean) / std
        return np.ascontiguousarray(normalised.transpose(0, 3, 1, 2), dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["input_size"] = list(self.input_size)
        payload["mean"] = list(self.mean)
        payload["std"] = list(self.std)
        payload["class_names"] = list(self.class_names)
        return payload

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Preprocess:
        return cls(
            input_size=tuple(payload["input_size"]),
            channels=int(payload["channels"]),
            mean=tuple(payload["mean"]),
            std=tuple(payload["std"]),
            class_names=tuple(payload["class_names"]),
            layout=payload.get("layout", "NCHW"),
            notes=dict(payload.get("notes", {})),
        )


def to_channels(images: np.ndarray, channels: int) -> np.ndarray:
    """Grey <-> RGB so a dataset fits a model's channel count."""
    have = images.shape[-1]
    if have == channels:
        return images
    if have == 1:
        return np.repeat(images, channels, axis=-1)
    if channels == 1 and have == 3:
        weights = np.asarray([0.299, 0.587, 0.114], np.float32)
        return (images @ weights)[..., None]
    raise ValueError(f"cannot convert {have}-channel images to {channels} channels")


def resize_images(images: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bilinear resize of (N, H, W, C) float images with Pillow, channel by channel."""
    height, width = size
    if images.shape[1:3] == (height, width):
        return images.astype(np.float32, copy=False)
    out = np.empty((images.shape[0], height, width, images.shape[3]), np.float32)
    for index, image in enumerate(images):
        for channel in range(image.shape[2]):
            plane = Image.fromarray(np.ascontiguousarray(image[..., channel], np.float32), mode="F")
            out[index, ..., channel] = np.asarray(
                plane.resize((width, height), Image.Resampling.BILINEAR)
            )
    return out
