"""The settings of the onnx int8 recipe's ``quantize_static``, in one place: export's
quantization and ``edgekit culprit``'s block conversions take them from here, and a repro folder
carries this file as it is."""

from __future__ import annotations

from typing import Any


def static_options() -> dict[str, Any]:
    """onnxruntime's ``quantize_static`` settings of the int8 recipe: the export's and
    ``edgekit culprit``'s block conversions quantize alike."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType

    return {
        "quant_format": QuantFormat.QDQ,
        "activation_type": QuantType.QUInt8,  # U8S8: the fast x86 kernels (S8S8 is 1.7x slower)
        "weight_type": QuantType.QInt8,
        "per_channel": True,
        "calibrate_method": CalibrationMethod.MinMax,
        # 7-bit weights: on an x86 CPU without VNNI, onnxruntime's U8S8 kernels add pairs of
        # u8 x s8 products in int16 (VPMADDUBSW), which saturates with full-range weights (the
        # built-in model: 11.2 dB on an AVX2-only EPYC, 31.2 dB with 7-bit weights). The file
        # may run on such a CPU wherever it was made, so every file gets them.
        "reduce_range": True,
    }
