"""edgekit's own accuracy regression tests, written the way a user's CI would write them: every
target x recipe of digits-mobilenet, gated with the bounds that are honest for it (measured on
this model; the drop gate uses the 95 % upper bound of the paired bootstrap interval)."""

from __future__ import annotations

import pytest

from edgekit.testing import assert_accuracy_drop

# recipe -> (max drop in points, min top-1 agreement with the baseline)
BOUNDS = {
    "fp32": (0.5, 0.999),
    "fp16": (0.5, 0.995),
    "int8": (1.0, 0.98),
    "int8-dynamic": (1.0, 0.98),
}


@pytest.mark.slow
@pytest.mark.parametrize("recipe", list(BOUNDS))
@pytest.mark.parametrize("target", ["tflite", "executorch", "onnx"])
def test_digits_mobilenet_keeps_its_accuracy(export_digits, target, recipe):
    max_drop, min_agreement = BOUNDS[recipe]
    record = assert_accuracy_drop(
        export_digits(target, recipe).path,
        data="digits",
        max_drop=max_drop,
        min_agreement=min_agreement,
    )
    assert record.samples == 899


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["fp32", "int8"])
def test_the_gpu_delegate_numerics_stay_close(export_digits, recipe):
    """LiteRT's GPU accelerator computes in fp16: its own numerics, scored the same way."""
    from edgekit.common.machine import vulkan_facts

    if not vulkan_facts()["available"]:
        pytest.skip(
            "no Vulkan driver here (CI installs Mesa's lavapipe: scripts/install-vulkan.sh)"
        )
    record = assert_accuracy_drop(
        export_digits("tflite", recipe).path, max_drop=1.0, min_agreement=0.98, device="gpu"
    )
    assert record.device == "gpu" and record.sqnr_db > 20
