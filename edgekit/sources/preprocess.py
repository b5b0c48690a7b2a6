"""A model's preprocessing config (as timm keeps one per model): input size, channels,
normalisation, layout and class names. Datasets are turned into model inputs with it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
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
    scale: float = 1.0  # images in [0, 1] are multiplied by it first (255: a 0..255 model)
    resample: str = "bilinear"  # Pillow's filter for resizing images to input_size

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def input_shape(self, batch: int = 1) -> tuple[int, int, int, int]:
        """The NCHW shape of a batch, whatever the model's own layout."""
        height, width = self.input_size
        return (batch, self.channels, height, width)

    def apply(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, C) images in [0, 1] -> normalised NCHW float32 at the model's input size."""
        images = resize_images(to_channels(images, self.channels), self.input_size, self.resample)
        mean = np.asarray(self.mean, np.float32).reshape(1, 1, 1, -1)
        std = np.asarray(self.std, np.float32).reshape(1, 1, 1, -1)
        normalised = (images * np.float32(self.scale) - mean) / std
        return np.ascontiguousarray(normalised.transpose(0, 3, 1, 2), dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["input_size"] = list(self.input_size)
        payload["mean"] = list(self.mean)
        payload["std"] = list(self.std)
        payload["class_names"] = list(self.class_names)
        return payload

    @classmethod
    def from_dict(
        cls, payload: dict[str, Any], where: str = "manifest preprocessing"
    ) -> Preprocess:
        """A recorded preprocessing config, every field checked (one line naming a bad one)."""
        checked = preprocess_from_config(payload, where)
        notes = payload.get("notes")
        if isinstance(notes, dict):
            checked = replace(checked, notes=dict(notes))
        return checked


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


def resize_images(
    images: np.ndarray, size: tuple[int, int], resample: str = "bilinear"
) -> np.ndarray:
    """Resize (N, H, W, C) float images with Pillow's ``resample`` filter, channel by channel."""
    height, width = size
    if images.shape[1:3] == (height, width):
        return images.astype(np.float32, copy=False)
    method = resample_filter(resample)
    out = np.empty((images.shape[0], height, width, images.shape[3]), np.float32)
    for index, image in enumerate(images):
        for channel in range(image.shape[2]):
            plane = Image.fromarray(np.ascontiguousarray(image[..., channel], np.float32), mode="F")
            out[index, ..., channel] = np.asarray(plane.resize((width, height), method))
    return out


def resample_filter(name: str) -> Image.Resampling:
    """Pillow's filter for a resample name (RESAMPLES)."""
    return Image.Resampling[name.upper()]


LAYOUTS = ("NCHW", "NHWC")
# Pillow's resize filters, by the names manifests keep (Hugging Face image processors name one)
RESAMPLES = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")


def preprocess_from_config(config: dict[str, Any], where: str) -> Preprocess:
    """A Preprocess from a user's dict (``edgekit_preprocess``, a manifest, ``edgekit.toml``),
    every field checked: a wrong type is one line naming ``where`` and the field."""
    from edgekit.errors import UserInputError

    def fail(message: str) -> UserInputError:
        return UserInputError(f"{where}: {message}")

    if "channels" not in config or "input_size" not in config:
        raise UserInputError(
            f"{where.split(':')[0]}: cannot tell the model's input shape; pass --input-shape "
            "C,H,W or set an edgekit_preprocess dict on the module"
        )
    channels = config["channels"]
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise fail(f"'channels' must be a positive integer, got {channels!r}")
    size = config["input_size"]
    if (
        not isinstance(size, (list, tuple))
        or len(size) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
    ):
        raise fail(f"'input_size' must be two positive integers (height, width), got {size!r}")
    stats = {}
    for key, default in (("mean", 0.0), ("std", 1.0)):
        values = config.get(key, (default,) * channels)
        if isinstance(values, (int, float)) and not isinstance(values, bool):
            values = (values,) * channels
        if (
            not isinstance(values, (list, tuple))
            or len(values) != channels
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        ):
            raise fail(f"'{key}' must be {channels} number(s), one per channel, got {values!r}")
        if key == "std" and any(v <= 0 for v in values):
            raise fail(f"'std' must be positive, got {values!r}")
        stats[key] = tuple(float(v) for v in values)
    names = config.get("class_names")
    if names is None:
        count = config.get("num_classes")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise fail("set 'class_names' (a list) or 'num_classes' (a positive integer)")
        names = [f"class_{index}" for index in range(count)]
    if not isinstance(names, (list, tuple)) or not names:
        raise fail(f"'class_names' must be a non-empty list, got {type(names).__name__}")
    layout = config.get("layout", "NCHW")
    if layout not in LAYOUTS:
        raise fail(f"'layout' must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    scale = config.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise fail(f"'scale' must be a positive number, got {scale!r}")
    resample = config.get("resample", "bilinear")  # manifests from before it was kept: bilinear
    if resample not in RESAMPLES:
        raise fail(f"'resample' must be one of {', '.join(RESAMPLES)}, got {resample!r}")
    return Preprocess(
        input_size=(int(size[0]), int(size[1])),
        channels=int(channels),
        mean=stats["mean"],
        std=stats["std"],
        class_names=tuple(str(n) for n in names),
        layout=layout,
        scale=float(scale),
        resample=resample,
    )
