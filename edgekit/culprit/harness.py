"""One block of a model as a converter sees it, and how its outputs are judged: torch and numpy
only, because a repro folder carries this file's source as it is (``edgekit.culprit.repro``).

A block is called with one tensor; whatever else its parent passed it (None, flags, sizes) is
bound as a constant, and its output's first tensor is what a converter exports."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

# a block whose every output is this close to zero carries no signal to compare (random inits
# of some architectures end in all-zero logits): "degenerate", never "mismatch"
SILENT_OUTPUT = 1e-6


def first_tensor(output: Any) -> torch.Tensor | None:
    """The first tensor in a module's output: a tensor, a tuple or list, or a dict-like
    (transformers' ModelOutput)."""
    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if hasattr(output, "values") else output
    if isinstance(values, (tuple, list)) or hasattr(output, "values"):
        for value in values:
            found = first_tensor(value)
            if found is not None:
                return found
    return None


class BoundBlock(torch.nn.Module):
    """``block(x, *rest, **kwargs)``'s first output tensor, as a one-input module."""

    def __init__(self, block: torch.nn.Module, rest: list, kwargs: dict) -> None:
        super().__init__()
        self.block = block
        self.rest = list(rest)
        self.bound = dict(kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return first_tensor(self.block(x, *self.rest, **self.bound))


def judged(
    reference: np.ndarray,
    outputs: np.ndarray,
    min_sqnr_db: float,
    min_agreement: float | None = None,
) -> dict[str, Any]:
    """The outputs of a converted block against its torch outputs, input by input: SQNR in dB
    over all of them, and how many single inputs fall below ``min_sqnr_db``. A mismatch needs
    both the pooled figure and most of the inputs below it, so one odd sample cannot decide.
    Given ``min_agreement`` (the whole model, whose outputs are logits), a top-1 agreement
    below it is a mismatch too, as export's validation judges it."""
    reference = reference.astype(np.float64).reshape(len(reference), -1)
    outputs = outputs.astype(np.float64).reshape(len(outputs), -1)
    if reference.shape != outputs.shape:
        return {"shape": [list(reference.shape), list(outputs.shape)], "mismatch": True}
    if float(np.abs(reference).max()) < SILENT_OUTPUT or np.all(reference == reference[:, :1]):
        return {"degenerate": True, "mismatch": False, "max_abs": float(np.abs(reference).max())}

    def sqnr(ref: np.ndarray, out: np.ndarray) -> float:
        noise = float(np.sum((ref - out) ** 2))
        signal = float(np.sum(ref**2))
        if noise == 0.0:
            return float("inf")
        return 10.0 * float(np.log10(signal / noise)) if signal > 0 else float("-inf")

    each = [sqnr(ref, out) for ref, out in zip(reference, outputs, strict=True)]
    pooled = sqnr(reference, outputs)
    below = sum(value < min_sqnr_db for value in each)
    verdict = {
        "sqnr_db": pooled,
        "inputs": len(each),
        "inputs_below": below,
        "min_sqnr_db": min_sqnr_db,
        "mismatch": bool(pooled < min_sqnr_db and below * 2 > len(each)),
    }
    if min_agreement is not None and reference.shape[1] > 1:
        same = np.argmax(reference, axis=1) == np.argmax(outputs, axis=1)
        verdict |= {"agreement": float(same.mean()), "min_agreement": min_agreement}
        verdict["mismatch"] = verdict["mismatch"] or verdict["agreement"] < min_agreement
    return verdict


def verdict_line(verdict: dict[str, Any]) -> str:
    """A mismatch's figures in one line (what failed first, then the rest)."""
    if "shape" in verdict:
        return f"output shape {verdict['shape'][1]} where torch gives {verdict['shape'][0]}"
    sqnr = (
        f"SQNR {verdict.get('sqnr_db', float('nan')):.1f} dB against torch (min "
        f"{verdict.get('min_sqnr_db')}), {verdict.get('inputs_below')} of {verdict.get('inputs')} "
        "inputs below"
    )
    if "agreement" in verdict and verdict["agreement"] < verdict["min_agreement"]:
        return (
            f"top-1 agreement {verdict['agreement']:.3f} with torch over {verdict['inputs']} "
            f"inputs (min {verdict['min_agreement']:g}); {sqnr}"
        )
    return sqnr
