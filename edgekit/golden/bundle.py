"""A golden bundle on disk: its layout, its ``spec.json``, and its digests. Every file but
``SHA256SUMS`` is listed there in ``sha256sum`` format (an app team checks a bundle with
``sha256sum -c SHA256SUMS`` and no edgekit); a bundle whose files were edited is refused.

    BUNDLE/
      README.md                what the app team does with it
      spec.json                the preprocessing in an app developer's words, the artifact's
                               input and output, each image's label and expected top-k, the
                               tolerances and how they were measured
      artifact/FILE            the artifact the outputs came from, and its manifest
      stage1/NNN.png           the image files
      stage2/NNN.npy           each decoded as (H, W, 3) uint8 RGB
      stage3/NNN.npy, NNN.bin  the exact input tensor (as .npy, and raw bytes for runners)
      expected/raw.npy         the output tensor as the artifact returns it (its dtype)
      expected/logits.npy      dequantized float32 (N, classes)
      runners/                 plain-Python runners (numpy and the runtime only)
      program.bpte             (.pte) ExecuTorch's BundledProgram of the same inputs
      onnx/                    (.onnx) model.onnx and test_data_set_N/ for onnxruntime's tools
      SHA256SUMS
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.fileio import sha256_file
from edgekit.errors import UserInputError
from edgekit.targets.session import TensorSpec

SPEC = "spec.json"
SUMS = "SHA256SUMS"
BUNDLE_VERSION = 1


@dataclass(frozen=True)
class Bundle:
    """A bundle as read back (its digests checked): the folder and its ``spec.json``."""

    root: Path
    spec: dict[str, Any]

    @property
    def count(self) -> int:
        return len(self.spec["images"])

    @property
    def artifact_path(self) -> Path:
        return self.root / "artifact" / self.spec["artifact"]["file"]

    @property
    def input_spec(self) -> TensorSpec:
        return TensorSpec.from_dict(self.spec["artifact"]["input"])

    @property
    def output_spec(self) -> TensorSpec:
        return TensorSpec.from_dict(self.spec["artifact"]["output"])

    @property
    def labels(self) -> np.ndarray:
        return np.asarray([image["label"] for image in self.spec["images"]], np.int64)

    def png(self, index: int) -> bytes:
        return (self.root / self.spec["images"][index]["stage1"]).read_bytes()

    def rgb(self, index: int) -> np.ndarray:
        return np.load(self.root / self.spec["images"][index]["stage2"], allow_pickle=False)

    def tensor(self, index: int) -> np.ndarray:
        return np.load(self.root / self.spec["images"][index]["stage3"], allow_pickle=False)

    def expected_logits(self) -> np.ndarray:
        return np.load(self.root / "expected" / "logits.npy", allow_pickle=False)

    def expected_raw(self) -> np.ndarray:
        return np.load(self.root / "expected" / "raw.npy", allow_pickle=False)

    @property
    def atol(self) -> float:
        """The tolerance of CPU kernels (the host, the ARM64 guest, a board)."""
        return float(self.spec["tolerance"]["logits"]["atol"])

    def atol_for(self, kernels: str) -> float | None:
        """The tolerance of ``kernels`` (an Accelerator value); None where the bundle measured
        none of them."""
        found = self.spec["tolerance"]["logits"].get("atol_by_kernels", {}).get(kernels)
        return None if found is None else float(found)


def write_sums(root: Path) -> None:
    """``SHA256SUMS`` over every other file of the bundle, in ``sha256sum`` format."""
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        if relative != SUMS:
            lines.append(f"{sha256_file(path)}  {relative}")
    (root / SUMS).write_text("\n".join(lines) + "\n")


def read_bundle(root: Path | str) -> Bundle:
    """A bundle whose every file matches ``SHA256SUMS`` (one line naming the first that does
    not, or a file that is missing or was added)."""
    root = Path(root)
    sums = root / SUMS
    if not root.is_dir():
        raise UserInputError(f"{root}: golden bundle not found (edgekit golden ARTIFACT -o DIR)")
    if not sums.is_file():
        raise UserInputError(f"{root}: not a golden bundle (no {SUMS})")
    listed: dict[str, str] = {}
    for number, line in enumerate(sums.read_text().splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise UserInputError(f"{sums}:{number}: not a sha256sum line")
        listed[name] = digest
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {SUMS}
    for name in sorted(set(listed) - present):
        raise UserInputError(f"{root / name}: listed in {SUMS} but missing")
    for name in sorted(present - set(listed)):
        raise UserInputError(f"{root / name}: not in {SUMS} (a file was added to the bundle)")
    for name, digest in listed.items():
        if sha256_file(root / name) != digest:
            raise UserInputError(
                f"{root / name}: its sha256 differs from {SUMS} (the bundle was edited)"
            )
    try:
        spec = json.loads((root / SPEC).read_text())
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{root / SPEC}: not readable JSON ({exc})") from None
    if spec.get("bundle_version") != BUNDLE_VERSION:
        raise UserInputError(
            f"{root / SPEC}: bundle_version {spec.get('bundle_version')!r}; this edgekit reads "
            f"{BUNDLE_VERSION}"
        )
    return Bundle(root, spec)


def publish(staging: Path, final: Path) -> None:
    """The finished bundle into place in one rename; a bundle already there is replaced only
    once the new one is complete."""
    final = final.resolve()
    if final.exists() and not (final / SUMS).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise UserInputError(f"{final}: exists and is not a golden bundle; not overwriting it")
    old = final.with_name(f".{final.name}.old")
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)
