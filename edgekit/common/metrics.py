"""Output comparison figures shared by export validation and evaluation."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class VersusHost:
    """A device's logits against the host's on the same inputs (the aarch64 kernels' error)."""

    max_abs_diff: float
    mean_abs_diff: float
    argmax_agreement: float
    outputs_differing: int
    outputs: int


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of ``test`` against ``reference``, in dB."""
    noise = float(np.sum((reference.astype(np.float64) - test.astype(np.float64)) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    if noise == 0.0:
        return float("inf")
    return 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")


def compare_outputs(reference: np.ndarray, test: np.ndarray) -> dict[str, float]:
    """max/mean abs diff, top-1 agreement and SQNR of logits ``test`` against ``reference``."""
    diff = np.abs(reference.astype(np.float64) - test.astype(np.float64))
    return {
        "max_abs_diff": float(diff.max()),
        "mean_abs_diff": float(diff.mean()),
        "top1_agreement": float(np.mean(reference.argmax(1) == test.argmax(1))),
        "sqnr_db": sqnr_db(reference, test),
        "samples": len(reference),
    }


def device_vs_host(device: np.ndarray, host: np.ndarray) -> dict[str, float]:
    """How far a device's logits (the aarch64 kernels) are from the host's on the same inputs,
    as its ``VersusHost`` record's JSON."""
    diff = np.abs(np.asarray(device, dtype=np.float64) - np.asarray(host, dtype=np.float64))
    found = VersusHost(
        max_abs_diff=float(diff.max()) if diff.size else 0.0,
        mean_abs_diff=float(diff.mean()) if diff.size else 0.0,
        argmax_agreement=float(np.mean(device.argmax(1) == host.argmax(1))),
        outputs_differing=int(np.count_nonzero(diff)),
        outputs=int(diff.size),
    )
    return asdict(found)
