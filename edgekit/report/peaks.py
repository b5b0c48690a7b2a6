"""How a results file's matmul peaks read: ``run["peaks"]`` per thread count and arithmetic,
and what gave each (``run["peak_kernels"]``). Formatting only, so the report reads peaks without
the kernels that measure them (``edgekit.measure.peak``)."""

from __future__ import annotations

from typing import Any

FIELDS = {"fp32": "fp32_gflops", "fp16": "fp16_gflops", "int8": "int8_gops"}  # run["peaks"]
UNITS = {"fp32": "GFLOP/s", "fp16": "GFLOP/s", "int8": "GOP/s"}


def peak_of(peaks: dict[str, float], arithmetic: str) -> float | None:
    """The peak of ``arithmetic`` in one thread count's entry of ``run["peaks"]``."""
    return peaks.get(FIELDS.get(arithmetic, "fp32_gflops"))


def percent(share: float) -> str:
    """A share as the report prints it, never above 100 % (a share above 1 comes only from a
    results file older than peak raising)."""
    return f"{100 * min(share, 1.0):.0f} %"


def peak_source(kernels: object, threads: int | str | None, arithmetic: str) -> dict[str, Any]:
    """What gave one peak, from ``run["peak_kernels"]`` ({} where a file has none)."""
    found = kernels
    for key in (str(threads), arithmetic):
        found = found.get(key) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else {}


def _peak_text(arithmetic: str, rate: float, source: dict[str, Any]) -> str:
    """``fp32 195 GFLOP/s (LiteRT XNNPACK FULLY_CONNECTED 512^3)``: a peak and what gave it."""
    unit = UNITS[arithmetic]
    text = f"{arithmetic} {rate:.0f} {unit}"
    if source.get("raised_by"):
        before = source.get("raised_from")
        before = f" from {before:.0f}" if isinstance(before, (int, float)) else ""
        when = str(source.get("raised", ""))[:10]
        return f"{text} (peak raised by {source.get('kernel')}: {rate:.0f} {unit}{before}, {when})"
    return text + (f" ({source['kernel']})" if source.get("kernel") else "")


def peaks_text(figures: dict[str, dict[str, float]], kernels: object = None) -> str:
    """`` (each the best of ...): 1 thr: fp32 ... GFLOP/s (kernel), ...``, from ``run["peaks"]``
    and ``run["peak_kernels"]`` (a results file older than both has only the figures)."""
    how = " (each the best of several kernels, cached per machine)" * bool(kernels)
    return f"{how}: " + "; ".join(
        f"{threads} thr: "
        + (
            ", ".join(
                _peak_text(arithmetic, entry[field], peak_source(kernels, threads, arithmetic))
                for arithmetic, field in FIELDS.items()
                if field in entry
            )
            or "not measured"
        )
        for threads, entry in figures.items()
    )
