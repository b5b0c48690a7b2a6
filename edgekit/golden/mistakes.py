"""The usual ways an app's preprocessing or output reading goes wrong (issue 51), each made on
the bundle's own stage-1 images as a small variant of the artifact's preprocessing: the
channels in B, G, R order, the mean and std left out, /255 applied twice, the tensor's bytes
in the other layout, another resize filter, and an integer output read without its scale.
A mistake that cannot change the artifact's input on these images (BGR on grey images, a
layout swap on one channel, a filter where nothing is resized) says why, instead of being
tried: it cannot be told apart from the right preprocessing here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from edgekit.golden.images import model_input, tensor_input
from edgekit.sources.preprocess import RESAMPLES, Preprocess
from edgekit.targets.session import TensorSpec

LAYOUTS = ("NCHW", "NHWC")


@dataclass(frozen=True)
class Mistake:
    """One mistake as the artifact would see it: the NCHW float ``samples`` to run it on, or
    the ``outputs`` it gives without a run; or ``why_not``, when it changes nothing here."""

    key: str  # bgr, no-mean-std, double-255, layout, resize-<filter>, unscaled-output
    what: str  # what the outputs would match: "the artifact fed BGR images"
    fix: str  # what the app should do instead
    samples: np.ndarray | None = None
    outputs: np.ndarray | None = None
    why_not: str | None = None


def usual_mistakes(
    rgbs: list[np.ndarray],
    pre: Preprocess,
    *,
    given: TensorSpec,
    returned: TensorSpec,
    raw_outputs: np.ndarray,
) -> list[Mistake]:
    """Every usual mistake on the decoded images ``rgbs`` (stage 2) for an artifact that takes
    ``given`` and returns ``returned`` (``raw_outputs``: its expected output tensor)."""
    right = _samples(rgbs, lambda rgb: model_input(rgb, pre))
    twice = _samples(rgbs, lambda rgb: model_input(np.asarray(rgb, np.float32) / 255.0, pre))
    mistakes = [
        _bgr(rgbs, pre),
        _no_mean_std(rgbs, pre),
        Mistake(
            "double-255",
            "the artifact fed images divided by 255 twice",
            "divide the 8-bit values by 255 once",
            samples=twice,
        ),
        _layout(right, given),
        *_resizes(rgbs, pre, given),
        _unscaled_output(returned, raw_outputs),
    ]
    return [_unless_unchanged(mistake, right, given) for mistake in mistakes]


def _samples(rgbs: list[np.ndarray], preprocess: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    # one image at a time: a folder's images may each have their own size
    return np.concatenate([preprocess(rgb) for rgb in rgbs])


def _bgr(rgbs: list[np.ndarray], pre: Preprocess) -> Mistake:
    what, fix = "the artifact fed BGR images", "swap the channels to R, G, B"
    if all(np.array_equal(rgb[..., 0], rgb[..., 2]) for rgb in rgbs):
        grey = "grey (R = G = B)" if pre.channels == 1 else "alike in R and B"
        return Mistake("bgr", what, fix, why_not=f"the bundle's images are {grey}")
    swapped = _samples(rgbs, lambda rgb: model_input(rgb[..., ::-1], pre))
    return Mistake("bgr", what, fix, samples=swapped)


def _no_mean_std(rgbs: list[np.ndarray], pre: Preprocess) -> Mistake:
    what = "the artifact fed images without the mean and std"
    fix = f"subtract the mean {list(pre.mean)} and divide by the std {list(pre.std)}, per channel"
    if all(m == 0.0 for m in pre.mean) and all(s == 1.0 for s in pre.std):
        return Mistake("no-mean-std", what, fix, why_not="the model's mean is 0 and its std 1")
    plain = replace(pre, mean=(0.0,) * pre.channels, std=(1.0,) * pre.channels)
    unnormalised = _samples(rgbs, lambda rgb: model_input(rgb, plain))
    return Mistake("no-mean-std", what, fix, samples=unnormalised)


def _layout(right: np.ndarray, given: TensorSpec) -> Mistake:
    """The right tensor's values laid out in the other order and read in the artifact's shape,
    as NCHW float samples (the artifact's staging lays them out in its own layout again)."""
    layout = given.layout
    other = "NHWC" if layout == "NCHW" else "NCHW"
    what = f"the artifact fed {other} bytes where it takes {layout}"
    fix = f"lay the tensor out as {layout} {given.shape}"
    if layout not in LAYOUTS or len(given.shape) != 4:
        return Mistake("layout", what, fix, why_not=f"the input is {layout} {given.shape}")
    if right.shape[1] == 1:
        why = "one channel: NCHW and NHWC hold the same bytes"
        return Mistake("layout", what, fix, why_not=why)
    wrong = []
    for sample in right:
        in_other = sample[None] if other == "NCHW" else sample[None].transpose(0, 2, 3, 1)
        read = np.ascontiguousarray(in_other).reshape(given.shape)
        wrong.append(read if layout == "NCHW" else read.transpose(0, 3, 1, 2))
    return Mistake("layout", what, fix, samples=np.concatenate(wrong))


def _resizes(rgbs: list[np.ndarray], pre: Preprocess, given: TensorSpec) -> list[Mistake]:
    """One mistake per other Pillow filter; filters that give the same input tensors here (nearest
    and box on an upscale by a whole factor) are one mistake, named by both."""
    height, width = pre.input_size
    fix = f"resize with Pillow's {pre.resample} filter (the model's)"
    if all(rgb.shape[:2] == (height, width) for rgb in rgbs):
        why = f"the bundle's images are already {width}x{height}: nothing is resized"
        what = "the artifact fed images resized with another filter"
        return [Mistake("resize", what, fix, why_not=why)]
    groups: list[tuple[list[str], np.ndarray, np.ndarray]] = []  # names, samples, tensors
    for name in (name for name in RESAMPLES if name != pre.resample):
        samples = _samples(rgbs, lambda rgb, p=replace(pre, resample=name): model_input(rgb, p))
        tensors = np.stack([tensor_input(sample[None], given) for sample in samples])
        same = next((group for group in groups if np.array_equal(group[2], tensors)), None)
        if same is None:
            groups.append(([name], samples, tensors))
        else:
            same[0].append(name)
    return [
        Mistake(
            "resize-" + "-".join(names),
            f"the artifact fed images resized with Pillow's {' or '.join(names)} filter",
            fix,
            samples=samples,
        )
        for names, samples, _ in groups
    ]


def _unscaled_output(returned: TensorSpec, raw_outputs: np.ndarray) -> Mistake:
    quant = returned.quantization
    if quant is None:
        what = "an integer output read without its scale"
        why = f"the output is {returned.dtype}: there is no scale to leave out"
        return Mistake("unscaled-output", what, "", why_not=why)
    what = f"the raw {returned.dtype} output read without its scale"
    zero = int(quant["zero_point"])
    shifted = f"q - {zero}" if zero >= 0 else f"q + {-zero}"
    fix = f"dequantize it: logit = ({shifted}) * {quant['scale']!r}"
    rows = np.asarray(raw_outputs).reshape(len(raw_outputs), -1)
    return Mistake("unscaled-output", what, fix, outputs=rows.astype(np.float32))


def _unless_unchanged(mistake: Mistake, right: np.ndarray, given: TensorSpec) -> Mistake:
    """The mistake as it is, or with ``why_not`` when the artifact's input tensors come out
    the same as the right ones for every image."""
    if mistake.samples is None:
        return mistake
    same = all(
        np.array_equal(tensor_input(wrong[None], given), tensor_input(ok[None], given))
        for wrong, ok in zip(mistake.samples, right, strict=True)
    )
    if not same:
        return mistake
    return replace(
        mistake, samples=None, why_not="it leaves the artifact's input tensors unchanged here"
    )
