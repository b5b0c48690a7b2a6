"""A Hugging Face classifier as it comes, through the CLI as a user calls it.

A factory that returns ``ViTForImageClassification`` (``edgekit export --model hf_models:vit``)
exports to every target through its logits, named by its ``id2label``; a ``save_pretrained``
folder (``--model ./folder``) brings its own preprocessing, which the manifest keeps and ``eval``
applies to the user's own images; a folder edgekit cannot load is one line, exit 2; the
libraries' import chatter stays out of the output."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import hf_models
import numpy as np
import pytest
from cli_helpers import (
    CliResult,
    error_lines,
    plumbing_config,
    run_cli,
    run_cli_captured,
    run_edgekit,
)
from PIL import Image

TESTS = Path(__file__).parent
TARGETS = ("onnx", "tflite", "executorch")
# the folder's image processor: not transformers' defaults, so a test sees them applied
PROCESSOR = {"size": {"height": 32, "width": 32}, "resample": 3, "image_mean": [0.3, 0.4, 0.5],
             "image_std": [0.2, 0.25, 0.3]}  # fmt: skip
PETS = ("cat", "dog", "frog")


def _exported(result: CliResult) -> dict[tuple[str, str], dict]:
    assert result.code == 0, result.err[-3000:]
    payload = json.loads(result.out)
    assert not payload["unsupported"], payload["unsupported"]
    return {(m["target"], m["recipe"]): m for m in payload["artifacts"]}


@pytest.fixture(scope="module")
def cifar_npz(tmp_path_factory) -> str:
    """The user's own labelled images: 40 RGB 32x32 uint8, 4 of each of 10 classes."""
    rng = np.random.default_rng(1)
    coarse = rng.integers(0, 256, (40, 4, 4, 3)).astype(np.uint8)
    x = np.stack([np.asarray(Image.fromarray(c).resize((32, 32), Image.BILINEAR)) for c in coarse])
    path = tmp_path_factory.mktemp("npz") / "mine.npz"
    np.savez(path, x=x, y=np.repeat(np.arange(10), 4))
    return str(path)


@pytest.fixture(scope="module")
def vit_exports(cifar_npz, tmp_path_factory):
    """``edgekit export --model hf_models:vit`` to the three targets, fp32 and int8, once."""
    out = tmp_path_factory.mktemp("vit")
    result = run_cli_captured("export", "--model", "hf_models:vit", "--data", cifar_npz, "--target",
                  ",".join(TARGETS), "--recipe", "fp32,int8", "-o", str(out), "--json")  # fmt: skip
    return _exported(result), result.err


@pytest.fixture(scope="module")
def pets_folder(tmp_path_factory) -> Path:
    """A save_pretrained ViT folder (its own mean, std and bicubic resize) and, beside it, the
    user's images: PNGs of another size in one folder per class."""
    root = tmp_path_factory.mktemp("pets")
    hf_models.save_vit_folder(root / "pets-vit", PETS, PROCESSOR)
    hf_models.save_colour_images(root / "images", PETS, per_class=4, seed=2)
    return root


@pytest.fixture(scope="module")
def pets_exports(pets_folder):
    model, images, out = (str(pets_folder / name) for name in ("pets-vit", "images", "out"))
    result = run_cli_captured("export", "--model", model, "--data", images,
                              "--target", ",".join(TARGETS), "-o", out, "--json")  # fmt: skip
    return _exported(result), result.err


def test_a_vit_factory_exports_to_every_target_through_its_logits(vit_exports):
    exported, err = vit_exports
    assert set(exported) == {(t, r) for t in TARGETS for r in ("fp32", "int8")}
    for (target, recipe), manifest in exported.items():
        assert manifest["validation"]["passed"], (target, recipe, manifest["validation"])
        assert manifest["output"]["shape"] == [1, 10]
        assert manifest["class_names"] == list(hf_models.CIFAR10)  # its config's id2label
        noted = manifest["preprocessing"]["notes"]["huggingface"]
        assert noted["model"] == "ViTForImageClassification" and noted["output"] == "logits"
    assert "taken through its logits" in err
    assert "input shape 3,32,32 (C,H,W) from the model's config" in err


def test_beits_integer_position_index_is_not_observed_by_int8(capsys, cifar_npz, tmp_path):
    """PT2E's quantizers would put a histogram observer on the Long position index ("histogram_cpu"
    not implemented for 'Long'); edgekit keeps observers to float tensors."""
    result = run_cli(capsys, "export", "--model", "hf_models:beit", "--target", "tflite,executorch",
                     "--int8", "--data", cifar_npz, "-o", str(tmp_path))  # fmt: skip
    assert result.code == 0, result.err
    assert "histogram" not in result.err
    assert sorted(p.name for p in tmp_path.glob("*int8*[!n]")) == [
        "beit-int8.pte", "beit-int8.tflite"]  # fmt: skip


def test_swinv2s_position_bias_exports_int8_to_tflite(capsys, cifar_npz, tmp_path):
    """Its relative-position index is a constant the export lifts (no observer may read it) and
    its sigmoid's int8 output must sit at TFLite's fixed 1/256 ("LOGISTIC failed to prepare")."""
    result = run_cli(capsys, "export", "--model", "hf_models:swinv2", "--target", "tflite",
                     "--int8", "--data", cifar_npz, "-o", str(tmp_path))  # fmt: skip
    assert result.code == 0, result.err
    manifest = json.loads((tmp_path / "swinv2-int8.tflite.json").read_text())
    assert manifest["validation"]["passed"], manifest["validation"]


def test_a_folder_whose_classifier_has_no_logits_exports_through_its_one_field_of_their_shape(
    capsys, tmp_path
):
    folder = tmp_path / "pp_lcnet"
    hf_models.pp_lcnet().save_pretrained(folder)
    out = tmp_path / "out"
    result = run_cli(capsys, "export", "--model", str(folder), "--target", "onnx", "--data",
                     "synthetic:16", "--input-shape", "3,32,32", "-o", str(out))  # fmt: skip
    assert result.code == 0, result.err[-3000:]
    assert "PPLCNetForImageClassification taken through its last_hidden_state" in result.err
    manifest = json.loads((out / "pp_lcnet-fp32.onnx.json").read_text())
    assert manifest["preprocessing"]["notes"]["huggingface"]["output"] == "last_hidden_state"
    assert manifest["validation"]["passed"], manifest["validation"]


def test_a_classifier_that_takes_the_image_by_name_not_first_loads():
    """Perceiver's forward begins with ``inputs``; ImageGPT's, refused, with ``input_ids``."""
    from edgekit.sources.huggingface import load_folder

    with tempfile.TemporaryDirectory() as folder:
        source = load_folder(hf_models.save_perceiver_folder(Path(folder)), (3, 16, 16), quiet=True)
    assert source.notes[0].endswith("taken through its logits (forward(pixel_values=x).logits)")


def test_a_factorys_classifier_without_logits_is_probed_in_eval_mode_and_named():
    import torch

    from edgekit.sources.huggingface import as_classifier
    from edgekit.sources.load import load_model

    training = hf_models.pp_lcnet().train()
    norm = next(m for m in training.modules() if isinstance(m, torch.nn.BatchNorm2d))
    before = norm.running_mean.clone()
    wrapped, notes = as_classifier(
        training, {"channels": 3, "input_size": (32, 32)}, "f", quiet=True
    )
    assert torch.equal(norm.running_mean, before) and training.training  # left as it was
    assert (
        wrapped.taken == "last_hidden_state" and "taken through its last_hidden_state" in notes[0]
    )
    source = load_model("hf_models:pp_lcnet", input_shape=(3, 32, 32), quiet=True)
    assert source.preprocess.notes["huggingface"]["output"] == "last_hidden_state"


def test_a_save_pretrained_folder_keeps_its_preprocessing_in_the_manifest(pets_exports):
    exported, err = pets_exports
    assert set(exported) == {(t, "fp32") for t in TARGETS}
    for manifest in exported.values():
        pre = manifest["preprocessing"]
        assert pre["mean"] == PROCESSOR["image_mean"] and pre["std"] == PROCESSOR["image_std"]
        assert pre["resample"] == "bicubic" and pre["scale"] == 1.0
        assert pre["input_size"] == [32, 32] and manifest["class_names"] == list(PETS)
        assert manifest["source"]["spec"].endswith("pets-vit")
        assert any("channel order RGB" in line for line in pre["notes"]["huggingface"]["assumed"])
    assert "edgekit: warning:" in err and "channel order RGB" in err


@pytest.fixture(scope="module")
def their_own(pets_folder):
    """transformers' own image processor and model on the user's images, in edgekit's split
    order: -> (pixel_values, labels, the model's logits)."""
    import torch
    import transformers

    from edgekit.sources.data import SPLIT_SEED

    files = sorted((pets_folder / "images").glob("*/*.png"))  # edgekit reads them in this order
    labels = np.asarray([PETS.index(f.parent.name) for f in files])
    processor = transformers.ViTImageProcessorPil.from_pretrained(pets_folder / "pets-vit")
    pixels = processor([Image.open(f).convert("RGB") for f in files], return_tensors="np")
    order = np.random.default_rng(SPLIT_SEED).permutation(len(files))
    x = pixels["pixel_values"][order]
    model = transformers.ViTForImageClassification.from_pretrained(pets_folder / "pets-vit")
    with torch.no_grad():
        logits = model(pixel_values=torch.from_numpy(x)).logits.numpy()
    return x, labels[order], logits


def test_the_folders_images_become_what_its_own_image_processor_gives(
    pets_folder, pets_exports, their_own
):
    from edgekit.sources.data import load_dataset
    from edgekit.sources.preprocess import Preprocess

    manifest = next(iter(pets_exports[0].values()))
    pre = Preprocess.from_dict(manifest["preprocessing"])
    dataset = load_dataset(str(pets_folder / "images"), pre)
    ours = np.concatenate([dataset.calibration.x, dataset.evaluation.x])
    np.testing.assert_allclose(ours, their_own[0], atol=1e-5)  # bicubic, mean and std applied
    labels = np.concatenate([dataset.calibration.y, dataset.evaluation.y])
    assert list(labels) == list(their_own[1])


def test_the_folder_evaluates_on_an_image_folder_in_every_target(
    capsys, pets_folder, pets_exports, their_own
):
    exported, _ = pets_exports
    paths = [str(pets_folder / "out" / m["file"]["name"]) for m in exported.values()]
    result = run_cli(capsys, "eval", *paths, "--data", str(pets_folder / "images"), "--json")
    assert result.code == 0, result.err[-3000:]
    records = json.loads(result.out)
    _, labels, logits = their_own
    evaluation = slice(len(labels) // 2, None)  # the second half of the split is evaluated
    own_top1 = float(np.mean(logits[evaluation].argmax(1) == labels[evaluation]))
    assert len(records) == 3
    for record in records:
        assert record["samples"] == 6
        assert record["baseline_top1"] == pytest.approx(own_top1)  # the model on its own input
        assert record["agreement"] == 1.0 and record["drop_points"] == pytest.approx(0.0)


def test_the_folder_passes_an_accuracy_gate_on_the_users_images(capsys, pets_folder, pets_exports):
    exported, _ = pets_exports
    tflite = pets_folder / "out" / exported["tflite", "fp32"]["file"]["name"]
    result = run_cli(capsys, "check", str(tflite), "--data", str(pets_folder / "images"),
                     "--max-drop", "1")  # fmt: skip
    assert result.code == 0, result.err[-3000:]
    assert "PASS" in result.out and "FAIL" not in result.out, result.out


def test_run_measures_the_folder_with_its_preprocessing(capsys, pets_folder, tmp_path):
    """The whole job on the folder: its baseline child loads the folder again from the spec
    (plumbing: the noise guard is off, so the test runs beside others)."""
    result = run_cli(capsys, "run", "--config", str(plumbing_config(tmp_path)), "--model",
                     str(pets_folder / "pets-vit"), "--data", str(pets_folder / "images"),
                     "--target", "onnx", "--recipe", "fp32",
                     "--device", "cpu", "--no-profile", "--rounds", "3", "--min-runs", "5",
                     "--min-seconds", "0.05", "--runs-dir", str(tmp_path / "runs"), "--history",
                     str(tmp_path / "h.sqlite"), "--json")  # fmt: skip
    assert result.code == 0, result.err[-3000:]
    rows = json.loads((Path(json.loads(result.out)["run_dir"]) / "results.json").read_text())
    by_kind = {row["kind"]: row for row in rows["rows"]}
    assert by_kind["artifact"]["status"] == "ok" and by_kind["baseline"]["status"] == "ok"
    assert by_kind["artifact"]["accuracy"]["samples"] == 6


def _folder(tmp_path: Path, case: str) -> Path:
    folder = tmp_path / "model"
    hf_models.save_vit_folder(folder, PETS, PROCESSOR)
    if case == "no config.json":
        (folder / "config.json").unlink()
    elif case == "no weights":
        (folder / "model.safetensors").unlink()
    elif case == "unknown architecture":
        config = json.loads((folder / "config.json").read_text())
        config.update(architectures=["NoSuchNetForImageClassification"], model_type="nosuchnet")
        (folder / "config.json").write_text(json.dumps(config))
    elif case == "a token model":
        hf_models.save_imagegpt_folder(folder)
    return folder


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no config.json", "not a Hugging Face model folder: no config.json"),
        ("no weights", "no weights beside config.json"),
        ("unknown architecture", "names the architecture 'NoSuchNetForImageClassification'"),
        ("a token model", "ImageGPTForImageClassification does not take pixel_values"),
    ],
)
def test_a_folder_edgekit_cannot_load_is_one_line(case, message, capsys, tmp_path):
    folder = _folder(tmp_path, case)
    result = run_cli(capsys, "export", "--model", str(folder), "--target", "onnx", "-o",
                     str(tmp_path / "out"))  # fmt: skip
    errors = error_lines(result.err)
    assert result.code == 2, result.err[-2000:]
    assert len(errors) == 1 and message in errors[0] and str(folder) in errors[0], result.err
    assert "Traceback" not in result.err + result.out
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


NOISE = ("torchao", "pytree", "Failed to load", "deprecated", "FutureWarning")


def _eval_source(npz: str, *flags: str) -> subprocess.CompletedProcess:
    """A fresh process (the libraries say their piece on first import only)."""
    return run_edgekit(*flags, "eval", "--model", "hf_models:vit", "--data", npz, "--json",
                       env={"PYTHONPATH": str(TESTS)}, timeout=300)  # fmt: skip


def test_the_libraries_import_chatter_stays_out_unless_verbose(cifar_npz):
    quiet = _eval_source(cifar_npz)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert json.loads(quiet.stdout)["samples"] == 20
    assert not [w for w in NOISE if w in quiet.stderr], quiet.stderr
    loud = _eval_source(cifar_npz, "--verbose")
    assert loud.returncode == 0, loud.stderr[-2000:]
    assert [w for w in NOISE if w in loud.stderr], loud.stderr  # the filter is what hides it


def test_a_resample_filter_is_checked_and_old_manifests_read_as_bilinear():
    from edgekit.errors import UserInputError
    from edgekit.sources.preprocess import Preprocess

    old = {"input_size": [8, 8], "channels": 1, "mean": [0.0], "std": [1.0], "class_names": ["a"]}
    assert Preprocess.from_dict(old).resample == "bilinear"
    assert Preprocess.from_dict({**old, "resample": "bicubic"}).resample == "bicubic"
    with pytest.raises(UserInputError, match="'resample' must be one of nearest, bilinear"):
        Preprocess.from_dict({**old, "resample": "sinc"}, "m.json preprocessing")


def test_the_resample_filter_is_the_one_images_are_resized_with():
    from edgekit.sources.preprocess import Preprocess

    images = np.random.default_rng(3).random((1, 5, 5, 1)).astype(np.float32)
    pre = Preprocess((16, 16), 1, (0.0,), (1.0,), ("a", "b"))
    bilinear = pre.apply(images)
    nearest = Preprocess((16, 16), 1, (0.0,), (1.0,), ("a", "b"), resample="nearest").apply(images)
    assert set(np.unique(nearest)) <= set(np.unique(images))  # nearest invents no values
    assert not np.allclose(bilinear, nearest)
