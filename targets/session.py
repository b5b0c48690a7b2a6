"""What every target's session shares: tensor specs and the staging of inputs at the model
boundary. numpy only: the emulated ARM64 guest runs this very file (no torch, no edgekit)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from edgekit.errors import UserInputError


class Accelerator(StrEnum):
    """What a session runs on: the CPU kernels (and their delegate) or a GPU delegate."""

    CPU = "cpu-kernels"
    GPU = "gpu-delegate"


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

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> TensorSpec:
        return cls(
            name=str(payload.get("name", "")),
            shape=[int(v) for v in payload["shape"]],
            dtype=str(payload["dtype"]),
            layout=str(payload.get("layout", "NCHW")),
            quantization=payload.get("quantization"),
        )


def to_layout(sample: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """NCHW float32 -> the tensor's layout, checked against its shape."""
    x = np.asarray(sample, dtype=np.float32)
    if spec.layout == "NHWC" and x.ndim == 4:
        x = x.transpose(0, 2, 3, 1)
    if list(x.shape) != list(spec.shape):
        raise UserInputError(
            f"sample of shape {list(sample.shape)} (NCHW) does not fit the model input "
            f"{spec.shape} ({spec.layout})"
        )
    return x


def quantize(x: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Float -> the tensor's integer type with its scale and zero point, rounding half away
    from zero as LiteRT's QUANTIZE does (``np.round`` rounds half to even)."""
    quant = spec.quantization
    dtype = np.dtype(spec.dtype)
    if quant is None:
        return np.ascontiguousarray(x, dtype=dtype)
    info = np.iinfo(dtype)
    scaled = x / quant["scale"]
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + quant["zero_point"]
    return np.ascontiguousarray(np.clip(rounded, info.min, info.max), dtype=dtype)


def stage_input(sample: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """One NCHW float32 sample as the model's input tensor: layout, then quantization."""
    return quantize(to_layout(sample, spec), spec)


def random_inputs(specs: list[dict[str, Any]], seed: int = 0) -> list[np.ndarray]:
    """One random array per input spec, in its dtype (what a latency measurement of a file
    with no image input feeds it)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        shape, dtype = [max(int(d), 1) for d in spec["shape"]], np.dtype(spec["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind in "iu" and dtype.itemsize == 1:
            info = np.iinfo(dtype)
            arrays.append(rng.integers(info.min, info.max + 1, shape, dtype=dtype))
        else:
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
    return arrays


def dequantize(raw: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """An output tensor as float32 logits (N, -1)."""
    values = np.asarray(raw)
    quant = spec.quantization
    if quant is not None:
        values = (values.astype(np.float32) - quant["zero_point"]) * quant["scale"]
    return values.reshape(values.shape[0] if values.ndim > 1 else 1, -1).astype(np.float32)


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

    def stage_raw(self, arrays: list[np.ndarray]) -> Any:
        """Every input as the file declares it, already in its dtype and layout (a file with
        several inputs, or one that takes no image: latency only)."""
        raise NotImplementedError

    def invoke(self, staged: Any) -> Any:
        raise NotImplementedError

    def output(self, raw: Any) -> np.ndarray:
        """The float32 logits of what ``invoke`` returned (dequantized for integer outputs)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the runtime (optional)."""
