"""The trivial model each target ships (``targets/<target>/trivial.<suffix>``): one 1x1
convolution of a 3x8x8 input into 2 classes. ``edgekit bench`` loads it before the artifact, so
that the memory a runtime needs for any model at all (its import, its thread pools, a session)
is measured apart from what the artifact adds. Remade with the pinned converters by

    PYTHONPATH=scripts .venv/bin/python scripts/trivial_models.py"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
PREPROCESS = {
    "channels": 3,
    "input_size": (8, 8),
    "mean": (0.5, 0.5, 0.5),
    "std": (0.5, 0.5, 0.5),
    "class_names": ["a", "b"],
}


def trivial() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    model.edgekit_preprocess = PREPROCESS
    return model


def main() -> None:
    edgekit = str(Path(sys.executable).with_name("edgekit"))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([edgekit, "export", "--model", "trivial_models:trivial", "--data",
                        "synthetic:8", "--target", "all", "--recipe", "fp32", "-o", tmp],
                       check=True)  # fmt: skip
        for made in Path(tmp).iterdir():
            if made.suffix in (".onnx", ".tflite", ".pte"):
                target = {".onnx": "onnx", ".tflite": "tflite", ".pte": "executorch"}[made.suffix]
                folder = ROOT / "targets" / target
                shutil.copy(made, folder / f"trivial{made.suffix}")
                # its manifest too: a session opens it without describing the file first
                manifest = json.loads(Path(f"{made}.json").read_text())
                manifest["file"]["name"] = f"trivial{made.suffix}"
                Path(folder / f"trivial{made.suffix}.json").write_text(
                    json.dumps(manifest, indent=1)
                )
                print(f"wrote targets/{target}/trivial{made.suffix} (+ .json)")


if __name__ == "__main__":
    main()
