"""The bundle's README.md: what an app team does with it, from its own ``spec.json``."""

from __future__ import annotations

from typing import Any


def bundle_readme(spec: dict[str, Any]) -> str:
    artifact, words = spec["artifact"], spec["preprocessing"]
    tolerance = spec["tolerance"]["logits"]
    measured = ", ".join(f"{k} {v:.3g}" for k, v in tolerance["measured"].items()) or "none"
    lines = [
        f"# Golden vectors for {artifact['file']} ({artifact['label']})",
        "",
        f"Made by {spec['made']['by']} at {spec['made']['at']}. {len(spec['images'])} labelled "
        f"images of `{spec['data']}`: {spec['selection']}.",
        "",
        "## Prove your app right in three steps",
        "",
        "1. **Stage 3, the model alone.** Feed `stage3/NNN.bin` (raw bytes, or `stage3/NNN.npy`) "
        "to the model in your app and compare its outputs with `expected/logits.npy` (row NNN) "
        f"within `atol = {tolerance['atol']:.3g}`. If this fails, the runtime or the file differs, "
        "not your preprocessing.",
        "2. **Stage 2, your preprocessing.** Start from `stage2/NNN.npy` (the decoded RGB "
        "pixels, H x W x 3 uint8) and run your own preprocessing: the tensor must equal "
        "`stage3/NNN.npy` value for value.",
        "3. **Stage 1, your decoding.** Decode `stage1/NNN.png` as your app does: the pixels "
        "must equal `stage2/NNN.npy`.",
        "",
        "Then save your app's outputs for the images in order (N x classes, `.npy`) and run "
        "`edgekit golden --verify BUNDLE outputs.npy`: it names the usual mistake (BGR order, "
        "missing mean/std, /255 twice, NCHW/NHWC swapped, another resize filter, an int8 output "
        "read without its scale) when your outputs match it.",
        "",
        "## The preprocessing",
        "",
        *[f"{n}. {step}" for n, step in enumerate(words["steps"], 1)],
        "",
        "## The outputs",
        "",
        *[f"- {line}" for line in words["outputs"]],
        "",
        "## Tolerance",
        "",
        f"`atol = {tolerance['atol']:.3g}` on every logit from CPU kernels"
        + "".join(
            f"; {atol:.3g} from {kernels}"
            for kernels, atol in tolerance["atol_by_kernels"].items()
            if atol != tolerance["atol"]
        )
        + f". Measured spread against the host's single-thread outputs: {measured}. Floor: "
        f"{tolerance['floor_is']}. Rule: {tolerance['rule']}.",
        "",
        "## Files",
        "",
        "- `spec.json`: all of the above, machine-readable, with each image's label and "
        "expected top-k",
        "- `artifact/`: the model file these outputs came from",
        *[f"- `{path}`: {what}" for what, path in spec.get("runtime_files", {}).items()],
        "- `SHA256SUMS`: `sha256sum -c SHA256SUMS` checks that nothing was edited",
        "",
    ]
    return "\n".join(lines)
