"""``edgekit golden``: a bundle an app team proves its code against. Made here from the user's
labelled images, it passes ``--check`` on the host and the emulated ARM64 core for every
target's int8 file and for a Hugging Face folder with its own preprocessing; it states that
preprocessing in an app developer's words; an artifact whose input contract changed fails it;
an edited bundle is refused by digest; and a bundle is written whole or not at all. A phone's
check is tests/test_golden_android.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli, run_cli_captured
from PIL import Image

from edgekit.devices.arm64_emu.emulator import device_ready

TARGETS = ("tflite", "executorch", "onnx")
# a save_pretrained folder's own preprocessing: bicubic (Pillow's 3), its mean and std
PROCESSOR = {"size": {"height": 32, "width": 32}, "resample": 3, "image_mean": [0.3, 0.4, 0.5],
             "image_std": [0.2, 0.25, 0.3]}  # fmt: skip
PETS = ("cat", "dog", "frog")
needs_guest = pytest.mark.skipif(
    not device_ready(), reason="arm64-emu is not set up (edgekit device setup arm64-emu)"
)


def _golden(capsys, *args: str, code: int = 0):
    result = run_cli(capsys, "golden", *args)
    assert result.code == code, result.err or result.out
    return result


def _spec(bundle: Path) -> dict:
    return json.loads((bundle / "spec.json").read_text())


@pytest.fixture(scope="module")
def digits_bundles(tmp_path_factory):
    """One bundle per target's int8 file of the default model, the ARM64 guest's spread in its
    tolerance where the guest is set up."""
    return tmp_path_factory.mktemp("bundles")


@pytest.mark.arm64
@needs_guest
@pytest.mark.parametrize("target", TARGETS)
def test_a_bundle_made_here_passes_on_the_host_and_the_arm64_guest(
    capsys, export_digits, digits_bundles, target
):
    artifact = export_digits(target, "int8")
    bundle = digits_bundles / target
    made = _golden(capsys, str(artifact.path), "-o", str(bundle), "--spread-on", "arm64-emu")
    assert f"wrote {bundle}" in made.out.replace("\n", "")
    spec = _spec(bundle)
    assert len(spec["images"]) == 16 and spec["artifact"]["sha256"] == artifact.manifest.file.sha256
    assert "arm64-emu" in spec["tolerance"]["logits"]["measured"]
    # the stage-3 tensors are what the file takes: its dtype and shape, from the stage-2 pixels
    given = artifact.manifest.input
    first = np.load(bundle / spec["images"][0]["stage3"])
    assert first.dtype == np.dtype(given.dtype) and list(first.shape) == given.shape
    assert (bundle / spec["images"][0]["stage3_raw"]).read_bytes() == first.tobytes()
    rgb = np.load(bundle / spec["images"][0]["stage2"])
    assert rgb.dtype == np.uint8 and rgb.shape[-1] == 3
    with Image.open(bundle / spec["images"][0]["stage1"]) as png:
        assert np.array_equal(np.asarray(png.convert("RGB")), rgb)
    # the least sure images come first: half the bundle, none surer than the rest's least sure
    margins = [image["top2_margin"] for image in spec["images"]]
    assert max(margins[:8]) <= min(margins[8:])
    for device in ("cpu", "arm64-emu"):
        checked = json.loads(_golden(capsys, "--check", str(bundle), "--device", device,
                                     "--json").out)  # fmt: skip
        assert checked["passed"] and checked["inputs_match"] and checked["device"] == device


@pytest.mark.arm64
@needs_guest
@pytest.mark.parametrize("target", TARGETS)
def test_the_bundles_runner_runs_as_it_is_on_the_arm64_guest(
    capsys, export_digits, tmp_path, target
):
    from edgekit.devices.arm64_emu.emulator import DEFAULT_CPU, emulated, load_device, userland_for
    from edgekit.targets import get_target

    bundle = tmp_path / "bundle"
    _golden(capsys, str(export_digits(target, "int8").path), "-o", str(bundle), "--count", "4",
            "--spread-on", "")  # fmt: skip
    (runner,) = (bundle / "runners").glob("run_*.py")
    land = userland_for(get_target(target).guest_modules)
    assert land is not None, f"arm64-emu has no userland for {target}"
    # the guest's own Python with numpy and the runtime only: exit 0 is the runner's PASS
    printed = emulated(load_device(), land, DEFAULT_CPU, [str(runner), str(bundle)])
    assert printed.strip().splitlines()[-1].startswith("PASS")


@pytest.fixture(scope="module")
def pets_bundle(tmp_path_factory) -> Path:
    """A save_pretrained ViT folder (its own mean, std and bicubic resize) exported to onnx int8
    and bundled from the user's 40x40 colour PNGs; the ARM64 guest's spread in its tolerance
    where the guest is set up."""
    import hf_models

    root = tmp_path_factory.mktemp("pets")
    hf_models.save_vit_folder(root / "pets-vit", PETS, PROCESSOR)
    images = str(hf_models.save_colour_images(root / "images", PETS, per_class=3, seed=3))
    model, out = str(root / "pets-vit"), str(root / "out")
    exported = run_cli_captured("export", "--model", model, "--data", images, "--target", "onnx",
                                "--recipe", "int8", "-o", out)  # fmt: skip
    assert exported.code == 0, exported.err
    (artifact,) = (root / "out").glob("*.onnx")
    spread = "arm64-emu" if device_ready() else ""
    made = run_cli_captured("golden", str(artifact), "-o", str(root / "bundle"), "--data", images,
                            "--count", "6", "--spread-on", spread)  # fmt: skip
    assert made.code == 0, made.err
    return root / "bundle"


def test_the_bundle_says_the_preprocessing_in_an_app_developers_words(capsys, pets_bundle):
    words = _spec(pets_bundle)["preprocessing"]
    assert words["channel_order"] == "RGB" and words["resize"]["filter"] == "bicubic"
    assert words["mean"] == PROCESSOR["image_mean"] and words["std"] == PROCESSOR["image_std"]
    assert "with Pillow's bicubic filter" in (pets_bundle / "README.md").read_text()
    # the user's images as they were: 40x40 PNGs, resized by the steps, not before
    assert np.load(pets_bundle / "stage2" / "000.npy").shape == (40, 40, 3)
    assert _golden(capsys, "--check", str(pets_bundle)).code == 0


@pytest.mark.arm64
@needs_guest
def test_a_hugging_face_folders_bundle_passes_on_the_arm64_guest(capsys, pets_bundle):
    checked = json.loads(_golden(capsys, "--check", str(pets_bundle), "--device", "arm64-emu",
                                 "--json").out)  # fmt: skip
    assert checked["passed"] and checked["inputs_match"]


def test_an_artifact_whose_input_contract_changed_fails_the_bundle(capsys, export_digits, tmp_path):
    float_io = export_digits("tflite", "int8")
    int8_io = export_digits("tflite", "int8", io="int8")
    bundle = tmp_path / "bundle"
    _golden(capsys, str(float_io.path), "-o", str(bundle), "--count", "4", "--spread-on", "")
    failed = _golden(capsys, "--check", str(bundle), str(int8_io.path), code=1)
    assert "FAIL" in failed.out and "the artifact takes int8" in failed.out
    assert "not the file the bundle was made from" in failed.out


def test_an_edited_bundle_is_refused_by_digest(capsys, export_digits, tmp_path):
    bundle = tmp_path / "bundle"
    _golden(capsys, str(export_digits("onnx", "int8").path), "-o", str(bundle), "--count", "4",
            "--spread-on", "")  # fmt: skip
    tensor = bundle / "stage3" / "001.npy"
    edited = np.load(tensor)
    edited.flat[0] += 1
    np.save(tensor, edited)
    refused = _golden(capsys, "--check", str(bundle), code=2)
    assert f"{tensor}: its sha256 differs from SHA256SUMS" in refused.err
    assert len(refused.err.strip().splitlines()) == 1


def test_a_bundle_is_written_whole_or_not_at_all(capsys, export_digits, tmp_path):
    artifact = str(export_digits("onnx", "int8").path)
    # bad data: one line naming it, and no folder
    refused = _golden(capsys, artifact, "-o", str(tmp_path / "b"), "--data", "synthetic:8", code=2)
    assert "synthetic:8: golden vectors need real labelled images" in refused.err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # a folder that is not a bundle is never overwritten
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    refused = _golden(capsys, artifact, "-o", str(tmp_path / "notes"), "--count", "2",
                      "--spread-on", "", code=2)  # fmt: skip
    assert "exists and is not a golden bundle" in refused.err
    assert (tmp_path / "notes" / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]  # no staging folder left


def test_the_api_writes_the_files_the_cli_writes(capsys, export_digits, tmp_path):
    from edgekit import check_bundle, make_bundle

    artifact = export_digits("tflite", "int8")
    _golden(capsys, str(artifact.path), "-o", str(tmp_path / "cli"), "--count", "4",
            "--spread-on", "")  # fmt: skip
    bundle = make_bundle(artifact, tmp_path / "api", count=4, spread_on=())

    def files(root: Path) -> dict[str, bytes]:
        made = ("spec.json", "README.md", "SHA256SUMS")  # they carry the time it was made
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and p.name not in made}  # fmt: skip

    assert files(tmp_path / "cli") == files(bundle.root)
    cli_spec, api_spec = _spec(tmp_path / "cli"), _spec(bundle.root)
    for spec in (cli_spec, api_spec):
        spec.pop("made")
    assert cli_spec == api_spec
    assert check_bundle(bundle).passed
