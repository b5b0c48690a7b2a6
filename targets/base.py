"""The target protocol: how a source model becomes an artifact, and how an artifact is opened.

A target module defines one subclass of :class:`Target` and registers it with
:func:`edgekit.targets.register`; nothing else in edgekit needs to change for a new runtime.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.models import SourceModel


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor of an artifact."""

    name: str
    shape: list[int]
    dtype: str  # numpy dtype name: float32, float16, int8, uint8
    layout: str  # NCHW, NHWC, or NC for logits
    quantization: dict[str, float] | None = None  # {"scale": s, "zero_point": z} for int I/O

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExportRequest:
    source: SourceModel
    recipe: str  # fp32, fp16, int8, int8-dynamic
    output: Path  # write the artifact exactly here (a temporary name the caller renames)
    calibration: np.ndarray | None = None  # NCHW float32, for recipes that need it
    io_dtype: str = "float32"  # "int8": integer input and output (tflite int8 only)
    keep_float: tuple[str, ...] = ()  # module paths to leave in float (quantize-debug)


@dataclass
class ExportInfo:
    """What a target reports about the file it wrote."""

    input: TensorSpec
    output: TensorSpec
    details: dict[str, Any] = field(default_factory=dict)  # exporter, opset, converter options
    warnings: list[str] = field(default_factory=list)


@dataclass
class Coverage:
    """How much of the graph runs on the fast path (delegate / accelerated kernels / int8)."""

    total_ops: int
    fast_ops: int  # ops inside the delegate or on the accelerated path
    fallback_ops: list[str]  # op types that run outside it (the slow path)
    transposes: int  # NCHW<->NHWC transposes left in the graph
    int8_ops: int | None = None  # compute ops that run in int8 (quantized recipes)
    compute_ops: int | None = None  # denominator for int8_ops
    summary: str = ""

    @property
    def fast_fraction(self) -> float:
        return self.fast_ops / self.total_ops if self.total_ops else 1.0

    @property
    def int8_fraction(self) -> float | None:
        if self.int8_ops is None or not self.compute_ops:
            return None
        return self.int8_ops / self.compute_ops

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["fast_fraction"] = self.fast_fraction
        payload["int8_fraction"] = self.int8_fraction
        return payload


class Session:
    """An opened artifact. ``predict`` is for accuracy; ``stage`` + ``invoke`` are for latency:
    ``stage`` converts one NCHW float32 sample to the runtime's input (outside the timed region)
    and ``invoke`` runs exactly one inference on it."""

    info: dict[str, Any]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Float32 logits (N, classes) for NCHW float32 inputs, one sample at a time."""
        return np.concatenate(
            [self.output(self.invoke(self.stage(x[i : i + 1]))) for i in range(len(x))]
        )

    def stage(self, sample: np.ndarray) -> Any:
        raise NotImplementedError

    def invoke(self, staged: Any) -> Any:
        raise NotImplementedError

    def output(self, raw: Any) -> np.ndarray:
        """The float32 logits of what ``invoke`` returned (dequantized for integer outputs)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the runtime (optional)."""


class Target:
    """Subclass per export format; see the module docstring."""

    name: str = ""
    suffix: str = ""
    runtime: str = ""  # the on-device runtime, for messages

    def unsupported_reason(
        self, recipe: str, source: SourceModel, io_dtype: str = "float32"
    ) -> str | None:
        """None when this target can export ``recipe`` for ``source``, else why not."""
        return None

    def export(self, request: ExportRequest) -> ExportInfo:
        raise NotImplementedError

    def open(
        self,
        path: Path,
        manifest: dict[str, Any],
        device: str = "cpu",
        threads: int = 1,
        **options: Any,
    ) -> Session:
        """Open on ``device``; ``options`` are target-specific (tflite: ``xnnpack=False``)."""
        raise NotImplementedError

    def coverage(self, path: Path, manifest: dict[str, Any]) -> Coverage:
        raise NotImplementedError

    def versions(self) -> dict[str, str]:
        """Versions of the packages this target exports and runs with."""
        return {}
