"""Per-output tolerances from what was measured, not a guess: the same artifact's outputs for
the bundle's inputs on every other device and thread count here that runs it (the ARM64 guest,
the GPU accelerator, the host with more threads), as the largest |difference| from the host's
single-thread outputs. The tolerance is twice the largest spread, and never less than one step
of an integer output (its scale) or a float32 rounding of the largest logit."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgekit.artifacts.artifact import Artifact
from edgekit.devices import DEFAULT_DEVICE, SPREAD_DEVICES
from edgekit.errors import EdgekitError, first_line
from edgekit.targets.session import Accelerator, TensorSpec

MARGIN = 2.0  # the tolerance over the largest spread measured


@dataclass
class Spread:
    """What each device gave against the host's single-thread outputs, and the tolerance of
    each kind of kernel: the CPU's (every thread count, the ARM64 guest, a board) and a GPU
    delegate's (fp16 arithmetic: its spread must not widen the CPU's tolerance)."""

    floor: float
    floor_is: str
    measured: dict[str, float] = field(default_factory=dict)  # device -> max |difference|
    kernels: dict[str, str] = field(default_factory=dict)  # device -> its Accelerator value
    not_measured: dict[str, str] = field(default_factory=dict)  # device -> why not

    def atol(self, kernels: str = Accelerator.CPU.value) -> float | None:
        """The tolerance for outputs of ``kernels``; None where nothing of them was measured
        (the host's CPU always is)."""
        spreads = [d for label, d in self.measured.items() if self.kernels[label] == kernels]
        if not spreads and kernels != Accelerator.CPU.value:
            return None
        return max(self.floor, MARGIN * max(spreads, default=0.0))

    def to_dict(self) -> dict[str, Any]:
        by_kernels = {k.value: self.atol(k.value) for k in Accelerator}
        return {
            "atol": self.atol(),
            "atol_by_kernels": {k: v for k, v in by_kernels.items() if v is not None},
            "measured": self.measured,
            "kernels": self.kernels,
            "not_measured": self.not_measured,
            "floor": self.floor,
            "floor_is": self.floor_is,
            "rule": (
                f"atol = max({MARGIN:g} x the largest |logit difference| measured against the "
                "host's single-thread outputs on the same kind of kernels, the floor); a logit "
                "agrees when |got - expected| <= atol, and the top-1 class must agree wherever "
                "the expected top-2 margin exceeds 2 x atol"
            ),
        }


def tolerance_floor(expected: np.ndarray, output: TensorSpec) -> tuple[float, str]:
    """The smallest tolerance that can be asked of any runtime: one quantization step of an
    integer output, else float32 rounding of the largest logit (a few ulps)."""
    if output.quantization is not None:
        return float(output.quantization["scale"]), "one step of the int8 output (its scale)"
    largest = float(np.max(np.abs(expected))) if expected.size else 1.0
    return 8 * float(
        np.spacing(np.float32(max(largest, 1e-30)))
    ), "8 float32 ulps of the largest logit"


def measure_spread(
    artifact: Artifact,
    inputs: np.ndarray,
    expected: np.ndarray,
    *,
    devices: tuple[str, ...] = SPREAD_DEVICES,
    say: Callable[[str], None] = lambda line: None,
) -> Spread:
    """The bundle's inputs (NCHW float) through ``artifact`` on each of ``devices`` that can
    run it here, and on the host with every core; a device that cannot is named with why."""
    from edgekit.devices import get_device

    floor, floor_is = tolerance_floor(expected, artifact.manifest.output)
    spread = Spread(floor=floor, floor_is=floor_is)
    runs: list[tuple[str, Any, int]] = [
        (DEFAULT_DEVICE, get_device(DEFAULT_DEVICE), os.cpu_count() or 1)
    ]
    for name in devices:
        try:
            runs.append((name, get_device(name), 1))
        except EdgekitError as exc:
            spread.not_measured[name] = first_line(exc)
    for name, device, threads in runs:
        label = name if threads == 1 else f"{name} x{threads} threads"
        reason = device.unavailable_reason(artifact)
        if reason:
            spread.not_measured[label] = reason
            continue
        say(f"spread: {label}")
        try:
            got, _ = device.predict(artifact, inputs, threads)
        except EdgekitError as exc:
            spread.not_measured[label] = first_line(exc)
            continue
        spread.measured[label] = float(np.max(np.abs(np.asarray(got, np.float32) - expected)))
        spread.kernels[label] = kernels_of(device)
    return spread


def kernels_of(device: object) -> str:
    """The kind of kernels a device runs an artifact with (an Accelerator value)."""
    return str(getattr(device, "accelerator", Accelerator.CPU).value)


def compare(got: np.ndarray, expected: np.ndarray, atol: float) -> dict[str, Any]:
    """Outputs against the expected ones: per image the largest |difference|, and whether its
    top-1 class agrees where the expected margin says it must."""
    got = np.asarray(got, np.float32).reshape(expected.shape)
    differences = np.max(np.abs(got - expected), axis=1)
    ordered = np.sort(expected, axis=1)
    margins = (
        ordered[:, -1] - ordered[:, -2] if expected.shape[1] > 1 else np.full(len(got), np.inf)
    )
    decisive = margins > 2 * atol
    top1_same = np.argmax(got, axis=1) == np.argmax(expected, axis=1)
    failed = (differences > atol) | (decisive & ~top1_same)
    return {
        "max_abs_diff": float(differences.max()) if len(differences) else 0.0,
        "per_image_max_abs_diff": differences.tolist(),
        "top1_agreement": float(top1_same.mean()) if len(top1_same) else 1.0,
        "failed_images": np.flatnonzero(failed).tolist(),
        "passed": not bool(failed.any()),
    }
