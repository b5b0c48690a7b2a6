"""The preprocessing and the tensors in the words an app developer uses: channel order, how to
get floats, the resize filter and size, mean and std, layout, and the quantization of input and
output with the arithmetic spelled out. ``spec.json`` and the bundle's README carry them."""

from __future__ import annotations

from typing import Any

from edgekit.sources.preprocess import Preprocess
from edgekit.targets.session import TensorSpec

GREY = "0.299 R + 0.587 G + 0.114 B"


def preprocessing_words(pre: Preprocess, given: TensorSpec, returned: TensorSpec) -> dict[str, Any]:
    """Every step from a decoded image to the input tensor, and from the output to logits."""
    height, width = pre.input_size
    channels = "R, G, B (in that order)" if pre.channels == 3 else f"one grey channel ({GREY})"
    steps = [
        "decode the image to 8-bit RGB (R, G, B order, as PIL and Android's Bitmap give it)",
        "convert to float32 and divide by 255 (values in [0, 1])",
        f"channels: {channels}",
        f"resize to {width}x{height} (width x height) with Pillow's {pre.resample} filter on the "
        "float image, one channel at a time",
    ]
    if pre.scale != 1.0:
        steps.append(f"multiply by {pre.scale:g}")
    steps.append(
        f"subtract the mean {list(pre.mean)} and divide by the std {list(pre.std)}, per channel"
    )
    steps.append(f"lay it out as {given.layout} with shape {given.shape}")
    if given.quantization is not None:
        scale, zero = given.quantization["scale"], given.quantization["zero_point"]
        steps.append(
            f"quantize to {given.dtype}: q = clip(round_half_away_from_zero(x / {scale!r}) + "
            f"{zero}, min, max)"
        )
    else:
        steps.append(f"feed it as {given.dtype}")
    outputs = [
        f"the output {returned.name or 'logits'} is {returned.dtype} of shape {returned.shape}"
    ]
    if returned.quantization is not None:
        scale, zero = returned.quantization["scale"], returned.quantization["zero_point"]
        outputs.append(f"dequantize it before reading it: logit = (q - {zero}) * {scale!r}")
    outputs.append("the class is the index of the largest logit (class_names gives its name)")
    return {
        "steps": steps,
        "outputs": outputs,
        "channel_order": "RGB" if pre.channels == 3 else "grey",
        "to_float": "divide by 255",
        "resize": {"width": width, "height": height, "filter": pre.resample, "library": "Pillow"},
        "scale": pre.scale,
        "mean": list(pre.mean),
        "std": list(pre.std),
        "layout": given.layout,
        "input": given.to_dict(),
        "output": returned.to_dict(),
    }
