"""The plain-Python runner a golden bundle carries for its runtime (``runners/run_X.py``).

Every target's runner is the same script but for the few lines that open the file with the
runtime's own API: the target's ``golden`` module passes them in as ``open_model(path)`` (which
returns a function from one stage-3 tensor to the raw output tensor) and ``RUNTIME`` (its name
in words). The script uses numpy, json and the runtime only, so an app team and the emulated
ARM64 guest run it as it is, and it compares by the rule of ``edgekit golden --check``."""

from __future__ import annotations

from pathlib import Path

RUNNERS = "runners"

SKELETON = '''#!/usr/bin/env python3
"""Checks this golden bundle with @RUNTIME@ alone (numpy and the runtime; no edgekit).

    python runners/@FILE@ [BUNDLE]

BUNDLE is the folder above this script unless given. Feeds every stage3/NNN.npy to the model
in artifact/, dequantizes its output with the output's quantization (if it has one) and compares
it with expected/logits.npy: every logit within the bundle's atol, and the same top-1 class
wherever the expected top-2 margin exceeds 2 x atol. Prints one line per image, then PASS
(exit 0) or FAIL (exit 1)."""

import json
import sys
from pathlib import Path

import numpy as np

@LOADER@


def dequantize(raw, output):
    """The raw output tensor as float32 logits, with the output's scale and zero point."""
    values = np.asarray(raw)
    quant = output.get("quantization")
    if quant:
        values = (values.astype(np.float32) - quant["zero_point"]) * quant["scale"]
    return values.astype(np.float32).reshape(-1)


def failures(got, expected, atol):
    """Per image: the largest |difference|, and whether it fails (edgekit's rule, spec.json's
    tolerance.logits.rule)."""
    differences = np.max(np.abs(got - expected), axis=1)
    ordered = np.sort(expected, axis=1)
    margins = ordered[:, -1] - ordered[:, -2] if expected.shape[1] > 1 else np.inf
    decisive = margins > 2 * atol
    top1_same = np.argmax(got, axis=1) == np.argmax(expected, axis=1)
    return differences, (differences > atol) | (decisive & ~top1_same)


def main(argv):
    bundle = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    if not (bundle / "spec.json").is_file():
        print(f"{bundle}: no spec.json (give the golden bundle's folder)", file=sys.stderr)
        return 2
    spec = json.loads((bundle / "spec.json").read_text())
    artifact, images = spec["artifact"], spec["images"]
    atol = float(spec["tolerance"]["logits"]["atol"])
    expected = np.load(bundle / "expected" / "logits.npy", allow_pickle=False)
    run = open_model(bundle / "artifact" / artifact["file"])
    outputs = []
    for image in images:
        tensor = np.load(bundle / image["stage3"], allow_pickle=False)
        outputs.append(dequantize(run(tensor), artifact["output"]))
    got = np.stack(outputs).reshape(expected.shape)
    differences, failed = failures(got, expected, atol)
    names = spec.get("class_names") or [str(c) for c in range(expected.shape[1])]
    for index, image in enumerate(images):
        top, wanted = names[int(np.argmax(got[index]))], names[int(np.argmax(expected[index]))]
        print(
            f"{Path(image['stage3']).stem}  label {image.get('label_name', image['label'])}  "
            f"top-1 {top} (expected {wanted})  max |diff| {differences[index]:.3g}  "
            f"{'FAIL' if failed[index] else 'ok'}"
        )
    if failed.any():
        bad = ", ".join(Path(images[i]["stage3"]).stem for i in np.flatnonzero(failed))
        print(f"FAIL: {int(failed.sum())} of {len(images)} images beyond atol {atol:.3g}: {bad}")
        return 1
    print(f"PASS: {len(images)} images within atol {atol:.3g} on {RUNTIME}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''


def write_runner(root: Path, file: str, *, runtime: str, loader: str) -> str:
    """Write ``runners/<file>`` into the bundle at ``root``: the shared script with ``loader``
    (code defining ``RUNTIME`` and ``open_model``); returns its path in the bundle."""
    text = (
        SKELETON.replace("@RUNTIME@", runtime)
        .replace("@FILE@", file)
        .replace("@LOADER@", loader.strip("\n"))
    )
    folder = Path(root) / RUNNERS
    folder.mkdir(exist_ok=True)
    path = folder / file
    path.write_text(text)
    path.chmod(0o755)
    return f"{RUNNERS}/{file}"
