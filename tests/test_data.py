"""Datasets: the built-in digits, a class-per-folder directory and an .npz, with their splits,
and each way such input can be wrong."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from edgekit.errors import UserInputError
from edgekit.sources.data import load_dataset
from edgekit.sources.preprocess import Preprocess

DIGITS_PRE = Preprocess((32, 32), 1, (0.5,), (0.5,), tuple(str(d) for d in range(10)))
RGB_PRE = Preprocess((16, 16), 3, (0.5,) * 3, (0.25,) * 3, ("cat", "dog"))


def test_digits_is_split_into_fixed_disjoint_halves():
    data = load_dataset("digits", DIGITS_PRE)
    assert (len(data.calibration), len(data.evaluation)) == (898, 899)
    assert data.calibration.x.shape[1:] == (1, 32, 32)
    assert data.calibration.x.dtype == np.float32
    # normalised with mean 0.5, std 0.5: pixels in [0, 1] land in [-1, 1]
    assert data.evaluation.x.min() == pytest.approx(-1.0) and data.evaluation.x.max() <= 1.0
    again = load_dataset("digits", DIGITS_PRE)
    assert again.digest == data.digest
    np.testing.assert_array_equal(again.evaluation.y, data.evaluation.y)
    rows = {row.tobytes() for row in data.calibration.x}
    assert not any(row.tobytes() in rows for row in data.evaluation.x)
    assert set(np.unique(data.evaluation.y)) == set(range(10))


def test_digits_are_scikit_learns_read_without_importing_it():
    """The rows of the file scikit-learn ships, as its load_digits gives them, read in a process
    that never imports scikit-learn (its import was most of an export's start)."""
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    from edgekit.sources.data import _digits_table

    table, bunch = _digits_table(), load_digits()
    np.testing.assert_array_equal(table[:, :-1], bunch.data)
    np.testing.assert_array_equal(table[:, -1], bunch.target)
    script = (
        "import sys\n"
        "from edgekit.sources.data import load_dataset\n"
        "from edgekit.sources.preprocess import Preprocess\n"
        "pre = Preprocess((32, 32), 1, (0.5,), (0.5,), tuple(str(d) for d in range(10)))\n"
        "print(len(load_dataset('digits', pre).evaluation), 'sklearn' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["899", "False"], done.stderr[-2000:]


def _write_folder(root, classes=("cat", "dog"), per_class=3, size=(20, 24)):
    rng = np.random.default_rng(0)
    for name in classes:
        (root / name).mkdir(parents=True)
        for index in range(per_class):
            pixels = rng.integers(0, 255, (*size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{index}.png")
    return root


def test_image_folder_is_resized_and_labelled_by_class_name(tmp_path):
    data = load_dataset(str(_write_folder(tmp_path / "pets")), RGB_PRE)
    assert data.class_names == ("cat", "dog")
    assert len(data.calibration) + len(data.evaluation) == 6
    assert data.evaluation.x.shape[1:] == (3, 16, 16)
    labels = np.concatenate([data.calibration.y, data.evaluation.y])
    assert sorted(labels.tolist()) == [0, 0, 0, 1, 1, 1]


def _rows_columns_white(scale: float) -> np.ndarray:
    """A 16x16 RGB picture that tells rows from columns: red counts rows, green counts
    columns, blue is full, in units of ``scale`` (HWC)."""
    rows, columns = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    return np.stack([rows * 10 * scale, columns * 10 * scale, np.full((16, 16), 255 * scale)], -1)


def _normalised(picture_hwc: np.ndarray) -> np.ndarray:
    """What RGB_PRE makes of a [0, 1] HWC picture: CHW, (x - 0.5) / 0.25."""
    return ((picture_hwc - 0.5) / 0.25).transpose(2, 0, 1).astype(np.float32)


def test_npz_with_uint8_nhwc_images(tmp_path):
    path = tmp_path / "set.npz"
    picture = _rows_columns_white(1.0).astype(np.uint8)  # 0-255
    np.savez(path, x=np.stack([picture] * 6), y=np.array([0, 1] * 3))
    data = load_dataset(str(path), RGB_PRE)
    assert len(data.calibration) == 3 and data.evaluation.x.shape[1:] == (3, 16, 16)
    # uint8 is read as 0-255, channels last become channels first, rows stay rows
    np.testing.assert_allclose(data.evaluation.x[0], _normalised(picture / 255.0), atol=1e-6)


def test_npz_of_grey_images_without_a_channel_axis(tmp_path):
    path = tmp_path / "set.npz"
    np.savez(path, x=np.full((10, 32, 32), 255, np.uint8), y=np.arange(10) % 10)
    data = load_dataset(str(path), DIGITS_PRE)
    assert data.evaluation.x.shape[1:] == (1, 32, 32) and len(data.calibration) == 5
    np.testing.assert_allclose(data.evaluation.x, 1.0)  # white, (1 - 0.5) / 0.5


def test_npz_with_nchw_float_images(tmp_path):
    path = tmp_path / "set.npz"
    picture = _rows_columns_white(1 / 255)  # already 0-1, HWC
    x = np.stack([picture.transpose(2, 0, 1)] * 6).astype(np.float32)  # NCHW
    np.savez(path, x=x, y=np.array([0, 1, 0, 1, 0, 1]))
    data = load_dataset(str(path), RGB_PRE)
    assert data.evaluation.x.shape[1:] == (3, 16, 16)
    np.testing.assert_allclose(data.evaluation.x[0], _normalised(picture), atol=1e-6)


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserInputError, match=r"empty: no class folders"):
        load_dataset(str(tmp_path / "empty"), RGB_PRE)


def test_class_folders_without_images(tmp_path):
    (tmp_path / "d" / "cat").mkdir(parents=True)
    (tmp_path / "d" / "dog").mkdir(parents=True)
    with pytest.raises(UserInputError, match=r"the class folders hold no images"):
        load_dataset(str(tmp_path / "d"), RGB_PRE)


def test_mislabelled_folder(tmp_path):
    _write_folder(tmp_path / "d", classes=("cat", "horse"))
    with pytest.raises(
        UserInputError, match=r"class folder\(s\) horse are not classes of the model"
    ):
        load_dataset(str(tmp_path / "d"), RGB_PRE)


def test_image_that_does_not_decode(tmp_path):
    root = _write_folder(tmp_path / "d")
    (root / "dog" / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(UserInputError, match=r"broken.png: image does not decode"):
        load_dataset(str(root), RGB_PRE)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"images": np.zeros((4, 8, 8)), "y": np.zeros(4, int)}, r"has no 'x' array"),
        ({"x": np.zeros((4, 8, 8))}, r"has no 'y' array"),
        ({"x": np.zeros((4, 8, 8)), "y": np.zeros(3, int)}, r"expected x of shape"),
        (
            {"x": np.zeros((4, 8, 8)), "y": np.array([0, 1, 2, 12])},
            r"labels out of range: found 0..12",
        ),
        ({"x": np.zeros((4, 8, 8)), "y": np.zeros(4)}, r"labels 'y' must be integers"),
    ],
)
def test_bad_npz(tmp_path, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(UserInputError, match=message) as error:
        load_dataset(str(path), DIGITS_PRE)
    assert str(error.value).startswith(str(path))


def test_dataset_with_a_different_number_of_classes(tmp_path):
    path = tmp_path / "three.npz"
    np.savez(
        path, x=np.zeros((4, 8, 8)), y=np.array([0, 1, 2, 0]), class_names=np.array(["a", "b", "c"])
    )
    with pytest.raises(UserInputError, match=r"dataset has 3 classes but the model has 10"):
        load_dataset(str(path), DIGITS_PRE)


def test_not_a_dataset(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(UserInputError, match=r"notes.txt: not a dataset"):
        load_dataset(str(tmp_path / "notes.txt"), DIGITS_PRE)
    with pytest.raises(UserInputError, match=r"nowhere: dataset not found"):
        load_dataset("nowhere", DIGITS_PRE)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 broken")
    with pytest.raises(UserInputError, match=r"corrupt.npz: not a readable .npz"):
        load_dataset(str(corrupt), DIGITS_PRE)
