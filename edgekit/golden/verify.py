"""``edgekit golden --verify BUNDLE OUTPUTS``: outputs an app wrote for the bundle's images,
against the expected ones within the bundle's tolerance. When they do not agree, the usual
mistakes (``edgekit.golden.mistakes``) are made on the bundle's stage-1 images and run through
the bundle's artifact on the host, and the one the app's outputs match is named; but only when
it matches clearly: within the tolerance where no other does, or the same top-1 classes and
much closer than every other mistake and than the right outputs. Otherwise the closest is
shown, and no mistake is named."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UserInputError
from edgekit.golden.bundle import Bundle, read_bundle
from edgekit.golden.images import decoded_rgb
from edgekit.golden.mistakes import Mistake, usual_mistakes
from edgekit.golden.tolerance import compare
from edgekit.targets.session import TensorSpec

AGREEMENT = 0.9  # the top-1 agreement a mistake named outside the tolerance must reach
CLOSER = 0.5  # ... and its mean |difference| at most this share of the next closest's


@dataclass
class MistakeMatch:
    """How close the app's outputs are to one mistake's outputs."""

    key: str
    what: str
    fix: str
    agreement: float  # the share of images whose top-1 class is the same
    mean_abs_diff: float
    max_abs_diff: float
    within_atol: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Verification:
    """An app's outputs against a bundle, and what they match when they do not pass."""

    bundle: str
    outputs: str
    read_as: str  # how the outputs were read: float logits, or the raw tensor dequantized
    atol: float
    comparison: dict[str, Any]  # tolerance.compare against expected/logits.npy
    passed: bool
    summary: str
    mistake: MistakeMatch | None = None  # the mistake named, if one matches clearly
    tried: list[MistakeMatch] = field(default_factory=list)  # closest first
    untold: dict[str, str] = field(default_factory=dict)  # what -> why it cannot be told here

    def lines(self) -> list[str]:
        verdict = "[bold green]PASS[/]" if self.passed else "[bold red]FAIL[/]"
        c = self.comparison
        lines = [
            f"{verdict} {self.summary}",
            f"  against the expected outputs ({self.read_as}): max |diff| "
            f"{c['max_abs_diff']:.3g} (atol {self.atol:.3g}), top-1 agreement "
            f"{c['top1_agreement']:.2f}",
        ]
        if c["failed_images"]:
            lines.append(f"  images outside the tolerance: {c['failed_images']}")
        if self.tried:
            lines.append("  the usual mistakes made on the bundle's images, closest first:")
        for match in self.tried:
            within = ", within atol" if match.within_atol else ""
            lines.append(
                f"    {match.what}: top-1 agreement {match.agreement:.2f}, mean |diff| "
                f"{match.mean_abs_diff:.3g}, max |diff| {match.max_abs_diff:.3g}{within}"
            )
        if self.untold:
            lines.append("  cannot be told apart here:")
        lines.extend(f"    {what}: {why}" for what, why in self.untold.items())
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle,
            "outputs": self.outputs,
            "read_as": self.read_as,
            "atol": self.atol,
            **self.comparison,
            "passed": self.passed,
            "summary": self.summary,
            "mistake": self.mistake.to_dict() if self.mistake else None,
            "tried": [match.to_dict() for match in self.tried],
            "cannot_be_told_apart": self.untold,
        }


def verify_outputs(bundle: Bundle | str | Path, outputs: str | Path | np.ndarray) -> Verification:
    """The app's ``outputs`` (an (N, classes) .npy, a folder of one .npy per image, or an
    array) against ``bundle``; the preprocessing mistake they match when they do not pass."""
    bundle = bundle if isinstance(bundle, Bundle) else read_bundle(bundle)
    expected = bundle.expected_logits()
    got, read_as = read_outputs(outputs, shape=expected.shape, returned=bundle.output_spec)
    comparison = compare(got, expected, bundle.atol)
    found = Verification(
        bundle=str(bundle.root),
        outputs=str(outputs) if not isinstance(outputs, np.ndarray) else "array",
        read_as=read_as,
        atol=bundle.atol,
        comparison=comparison,
        passed=False,
        summary="",
    )
    if not np.all(np.isfinite(got)):
        count = int(np.count_nonzero(~np.isfinite(got)))
        found.summary = f"{count} of your output values are NaN or infinite"
        return found
    if comparison["passed"]:
        found.passed = True
        found.summary = (
            f"your outputs match the expected outputs of {bundle.count} images within atol "
            f"{bundle.atol:.3g} (max |diff| {comparison['max_abs_diff']:.3g})"
        )
        return found
    mistakes = usual_mistakes(
        [decoded_rgb(bundle.png(index)) for index in range(bundle.count)],
        _preprocess(bundle),
        given=bundle.input_spec,
        returned=bundle.output_spec,
        raw_outputs=bundle.expected_raw(),
    )
    found.untold = {m.what: m.why_not for m in mistakes if m.why_not is not None}
    tried = [m for m in mistakes if m.why_not is None]
    matches = [
        _match(got, mistake, logits, bundle.atol)
        for mistake, logits in zip(tried, _outputs(bundle, tried), strict=True)
    ]
    found.tried = sorted(matches, key=lambda match: (not match.within_atol, match.mean_abs_diff))
    right = float(np.mean(np.abs(got - expected)))
    found.mistake = named_mistake(found.tried, right=right)
    found.summary = _diagnosis(found, comparison)
    return found


def named_mistake(tried: list[MistakeMatch], *, right: float) -> MistakeMatch | None:
    """The closest mistake, if it matches clearly: within the tolerance where no other is, or
    the same top-1 classes nearly everywhere and much closer than the next mistake and than
    the right outputs (mean |difference| ``right``)."""
    if not tried:
        return None
    best, others = tried[0], tried[1:]
    if best.within_atol:
        return None if any(other.within_atol for other in others) else best
    nearest = min([right, *(other.mean_abs_diff for other in others)])
    if best.agreement >= AGREEMENT and best.mean_abs_diff <= CLOSER * nearest:
        return best
    return None


def read_outputs(
    outputs: str | Path | np.ndarray, *, shape: tuple[int, ...], returned: TensorSpec
) -> tuple[np.ndarray, str]:
    """The app's outputs as float32 (N, classes), and how they were read: an integer array in
    the output tensor's own dtype is that tensor, dequantized with its scale."""
    count, classes = shape
    if isinstance(outputs, np.ndarray):
        values = _checked(outputs, "outputs", shape)
    elif Path(outputs).is_dir():
        values = _folder(Path(outputs), count, classes)
    else:
        values = _checked(_load(Path(outputs)), str(outputs), shape)
    quant = returned.quantization
    if values.dtype.kind in "iu" and quant is not None and values.dtype == np.dtype(returned.dtype):
        dequantized = (values.astype(np.float32) - quant["zero_point"]) * np.float32(quant["scale"])
        return dequantized.astype(np.float32), f"the raw {returned.dtype} tensor, dequantized"
    return values.astype(np.float32), "logits"


def _load(path: Path) -> np.ndarray:
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise UserInputError(f"{path}: not a readable .npy file ({exc})") from None
    if not isinstance(values, np.ndarray):
        raise UserInputError(f"{path}: not a .npy file (an .npz holds several arrays)")
    return values


def _checked(values: np.ndarray, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if values.dtype.kind not in "fiu":
        raise UserInputError(f"{name}: outputs of dtype {values.dtype}; expected numbers")
    if values.shape != tuple(shape):
        raise UserInputError(
            f"{name}: outputs of shape {list(values.shape)}; expected {list(shape)} (one row of "
            f"{shape[1]} logits per image of the bundle)"
        )
    return values


def _folder(folder: Path, count: int, classes: int) -> np.ndarray:
    files = sorted(path for path in folder.iterdir() if path.suffix == ".npy")
    if len(files) != count:
        raise UserInputError(
            f"{folder}: {len(files)} .npy files; expected {count} (one per image of the bundle, "
            f"in its order by name), each of shape [{classes}] or [1, {classes}]"
        )
    rows = []
    for path in files:
        values = _load(path)
        if values.shape == (classes,):
            values = values[None]
        rows.append(_checked(values, str(path), (1, classes)))
    return np.concatenate(rows)


def _preprocess(bundle: Bundle) -> Any:
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.golden.make import bundle_preprocess

    return bundle_preprocess(load_artifact(bundle.artifact_path))


def _outputs(bundle: Bundle, tried: list[Mistake]) -> list[np.ndarray]:
    """Each mistake's outputs: its own, or the artifact's on its samples on the host (all the
    samples in one run)."""
    batches = [m.samples for m in tried if m.samples is not None]
    logits = np.zeros((0, 0), np.float32)
    if batches:
        from edgekit.artifacts.artifact import load_artifact
        from edgekit.devices import DEFAULT_DEVICE, get_device

        artifact = load_artifact(bundle.artifact_path)
        logits, _ = get_device(DEFAULT_DEVICE).predict(artifact, np.concatenate(batches), 1)
        logits = np.asarray(logits, np.float32)
    found, start = [], 0
    for mistake in tried:
        if mistake.outputs is not None:
            found.append(np.asarray(mistake.outputs, np.float32))
        else:
            found.append(logits[start : start + len(mistake.samples)])
            start += len(mistake.samples)
    return found


def _match(got: np.ndarray, mistake: Mistake, logits: np.ndarray, atol: float) -> MistakeMatch:
    logits = logits.reshape(got.shape)
    difference = np.abs(got - logits)
    return MistakeMatch(
        key=mistake.key,
        what=mistake.what,
        fix=mistake.fix,
        agreement=float(np.mean(np.argmax(got, axis=1) == np.argmax(logits, axis=1))),
        mean_abs_diff=float(difference.mean()),
        max_abs_diff=float(difference.max()),
        within_atol=bool(compare(got, logits, atol)["passed"]),
    )


def _diagnosis(found: Verification, comparison: dict[str, Any]) -> str:
    outside = len(comparison["failed_images"])
    if found.mistake is not None:
        m = found.mistake
        return f"your outputs match {m.what} (agreement {m.agreement:.2f}); {m.fix}"
    if not found.tried:
        return (
            f"your outputs differ from the expected ones ({outside} images outside the "
            "tolerance) and no usual mistake can be tried here"
        )
    closest = found.tried[0]
    return (
        f"your outputs differ from the expected ones ({outside} images outside the tolerance) "
        f"and match none of the usual mistakes clearly (closest: {closest.what}, agreement "
        f"{closest.agreement:.2f}); compare your preprocessing with spec.json step by step"
    )
