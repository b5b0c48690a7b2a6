"""Labelled datasets for calibration and accuracy: the built-in ``digits``, a class-per-folder
image directory, or an ``.npz`` with ``x`` and ``y`` (and ``synthetic[:N]``, random images for the
latency-only models). Each is split, by a fixed seed, into a
calibration half and an evaluation half; calibration never draws from the evaluation half."""

from __future__ import annotations

import hashlib
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from edgekit.errors import UserInputError
from edgekit.sources.preprocess import Preprocess, resample_filter

SPLIT_SEED = 20261130
log = logging.getLogger("edgekit")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}


@dataclass(frozen=True)
class Split:
    x: np.ndarray  # NCHW float32, already preprocessed for the model
    y: np.ndarray  # int64 class indices

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Dataset:
    name: str
    class_names: tuple[str, ...]
    calibration: Split
    evaluation: Split
    digest: str

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def load_dataset(spec: str, preprocess: Preprocess) -> Dataset:
    """``digits``, a directory of class folders, or an ``.npz`` file, preprocessed for a model."""
    if spec == "digits":
        images, labels, names = _digits()
    elif spec == "synthetic" or spec.startswith("synthetic:"):
        images, labels, names = _synthetic(spec, preprocess)
    else:
        path = Path(spec)
        if not path.exists():
            raise UserInputError(f"{spec}: dataset not found (use 'digits', a folder or an .npz)")
        if path.is_dir():
            images, labels, names = _image_folder(path, preprocess)
        elif path.suffix == ".npz":
            images, labels, names = _npz(path, preprocess)
        else:
            raise UserInputError(
                f"{spec}: not a dataset (expected a folder of class folders or .npz)"
            )
    if len(labels) < 2:
        raise UserInputError(f"{spec}: dataset has {len(labels)} image(s); at least 2 are needed")
    check_labels(spec, labels, names, preprocess)
    check_images(spec, images, preprocess, quiet=spec == "digits")
    try:
        x = preprocess.apply(images)
    except ValueError as exc:
        raise UserInputError(f"{spec}: images do not fit the model input ({exc})") from None
    y = labels.astype(np.int64)
    calibration, evaluation = split_indices(len(y))
    digest = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()
    return Dataset(
        name=spec,
        class_names=names,
        calibration=Split(x[calibration], y[calibration]),
        evaluation=Split(x[evaluation], y[evaluation]),
        digest=digest,
    )


def split_indices(count: int) -> tuple[np.ndarray, np.ndarray]:
    """The calibration and evaluation halves of a dataset of ``count`` images, by index (one
    seeded permutation: every command splits a dataset the same way)."""
    order = np.random.default_rng(SPLIT_SEED).permutation(count)
    half = count // 2
    return order[:half], order[half:]


def evaluation_indices(count: int) -> np.ndarray:
    """The images ``edgekit eval`` scores, by index into the dataset."""
    return split_indices(count)[1]


def stored_images(spec: str, preprocess: Preprocess) -> tuple[np.ndarray, np.ndarray]:
    """The digits' or an .npz's images as stored ((N, H, W, C) in [0, 1], not resized) and
    their labels, in the order ``load_dataset`` indexes them."""
    if spec == "digits":
        images, labels, _ = _digits()
    else:
        path = Path(spec)
        if path.suffix != ".npz" or not path.is_file():
            raise UserInputError(f"{spec}: dataset not found (use 'digits', a folder or an .npz)")
        images, labels, _ = _npz(path, preprocess)
    return images, labels


def folder_files(root: Path, pre: Preprocess) -> tuple[list[Path], np.ndarray]:
    """A folder of class folders as its image files and their class indices, in the order
    ``load_dataset`` indexes them (class folders sorted, files sorted within each)."""
    folders = sorted(entry for entry in root.iterdir() if entry.is_dir())
    if not folders:
        raise UserInputError(f"{root}: no class folders (expected {root}/<class name>/<image>)")
    names = tuple(folder.name for folder in folders)
    if set(names) <= set(pre.class_names):
        index_of = {name: pre.class_names.index(name) for name in names}
    elif any(not name.startswith("class_") for name in pre.class_names):
        unknown = sorted(set(names) - set(pre.class_names))
        raise UserInputError(
            f"{root}: class folder(s) {', '.join(unknown[:5])} are not classes of the model "
            f"({', '.join(pre.class_names[:10])}{'...' if pre.num_classes > 10 else ''})"
        )
    else:
        index_of = {name: position for position, name in enumerate(names)}
    files, labels = [], []
    for folder in folders:
        for file in sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES):
            files.append(file)
            labels.append(index_of[folder.name])
    if not files:
        raise UserInputError(f"{root}: the class folders hold no images ({', '.join(names[:5])})")
    return files, np.asarray(labels, np.int64)


def image_shape(spec: str) -> tuple[int, int, int] | None:
    """The (C, H, W) of a dataset's images as stored, read without loading them all (None for
    synthetic data, which takes the model's shape)."""
    if spec == "digits":
        return (1, 8, 8)
    path = Path(spec)
    if path.suffix == ".npz" and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as archive:
                shape = archive["x"].shape if "x" in archive.files else None
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return None  # load_dataset says what is wrong with the file
        if shape is None or len(shape) not in (3, 4):
            return None
        if len(shape) == 3:
            return (1, shape[1], shape[2])
        if shape[1] in (1, 3) and shape[-1] not in (1, 3):
            return (shape[1], shape[2], shape[3])
        return (shape[3], shape[1], shape[2])
    if path.is_dir():
        for file in sorted(path.glob("*/*")):
            if file.suffix.lower() in IMAGE_SUFFIXES:
                try:
                    with Image.open(file) as image:
                        width, height = image.size
                        return (1 if image.mode in ("L", "1", "I", "F") else 3, height, width)
                except (UnidentifiedImageError, OSError):
                    return None
    return None


def check_labels(spec: str, labels: np.ndarray, names: tuple[str, ...], pre: Preprocess) -> None:
    if len(names) != pre.num_classes:
        raise UserInputError(
            f"{spec}: dataset has {len(names)} classes but the model has {pre.num_classes}"
        )
    if labels.min() < 0 or labels.max() >= pre.num_classes:
        raise UserInputError(
            f"{spec}: labels out of range: found {int(labels.min())}..{int(labels.max())}, "
            f"the model has classes 0..{pre.num_classes - 1}"
        )


def check_images(spec: str, images: np.ndarray, pre: Preprocess, *, quiet: bool = False) -> None:
    """(N, H, W, C) images against the model: NaN/inf is an error naming the data; a channel
    count that cannot be converted is an error; a resize or a grey/RGB conversion is a warning
    (built-in datasets are resized by design and stay quiet)."""
    finite = np.isfinite(images)
    if not finite.all():
        bad = int(np.size(finite) - np.count_nonzero(finite))
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise UserInputError(
            f"{spec}: the images hold {bad} NaN or infinite value(s) (first at index {first}); "
            "fix the data, the model is not at fault"
        )
    have = images.shape[-1]
    if have != pre.channels and not {have, pre.channels} <= {1, 3}:
        raise UserInputError(
            f"{spec}: images have {have} channel(s), the model takes {pre.channels}; edgekit "
            "converts only between grey (1) and RGB (3)"
        )
    if quiet:
        return
    if have != pre.channels:
        how = "replicated to RGB" if have == 1 else "converted to grey (luma)"
        log.warning(f"{spec}: {have}-channel images {how} for a {pre.channels}-channel model")
    size = tuple(images.shape[1:3])
    if size != tuple(pre.input_size):
        factor = max(pre.input_size[0] / size[0], pre.input_size[1] / size[1])
        log.warning(
            f"{spec}: images resized from {size[0]}x{size[1]} to "
            f"{pre.input_size[0]}x{pre.input_size[1]} ({pre.resample}, x{factor:.2g}) for the model"
        )


def _digits() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """scikit-learn's digits as its ``load_digits`` gives them: 1797 8x8 images (0..16)."""
    table = _digits_table()
    images = (table[:, :-1].reshape(-1, 8, 8).astype(np.float32) / 16.0)[..., None]
    return images, table[:, -1].astype(np.int64), tuple(str(digit) for digit in range(10))


def _digits_table() -> np.ndarray:
    """The rows of scikit-learn's ``digits.csv.gz`` (64 pixels, then the label), read where the
    package ships it and as its ``load_digits`` reads it, without importing scikit-learn: that
    import (its estimators, the parts of scipy they use) was most of an ``edgekit export``'s
    start, for a 120 KB table (benchmarks/startup.py times the commands). Where the file is not
    there (another layout of the package), through ``load_digits`` itself."""
    import gzip
    from importlib.util import find_spec

    spec = find_spec("sklearn")  # finds a top-level package without importing it
    folders = list(spec.submodule_search_locations or []) if spec else []
    shipped = Path(folders[0], "datasets", "data", "digits.csv.gz") if folders else None
    if shipped is not None and shipped.is_file():
        with gzip.open(shipped) as rows:
            return np.loadtxt(rows, delimiter=",")
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return np.column_stack([bunch.data, bunch.target])


def _synthetic(spec: str, pre: Preprocess) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Seeded smooth random images with random labels: calibration and validation data for the
    latency-only zoo models (random weights), never an accuracy figure."""
    count_text = spec.partition(":")[2] or "64"
    if not count_text.isdigit() or int(count_text) < 2:
        raise UserInputError(f"{spec}: expected synthetic or synthetic:N with N >= 2")
    count = int(count_text)
    rng = np.random.default_rng(SPLIT_SEED)
    height, width = pre.input_size
    coarse = rng.random((count, max(2, height // 8), max(2, width // 8), pre.channels)).astype(
        np.float32
    )
    from edgekit.sources.preprocess import resize_images

    images = np.clip(resize_images(coarse, (height, width)), 0.0, 1.0)
    labels = rng.integers(0, pre.num_classes, count)
    return images, labels, pre.class_names


def _image_folder(root: Path, pre: Preprocess) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    files, labels = folder_files(root, pre)
    names = tuple(folder.name for folder in sorted(e for e in root.iterdir() if e.is_dir()))
    if set(names) <= set(pre.class_names):
        names = pre.class_names
    height, width = pre.input_size
    method = resample_filter(pre.resample)  # the model's own filter (a preprocessor config's)
    images = []
    for file in files:
        try:
            with Image.open(file) as image:
                mode = "L" if pre.channels == 1 else "RGB"
                image = image.convert(mode).resize((width, height), method)
                array = np.asarray(image, np.float32) / 255.0
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise UserInputError(f"{file}: image does not decode ({exc})") from None
        images.append(array.reshape(height, width, pre.channels))
    return np.stack(images), labels, names


def _npz(path: Path, pre: Preprocess) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in ("x", "y") if key not in archive.files]
            if missing:
                raise UserInputError(
                    f"{path}: .npz has no '{missing[0]}' array (it needs 'x' images and 'y' labels;"
                    f" found {', '.join(archive.files) or 'nothing'})"
                )
            x, y = archive["x"], archive["y"]
            names = (
                tuple(str(n) for n in archive["class_names"]) if "class_names" in archive else None
            )
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UserInputError(f"{path}: not a readable .npz file ({exc})") from None
    if y.ndim != 1 or x.ndim not in (3, 4) or len(x) != len(y) or 0 in x.shape[1:]:
        raise UserInputError(
            f"{path}: expected x of shape (N,H,W[,C]) and y of shape (N,), "
            f"got {x.shape} and {y.shape}"
        )
    if not np.issubdtype(y.dtype, np.integer):
        raise UserInputError(f"{path}: labels 'y' must be integers, got {y.dtype}")
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise UserInputError(f"{path}: images 'x' must be numbers, got {x.dtype}")
    if x.ndim == 3:
        x = x[..., None]
    elif x.shape[1] in (1, 3) and x.shape[-1] not in (1, 3):
        x = x.transpose(0, 2, 3, 1)  # NCHW -> NHWC
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    if names is None:
        names = pre.class_names
    return x, y.astype(np.int64), names
