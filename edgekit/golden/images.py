"""The three stages of a golden input, from the user's own labelled data: the image file (PNG
bytes), the decoded RGB array an app holds after decoding it, and the exact tensor the artifact
takes (its dtype, layout and quantization). Each stage is computed from the one before it, so an
app that reproduces stage 2 from stage 1, and stage 3 from stage 2, feeds the artifact exactly
what the expected outputs came from."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from edgekit.errors import UserInputError
from edgekit.sources.data import evaluation_indices, folder_files, stored_images
from edgekit.sources.preprocess import Preprocess
from edgekit.targets.session import TensorSpec, stage_input


@dataclass(frozen=True)
class LabelledImage:
    """One image as a file (stage 1), with its class index and where it came from."""

    png: bytes
    label: int
    origin: str  # the dataset file, or "digits[123]"


def png_bytes(array: np.ndarray) -> bytes:
    """An (H, W, C) image in [0, 1] as an 8-bit RGB PNG."""
    pixels = np.clip(np.rint(np.asarray(array, np.float32) * 255.0), 0, 255).astype(np.uint8)
    if pixels.shape[-1] == 1:
        pixels = np.repeat(pixels, 3, axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def decoded_rgb(png: bytes) -> np.ndarray:
    """Stage 2: a PNG decoded as an app decodes it, (H, W, 3) uint8 in R, G, B order."""
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), np.uint8).copy()


def model_input(rgb: np.ndarray, preprocess: Preprocess) -> np.ndarray:
    """A decoded RGB image as the float NCHW sample edgekit's sessions stage: /255, the
    model's channels, resize, scale, mean and std (``Preprocess.apply``)."""
    return preprocess.apply(np.asarray(rgb, np.float32)[None] / 255.0)


def tensor_input(sample: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Stage 3: the float NCHW sample as the artifact takes it (layout, then quantization)."""
    return np.ascontiguousarray(stage_input(sample, spec))


def labelled_images(spec: str, preprocess: Preprocess, limit: int) -> list[LabelledImage]:
    """The evaluation split of ``spec`` (the images ``edgekit eval`` scores), at most ``limit``
    of them, each as a PNG of the image as stored: a folder's files as they are (re-encoded as
    PNG when they are not), an .npz's or the digits' arrays in 8 bits."""
    path = Path(spec)
    if spec != "digits" and path.is_dir():
        return _folder_images(path, preprocess, limit)
    if spec.startswith("synthetic"):
        raise UserInputError(
            f"{spec}: golden vectors need real labelled images, not synthetic data"
        )
    images, labels = stored_images(spec, preprocess)
    chosen = evaluation_indices(len(labels))[:limit]
    return [
        LabelledImage(png_bytes(images[i]), int(labels[i]), f"{spec}[{int(i)}]") for i in chosen
    ]


def _folder_images(root: Path, preprocess: Preprocess, limit: int) -> list[LabelledImage]:
    files, labels = folder_files(root, preprocess)
    chosen = evaluation_indices(len(labels))[:limit]
    found = []
    for index in chosen:
        file = files[int(index)]
        try:
            data = file.read_bytes()
            with Image.open(io.BytesIO(data)) as image:
                if image.format != "PNG" or image.mode not in ("RGB", "L"):
                    buffer = io.BytesIO()
                    image.convert("RGB").save(buffer, format="PNG")
                    data = buffer.getvalue()
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise UserInputError(f"{file}: image does not decode ({exc})") from None
        found.append(LabelledImage(data, int(labels[int(index)]), str(file)))
    return found
