"""ExecuTorch target: export digits-mobilenet per recipe, run the .pte on the XNNPACK CPU path
and hold its outputs and its delegate coverage against the source model.

Measured on digits-mobilenet, 100 evaluation samples (executorch 1.5.1, torch 2.13.0):
fp32 SQNR 130 dB, max diff 3e-6; fp16 54 dB; int8 31.4 dB; int8-dynamic 41.2 dB; agreement
1.0 for all. The bounds below leave several dB of margin.
"""

from __future__ import annotations

import numpy as np
import pytest
from target_helpers import export_raw

from edgekit.common.metrics import compare_outputs
from edgekit.errors import DeviceUnavailable, UnsupportedExport
from edgekit.sources.source import SourceModel
from edgekit.targets import get_target
from edgekit.targets.base import ExportRequest, Manifest
from edgekit.targets.session import Accelerator

pytestmark = pytest.mark.slow

SAMPLES = 100
# recipe -> (min SQNR dB, min top-1 agreement, max abs diff or None)
BOUNDS = {
    "fp32": (40.0, 0.99, 1e-4),
    "fp16": (45.0, 0.98, None),
    "int8": (25.0, 0.95, None),
    "int8-dynamic": (33.0, 0.97, None),
}


@pytest.fixture(scope="module")
def target():
    return get_target("executorch")


@pytest.fixture(scope="module")
def artifacts(digits_export):
    """Every recipe from the session's store (exported once per test run, calibration 200):
    recipe -> (path, manifest, ExportInfo)."""
    return {recipe: digits_export("executorch", recipe) for recipe in BOUNDS}


@pytest.mark.parametrize("recipe", list(BOUNDS))
def test_exported_pte_matches_the_source_model(
    target, artifacts, digits_model, digits_data, recipe
):
    path, manifest, info = artifacts[recipe]
    assert info.input.dtype == "float32" and info.input.shape == [1, 1, 32, 32]
    assert info.output.shape == [1, 10] and info.output.dtype == "float32"

    x = digits_data.evaluation.x[:SAMPLES]
    session = target.open(path, manifest, threads=1)
    try:
        figures = compare_outputs(digits_model.predict(x), session.predict(x))
    finally:
        session.close()

    min_sqnr, min_agreement, max_diff = BOUNDS[recipe]
    assert figures["sqnr_db"] >= min_sqnr, figures
    assert figures["top1_agreement"] >= min_agreement, figures
    if max_diff is not None:
        assert figures["max_abs_diff"] <= max_diff, figures
    assert session.info["delegate"] == "XNNPACK"
    assert session.info["threads"] == 1
    assert "XnnpackBackend" in session.info["backends"]


def test_session_stages_outside_the_timed_call(target, artifacts, digits_data):
    path, manifest, _ = artifacts["fp32"]
    session = target.open(path, manifest, threads=1)
    staged = session.stage(digits_data.evaluation.x[:1])
    assert staged.dtype.is_floating_point and staged.is_contiguous()
    assert tuple(staged.shape) == (1, 1, 32, 32)
    first = session.output(session.invoke(staged))
    kept = first.copy()
    other = session.output(session.invoke(session.stage(digits_data.evaluation.x[1:2])))
    assert first.dtype == np.float32 and first.shape == (1, 10)
    assert not np.array_equal(other, kept)  # another image, other logits
    np.testing.assert_array_equal(first, kept)  # output() copies; a rerun does not clobber it
    session.close()


RUN_WITHOUT_THE_COMPILER = """
import sys
from pathlib import Path

import numpy as np

from edgekit.artifacts.artifact import load_artifact
from edgekit.targets import get_target

artifact = load_artifact(Path(sys.argv[1]))
session = get_target("executorch").open(artifact.path, artifact.manifest, threads=1)
out = session.predict(np.zeros((1, 1, 32, 32), np.float32))
loaded_compiler = "executorch.exir.pass_base" in sys.modules
from executorch.exir import to_edge_transform_and_lower  # an export after it still works
print(out.shape, loaded_compiler, callable(to_edge_transform_and_lower))
"""


def test_running_a_pte_leaves_the_compiler_unloaded_and_an_export_after_it_works(artifacts):
    """Loading ExecuTorch's compiler cost about 8 s per process: a worker never needs it."""
    import subprocess
    import sys

    path, _, _ = artifacts["fp32"]
    done = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_THE_COMPILER, str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "(1, 10) False True", done.stdout


def test_threads_setting_is_what_the_runtime_reports(target, artifacts):
    path, manifest, _ = artifacts["fp32"]
    session = target.open(path, manifest, threads=2)
    assert session.info["threads"] == 2
    session.close()
    target.open(path, manifest, threads=1).close()  # back to the default here


@pytest.mark.parametrize("recipe", ["fp32", "int8", "int8-dynamic"])
def test_whole_graph_runs_in_the_xnnpack_delegate(target, artifacts, recipe):
    path, manifest, info = artifacts[recipe]
    coverage = target.coverage(path, manifest)
    assert coverage.fallback_ops == [], coverage.summary
    assert coverage.fast_fraction == 1.0
    assert coverage.total_ops >= 27  # 19 convs + FC + adds, read from the delegate payload
    assert coverage.transposes == 0
    assert info.details["delegate_calls"] == 1 and info.details["non_delegated_ops"] == []


def test_static_int8_quantizes_every_compute_op(target, artifacts):
    path, manifest, info = artifacts["int8"]
    coverage = target.coverage(path, manifest)
    assert coverage.int8_fraction == 1.0, coverage.summary
    assert coverage.compute_ops == 20  # 19 conv + 1 linear: the ops with the MACs
    assert info.details["quantized_conv_linear_nodes"] == info.details["conv_linear_nodes"] == 20
    assert info.warnings == []


def test_dynamic_int8_leaves_depthwise_convs_and_adds_in_float(target, artifacts):
    path, manifest, info = artifacts["int8-dynamic"]
    coverage = target.coverage(path, manifest)
    # XNNPACK's dynamic config takes the 12 1x1 convs and the linear layer only
    assert coverage.int8_ops == 13 and coverage.compute_ops == 20, coverage.summary
    assert info.details["float_conv_linear_layers"][0] == "stem.0"
    assert any("13/20 conv/linear" in note and "block1.dw" in note for note in info.warnings)
    assert any("adds and pooling run in fp32" in note for note in info.warnings)


def test_fp16_keeps_float32_io_and_names_its_two_casts(target, artifacts):
    path, manifest, info = artifacts["fp16"]
    coverage = target.coverage(path, manifest)
    assert coverage.fallback_ops == ["dim_order_ops::_to_dim_order_copy"], coverage.summary
    assert coverage.total_ops - coverage.fast_ops == 2
    assert coverage.int8_fraction is None
    assert any("cast" in note for note in info.warnings)
    assert path.stat().st_size < artifacts["fp32"][0].stat().st_size


def test_coverage_reports_a_portable_only_program_as_fallback(target, digits_model, tmp_path):
    """A .pte lowered without the XNNPACK partitioner runs every op on portable kernels."""
    import torch
    from executorch.exir import to_edge

    example = torch.from_numpy(digits_model.example_input())
    program = to_edge(torch.export.export(digits_model.module, (example,))).to_executorch()
    path = tmp_path / "portable.pte"
    path.write_bytes(program.buffer)

    coverage = target.coverage(path, Manifest({"recipe": "fp32"}))
    assert coverage.fast_ops == 0 and coverage.fast_fraction == 0.0
    assert coverage.total_ops > 50
    assert {"aten::convolution", "aten::addmm"} <= set(coverage.fallback_ops)
    assert "portable kernel call" in coverage.summary


def test_an_op_xnnpack_lacks_is_named_in_warnings_and_coverage(target, digits_model, tmp_path):
    """cumsum has no XNNPACK kernel: the .pte still runs, and both reports say so."""
    import torch

    class CumsumNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3)
            self.fc = torch.nn.Linear(4, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.conv(x).cumsum(dim=3).mean(dim=(2, 3)))

    source = SourceModel("cumsum", "torch", CumsumNet().eval(), digits_model.preprocess, "", "t")
    path, manifest, info = export_raw(target, source, "fp32", tmp_path)
    coverage = target.coverage(path, manifest)
    assert any("cumsum" in note for note in info.warnings)
    assert "aten::cumsum" in coverage.fallback_ops, coverage.summary
    assert 0.0 < coverage.fast_fraction < 1.0


def test_keep_float_leaves_a_layer_in_float_inside_the_delegate(
    target, digits_model, calibration, tmp_path
):
    path, manifest, info = export_raw(
        target, digits_model, "int8", tmp_path, calibration=calibration.x, keep_float=("stem",)
    )
    coverage = target.coverage(path, manifest)
    assert info.details["float_conv_linear_layers"] == ["stem.0"]
    assert coverage.int8_ops == coverage.compute_ops - 1, coverage.summary
    assert coverage.fast_fraction == 1.0


def test_keras_models_are_rejected_with_a_reason(target, digits_model, tmp_path):
    keras_like = SourceModel(
        name="digits-keras",
        framework="keras",
        module=None,
        preprocess=digits_model.preprocess,
        digest="",
        spec="digits.keras",
    )
    reason = target.unsupported_reason("fp32", keras_like)
    assert reason is not None and "torch" in reason and "keras" in reason
    assert "exports torch models" in reason


def test_integer_io_and_unknown_recipes_are_rejected(target, digits_model, tmp_path):
    assert "io_dtype int8" in target.unsupported_reason("int8", digits_model, io_dtype="int8")
    assert target.unsupported_reason("int8", digits_model) is None
    assert "unknown recipe" in target.unsupported_reason("int4", digits_model)
    with pytest.raises(UnsupportedExport, match="calibration"):
        target.export(ExportRequest(digits_model, "int8", tmp_path / "x.pte"))


def test_gpu_is_unavailable_and_the_reason_lists_the_runtime_backends(target, artifacts):
    from executorch.runtime import Runtime

    path, manifest, _ = artifacts["fp32"]
    with pytest.raises(DeviceUnavailable) as raised:
        target.open(path, manifest, Accelerator.GPU)
    for backend in Runtime.get().backend_registry.registered_backend_names:
        assert backend in str(raised.value)
    assert "no GPU backend" in str(raised.value)


def test_the_target_names_its_runtime_packages(target):
    assert set(target.packages) == {"executorch", "torch", "torchao"}
    assert target.official_runner().env_var == "EDGEKIT_EXECUTOR_RUNNER"


def test_a_lowering_error_names_the_innermost_cause():
    """XNNPACK's passes wrap the construct that failed; the one line names both."""
    from edgekit.errors import cause_line

    try:
        try:
            raise ValueError("required rank 4 tensor to use channels_last format\nmore")
        except ValueError as inner:
            raise RuntimeError(
                "An error occurred when running the 'ChannelsLastTaggedReshapePass'"
            ) from inner
    except RuntimeError as outer:
        line = cause_line(outer)
    assert line == (
        "RuntimeError: An error occurred when running the 'ChannelsLastTaggedReshapePass' <- "
        "ValueError: required rank 4 tensor to use channels_last format"
    )


def test_a_file_its_runtime_cannot_run_is_an_unsupported_export_not_an_internal_error(digits_model):
    """A .pte XNNPACK refuses at execute() (EfficientNet int8-dynamic did) is one line."""
    from edgekit.export.pipeline import _validate
    from edgekit.quantize.recipes import get_recipe

    class Refusing:
        def predict(self, x):
            raise RuntimeError("method->execute() failed with error 0x1")

        def close(self):
            pass

    class Plugin:
        def open(self, *args, **kwargs):
            return Refusing()

    manifest = Manifest({"target": "executorch", "recipe": "int8-dynamic"})
    x = digits_model.example_input(2)
    said = r"executorch/int8-dynamic: .*does not run in its runtime \(RuntimeError: method->exe"
    with pytest.raises(UnsupportedExport, match=said):
        _validate(Plugin(), None, manifest, digits_model, x, get_recipe("int8-dynamic"))
