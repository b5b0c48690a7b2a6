"""``edgekit golden --verify BUNDLE OUTPUTS``: outputs an app wrote for a bundle's images pass
when they are right, and when they are not, the usual mistake they come from is named.

The app here is the test's own code: numpy and Pillow following ``spec.json``'s words from the
stage-1 PNGs, and the format's runtime called directly (LiteRT, onnxruntime); each mistake is
made on purpose in that code. A three-channel Hugging Face folder (its own mean, std and
bicubic resize, images of another size) shows BGR and the layout swap; the default digits
model, grey and with an int8 output, shows the rest. Outputs of the wrong shape and an edited
bundle are bad input: one line, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import hf_models
import numpy as np
import pytest
from cli_helpers import run_cli, run_cli_captured
from PIL import Image

# the folder's image processor: bicubic (Pillow's 3) and its own mean and std
PROCESSOR = {"size": {"height": 32, "width": 32}, "resample": 3, "image_mean": [0.3, 0.4, 0.5],
             "image_std": [0.2, 0.25, 0.3]}  # fmt: skip
PETS = ("cat", "dog", "frog")


def _made(*args: str) -> None:
    result = run_cli_captured(*args)
    assert result.code == 0, result.err[-3000:] or result.out[-3000:]


@pytest.fixture(scope="module")
def digits_bundle(export_digits, tmp_path_factory) -> Path:
    """The default model's full-integer tflite file (int8 in, int8 out), bundled."""
    artifact = export_digits("tflite", "int8", io="int8")
    bundle = tmp_path_factory.mktemp("digits") / "bundle"
    _made("golden", str(artifact.path), "-o", str(bundle), "--spread-on", "")
    return bundle


@pytest.fixture(scope="module")
def pets_bundle(tmp_path_factory) -> Path:
    """A save_pretrained ViT folder's int8 onnx file (NCHW, float in and out), bundled from the
    user's colour PNGs of 40x40, one folder per class."""
    root = tmp_path_factory.mktemp("pets")
    hf_models.save_vit_folder(root / "pets-vit", PETS, PROCESSOR)
    hf_models.save_colour_images(root / "images", PETS, per_class=8, seed=2)
    images, out = str(root / "images"), root / "out"
    _made("export", "--model", str(root / "pets-vit"), "--data", images, "--target", "onnx",
          "--recipe", "int8", "-o", str(out))  # fmt: skip
    (artifact,) = out.glob("*.onnx")
    _made("golden", str(artifact), "-o", str(root / "bundle"), "--data", images, "--spread-on", "")
    return root / "bundle"


def _spec(bundle: Path) -> dict:
    return json.loads((bundle / "spec.json").read_text())


def app_tensor(
    bundle: Path,
    index: int,
    *,
    bgr: bool = False,
    no_mean_std: bool = False,
    twice: bool = False,
    resample: str | None = None,
    other_layout: bool = False,
) -> np.ndarray:
    """Image ``index``'s input tensor as an app makes it from its PNG with ``spec.json``'s
    steps (each keyword a mistake made on purpose)."""
    spec = _spec(bundle)
    words, given = spec["preprocessing"], spec["artifact"]["input"]
    with Image.open(bundle / spec["images"][index]["stage1"]) as png:
        pixels = np.asarray(png.convert("RGB"), np.float32)
    if bgr:
        pixels = pixels[..., ::-1]
    image = pixels / np.float32(255)
    if twice:
        image = image / np.float32(255)
    if words["channel_order"] == "grey":  # 0.299 R + 0.587 G + 0.114 B
        red, green, blue = image[..., 0], image[..., 1], image[..., 2]
        grey = np.float32(0.299) * red + np.float32(0.587) * green + np.float32(0.114) * blue
        image = grey[..., None]
    size = (words["resize"]["width"], words["resize"]["height"])
    method = Image.Resampling[(resample or words["resize"]["filter"]).upper()]
    planes = [
        Image.fromarray(np.ascontiguousarray(image[..., c]), mode="F").resize(size, method)
        for c in range(image.shape[-1])
    ]
    image = np.stack([np.asarray(plane) for plane in planes], axis=-1) * np.float32(words["scale"])
    if not no_mean_std:
        image = (image - np.float32(words["mean"])) / np.float32(words["std"])
    layout = given["layout"]
    if other_layout:
        layout = "NCHW" if layout == "NHWC" else "NHWC"
    ordered = image if layout == "NHWC" else image.transpose(2, 0, 1)
    x = np.ascontiguousarray(ordered).reshape(given["shape"])  # read in the model's shape
    quant = given["quantization"]
    if quant:
        info = np.iinfo(given["dtype"])
        scaled = x / np.float32(quant["scale"])
        rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + quant["zero_point"]
        x = np.clip(rounded, info.min, info.max)
    return np.ascontiguousarray(x, given["dtype"])


def app_outputs(bundle: Path, **mistake: object) -> list[np.ndarray]:
    """The artifact's raw output tensor for each image, through its runtime called directly."""
    spec = _spec(bundle)
    path = str(bundle / "artifact" / spec["artifact"]["file"])
    tensors = [app_tensor(bundle, index, **mistake) for index in range(len(spec["images"]))]
    if path.endswith(".onnx"):
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return [session.run(None, {name: tensor})[0] for tensor in tensors]
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path, num_threads=1)
    interpreter.allocate_tensors()
    given, returned = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    found = []
    for tensor in tensors:
        interpreter.set_tensor(given["index"], tensor)
        interpreter.invoke()
        found.append(interpreter.get_tensor(returned["index"]).copy())
    return found


def app_logits(bundle: Path, raw: list[np.ndarray]) -> np.ndarray:
    """The raw outputs as logits, dequantized as ``spec.json`` says."""
    quant = _spec(bundle)["artifact"]["output"]["quantization"]
    values = np.concatenate(raw).astype(np.float32)
    if quant:
        values = (values - quant["zero_point"]) * np.float32(quant["scale"])
    return values


def _verify(capsys, bundle: Path, outputs: Path):
    return run_cli(capsys, "golden", "--verify", str(bundle), str(outputs))


@pytest.mark.parametrize("model", ["digits", "pets"])
def test_right_outputs_pass(capsys, request, tmp_path, model):
    bundle = request.getfixturevalue(f"{model}_bundle")
    # the bundle's own expected logits
    passed = _verify(capsys, bundle, bundle / "expected" / "logits.npy")
    assert passed.code == 0, passed.out + passed.err
    assert passed.out.startswith("PASS your outputs match the expected outputs")
    # the app's own preprocessing and runtime: one .npy of logits, and a folder of raw tensors
    raw = app_outputs(bundle)
    np.save(tmp_path / "logits.npy", app_logits(bundle, raw))
    (tmp_path / "raw").mkdir()
    for index, tensor in enumerate(raw):
        np.save(tmp_path / "raw" / f"{index:03d}.npy", tensor)
    for outputs in (tmp_path / "logits.npy", tmp_path / "raw"):
        result = _verify(capsys, bundle, outputs)
        assert result.code == 0, result.out + result.err
        assert "PASS" in result.out


MISTAKES = [
    ("pets", {"bgr": True}, "the artifact fed BGR images (agreement 1.00); swap the channels"),
    ("pets", {"other_layout": True}, "the artifact fed NHWC bytes where it takes NCHW"),
    ("pets", {"resample": "nearest"}, "images resized with Pillow's nearest filter"),
    ("digits", {"no_mean_std": True}, "the artifact fed images without the mean and std"),
    ("digits", {"twice": True}, "the artifact fed images divided by 255 twice"),
    ("digits", {"resample": "bicubic"}, "images resized with Pillow's bicubic filter"),
    ("digits", {"unscaled": True}, "the raw int8 output read without its scale"),
]


@pytest.mark.parametrize(("model", "mistake", "named"), MISTAKES)
def test_each_usual_mistake_is_named(capsys, request, tmp_path, model, mistake, named):
    bundle, mistake = request.getfixturevalue(f"{model}_bundle"), dict(mistake)
    if mistake.pop("unscaled", False):  # the int8 tensor's integers taken as the logits
        outputs = np.concatenate(app_outputs(bundle)).astype(np.float32)
    else:
        outputs = app_logits(bundle, app_outputs(bundle, **mistake))
    np.save(tmp_path / "outputs.npy", outputs)
    result = _verify(capsys, bundle, tmp_path / "outputs.npy")
    assert result.code == 1, result.out + result.err
    summary = result.out.splitlines()[0]
    assert summary.startswith("FAIL your outputs match ") and named in summary, result.out
    assert named in result.err  # the one line of the failure
    if model == "digits":  # grey images on a one-channel model: two mistakes change nothing
        assert "the artifact fed BGR images: the bundle's images are grey" in result.out
        assert "one channel: NCHW and NHWC hold the same bytes" in result.out
    else:
        assert "the output is float32: there is no scale to leave out" in result.out


def test_outputs_that_match_no_mistake_clearly_name_none(capsys, pets_bundle, tmp_path):
    rng = np.random.default_rng(0)
    expected = np.load(pets_bundle / "expected" / "logits.npy")
    np.save(tmp_path / "noise.npy", rng.normal(size=expected.shape).astype(np.float32))
    result = run_cli(capsys, "golden", "--verify", str(pets_bundle), str(tmp_path / "noise.npy"),
                     "--json")  # fmt: skip
    assert result.code == 1
    verdict = json.loads(result.out)
    assert not verdict["passed"] and verdict["mistake"] is None
    assert "match none of the usual mistakes clearly (closest: " in verdict["summary"]
    assert len(verdict["tried"]) == 9  # BGR, mean/std, /255, layout, five other filters
    distances = [match["mean_abs_diff"] for match in verdict["tried"]]
    assert distances == sorted(distances)


def test_outputs_of_the_wrong_shape_name_the_shape_expected(capsys, digits_bundle, tmp_path):
    expected = np.load(digits_bundle / "expected" / "logits.npy")
    np.save(tmp_path / "short.npy", expected[:-1])
    result = _verify(capsys, digits_bundle, tmp_path / "short.npy")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"edgekit: error: {tmp_path / 'short.npy'}: outputs of shape [15, 10]; expected "
        "[16, 10] (one row of 10 logits per image of the bundle)"
    ]
    (tmp_path / "each").mkdir()
    for index, row in enumerate(expected):
        np.save(tmp_path / "each" / f"{index:03d}.npy", row if index != 3 else row[:5])
    result = _verify(capsys, digits_bundle, tmp_path / "each")
    assert result.code == 2
    assert f"{tmp_path / 'each' / '003.npy'}: outputs of shape [5]; expected [1, 10]" in result.err
    (tmp_path / "broken.npy").write_bytes(b"not numpy")
    result = _verify(capsys, digits_bundle, tmp_path / "broken.npy")
    assert result.code == 2 and "broken.npy: not a readable .npy file" in result.err


def test_an_edited_bundle_is_refused_by_digest(capsys, digits_bundle, tmp_path):
    edited = tmp_path / "bundle"
    shutil.copytree(digits_bundle, edited)
    logits = np.load(edited / "expected" / "logits.npy")
    np.save(edited / "expected" / "logits.npy", logits + 1.0)  # the app team "fixed" it
    result = _verify(capsys, edited, edited / "expected" / "logits.npy")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"edgekit: error: {edited / 'expected' / 'logits.npy'}: its sha256 differs from "
        "SHA256SUMS (the bundle was edited)"
    ]


def test_a_mistake_is_named_outside_the_tolerance_when_it_is_clearly_the_closest(
    capsys, pets_bundle, tmp_path
):
    """An app's runtime rounds a little differently (another CPU, more threads): its BGR
    outputs are outside the bundle's tolerance of every candidate, yet far closer to BGR's."""
    outputs = app_logits(pets_bundle, app_outputs(pets_bundle, bgr=True))
    wobble = np.random.default_rng(1).uniform(-0.01, 0.01, outputs.shape).astype(np.float32)
    np.save(tmp_path / "outputs.npy", outputs + wobble)
    result = run_cli(capsys, "golden", "--verify", str(pets_bundle), str(tmp_path / "outputs.npy"),
                     "--json")  # fmt: skip
    assert result.code == 1
    verdict = json.loads(result.out)
    assert verdict["mistake"]["key"] == "bgr" and not verdict["mistake"]["within_atol"]
    assert verdict["summary"].startswith("your outputs match the artifact fed BGR images")
