"""``edgekit golden ARTIFACT -o BUNDLE``: the artifact, real labelled images at three stages,
the outputs the artifact gives them on the host, measured tolerances, the preprocessing in
words, runners for the format's own runtime, and digests, written as one folder that appears
only once it is complete."""

from __future__ import annotations

import datetime
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, as_artifact, manifest_path
from edgekit.devices import DEFAULT_DEVICE, SPREAD_DEVICES
from edgekit.errors import UserInputError
from edgekit.golden.bundle import BUNDLE_VERSION, SPEC, Bundle, publish, read_bundle, write_sums
from edgekit.golden.images import decoded_rgb, labelled_images, model_input, tensor_input
from edgekit.golden.readme import bundle_readme
from edgekit.golden.select import choose_images, top2_margins
from edgekit.golden.tolerance import measure_spread
from edgekit.golden.words import preprocessing_words
from edgekit.sources.preprocess import Preprocess

CANDIDATES = 512  # evaluation images the choice is made from
TOP_K = 5


def requantize(logits: np.ndarray, spec: Any) -> np.ndarray:
    """Dequantized logits back to the output tensor's integers (exact: dequantizing is affine
    and the integers are small)."""
    quant = spec.quantization
    if quant is None:
        return np.asarray(logits, np.dtype(spec.dtype))
    info = np.iinfo(np.dtype(spec.dtype))
    q = np.rint(np.asarray(logits, np.float64) / quant["scale"] + quant["zero_point"])
    return np.clip(q, info.min, info.max).astype(spec.dtype)


def bundle_preprocess(artifact: Artifact) -> Preprocess:
    """The artifact's preprocessing, or one line on why it has none to bundle."""
    if not artifact.classifier or artifact.manifest.preprocessing is None:
        raise UserInputError(
            f"{artifact.path}: golden vectors need an image classifier with its preprocessing "
            "(a foreign file: give --mean, --std and --classes)"
        )
    return Preprocess.from_dict(
        dict(artifact.manifest.preprocessing), str(manifest_path(artifact.path))
    )


def make_bundle(
    artifact: Artifact | str | Path,
    output: str | Path,
    *,
    data: str = "digits",
    count: int = 16,
    spread_on: tuple[str, ...] = SPREAD_DEVICES,
    say: Callable[[str], None] = lambda line: None,
) -> Bundle:
    """Write the golden bundle of ``artifact`` at ``output`` from ``count`` images of ``data``
    (its evaluation split), and return it as read back."""
    artifact = as_artifact(artifact)
    if count < 1:
        raise UserInputError(f"--count {count}: a bundle needs at least one image")
    pre = bundle_preprocess(artifact)
    given, returned = artifact.manifest.input, artifact.manifest.output
    say(f"reading {data}")
    candidates = labelled_images(data, pre, CANDIDATES)
    rgbs = [decoded_rgb(image.png) for image in candidates]
    samples = np.concatenate([model_input(rgb, pre) for rgb in rgbs])
    from edgekit.devices import get_device

    say(f"the artifact on the host: {len(candidates)} images")
    logits, runtime = get_device(DEFAULT_DEVICE).predict(artifact, samples, 1)
    labels = np.asarray([image.label for image in candidates], np.int64)
    chosen = choose_images(logits, labels, count)
    inputs, expected = samples[chosen], np.asarray(logits[chosen], np.float32)
    spread = measure_spread(artifact, inputs, expected, devices=spread_on, say=say)
    final = Path(output)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        images = _write_stages(
            staging, candidates, rgbs=rgbs, chosen=chosen, samples=samples, given=given, pre=pre
        )
        _write_expected(staging, expected, returned, images, pre)
        _copy_artifact(staging, artifact)
        spec = {
            "bundle_version": BUNDLE_VERSION,
            "made": {
                "by": _edgekit_version(),
                "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "host": runtime,
            },
            "artifact": {
                "file": artifact.path.name,
                "label": artifact.label,
                "target": artifact.target,
                "recipe": artifact.recipe,
                "sha256": artifact.manifest.file.sha256,
                "input": given.to_dict(),
                "output": returned.to_dict(),
            },
            "preprocessing": preprocessing_words(pre, given, returned),
            "class_names": list(pre.class_names),
            "data": data,
            "selection": (
                f"the {(len(chosen) + 1) // 2} smallest top-2 margins of {len(candidates)} "
                f"evaluation images of {data}, then one image per class in turn"
            ),
            "images": images,
            "tolerance": {"logits": spread.to_dict()},
        }
        from edgekit.golden.formats import write_format_files

        spec["runtime_files"] = write_format_files(staging, spec, artifact)
        (staging / SPEC).write_text(json.dumps(spec, indent=2) + "\n")
        (staging / "README.md").write_text(bundle_readme(spec))
        write_sums(staging)
        publish(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return read_bundle(final)


def _write_stages(
    root: Path,
    candidates: list[Any],
    *,
    rgbs: list[np.ndarray],
    chosen: list[int],
    samples: np.ndarray,
    given: Any,
    pre: Preprocess,
) -> list[dict[str, Any]]:
    for folder in ("stage1", "stage2", "stage3"):
        (root / folder).mkdir()
    images = []
    for position, index in enumerate(chosen):
        stem = f"{position:03d}"
        image = candidates[index]
        tensor = tensor_input(samples[index : index + 1], given)
        (root / "stage1" / f"{stem}.png").write_bytes(image.png)
        np.save(root / "stage2" / f"{stem}.npy", rgbs[index], allow_pickle=False)
        np.save(root / "stage3" / f"{stem}.npy", tensor, allow_pickle=False)
        (root / "stage3" / f"{stem}.bin").write_bytes(tensor.tobytes())
        images.append(
            {
                "stage1": f"stage1/{stem}.png",
                "stage2": f"stage2/{stem}.npy",
                "stage3": f"stage3/{stem}.npy",
                "stage3_raw": f"stage3/{stem}.bin",
                "label": image.label,
                "label_name": pre.class_names[image.label],
                "origin": image.origin,
            }
        )
    return images


def _write_expected(
    root: Path, expected: np.ndarray, returned: Any, images: list[dict[str, Any]], pre: Preprocess
) -> None:
    (root / "expected").mkdir()
    np.save(root / "expected" / "logits.npy", expected, allow_pickle=False)
    np.save(root / "expected" / "raw.npy", requantize(expected, returned), allow_pickle=False)
    margins = top2_margins(expected.astype(np.float64))
    for image, row, margin in zip(images, expected, margins, strict=True):
        top = np.argsort(-row, kind="stable")[: min(TOP_K, len(row))]
        image["expected_top"] = [
            {"class": int(c), "name": pre.class_names[int(c)], "logit": float(row[c])} for c in top
        ]
        image["top2_margin"] = float(margin)


def _copy_artifact(root: Path, artifact: Artifact) -> None:
    (root / "artifact").mkdir()
    shutil.copy2(artifact.path, root / "artifact" / artifact.path.name)
    manifest = manifest_path(artifact.path)
    if manifest.is_file():
        shutil.copy2(manifest, root / "artifact" / manifest.name)


def _edgekit_version() -> str:
    from edgekit import __version__

    return f"edgekit {__version__}"
