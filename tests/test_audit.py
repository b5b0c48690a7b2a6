"""``edgekit audit`` through the CLI on seeded mislabels: files that are not what they are
called, made by the runtimes' own tools and by edgekit, each caught with its reason."""

from __future__ import annotations

import json
import shutil

import foreign_files
import pytest
from cli_helpers import run_cli


@pytest.fixture(scope="module")
def converter_files(keras_digits_files):
    """TFLiteConverter's files of a Keras model, and one with a fallback op (``cumsum``)."""
    return keras_digits_files


def _audit(capsys, *args):
    result = run_cli(capsys, "audit", *args)
    reasons = [line for line in result.out.splitlines() if line.startswith("NOT AS EXPECTED")]
    return result, reasons


def test_an_fp32_file_named_int8_is_caught(capsys, tmp_path, converter_files):
    named = tmp_path / "model-int8.tflite"
    shutil.copy(converter_files["fp32"], named)
    result, [reason] = _audit(capsys, str(named), "--expect", "int8")
    assert result.code == 1
    assert "3 of 3 conv/matmul ops compute in float (100.0 % of MACs)" in reason
    assert "looks like fp32" in result.out


def test_a_dynamic_range_file_expected_static_is_caught(capsys, converter_files):
    result, reasons = _audit(capsys, str(converter_files["dynamic"]), "--expect", "int8")
    assert result.code == 1
    assert "looks like int8-dynamic" in result.out
    assert any("dynamic-range (int8 weights, activations quantized" in r for r in reasons)
    # TFLiteConverter leaves weights under 1024 elements float, by its own rule: judged by that
    # rule, as its label is, the file is the int8-dynamic it looks like, and those ops are said
    result, reasons = _audit(capsys, str(converter_files["dynamic"]), "--expect", "int8-dynamic")
    assert result.code == 0 and reasons == []
    assert "looks like int8-dynamic" in result.out
    said = next(line for line in result.out.splitlines() if "converter's rule" in line)
    assert "2 of 3 conv/matmul ops" in said and "under 1024 elements float" in said


def test_float_io_where_int8_io_is_expected_is_caught(capsys, converter_files):
    result, reasons = _audit(capsys, str(converter_files["fp32"]), "--expect-io", "int8")
    assert result.code == 1
    assert len(reasons) == 2 and all("float32, expected int8" in r for r in reasons)
    result, reasons = _audit(capsys, str(converter_files["int8"]), "--expect", "int8",
                             "--expect-io", "int8")  # fmt: skip
    assert result.code == 0 and not reasons, result.out


def test_expect_io_takes_the_words_export_io_takes(capsys, converter_files):
    # one vocabulary: float32 (export --io's word) means float, as float does
    for word in ("float", "float32"):
        result, reasons = _audit(capsys, str(converter_files["fp32"]), "--expect-io", word)
        assert result.code == 0 and not reasons, result.out
        result, reasons = _audit(capsys, str(converter_files["int8"]), "--expect-io", word)
        assert result.code == 1 and all("expected float" in r for r in reasons), reasons


def test_a_fallback_op_under_full_delegation_is_caught(capsys, converter_files):
    result, [reason] = _audit(capsys, str(converter_files["cumsum"]), "--require-full-delegation")
    assert result.code == 1
    assert "CUMSUM (builtin kernels)" in reason


def test_fp16_weights_are_fp16_even_where_the_cpu_computes_fp32(capsys, converter_files):
    [report] = json.loads(run_cli(capsys, "audit", str(converter_files["fp16"]), "--json").out)
    assert report["looks_like"] == "fp16"
    assert report["weights"] == {"fp16": 3}
    result, reasons = _audit(capsys, str(converter_files["fp16"]), "--expect", "int8")
    assert result.code == 1 and "compute in float" in reasons[0]


def test_edgekit_int8_is_static_per_channel_on_every_target(capsys, export_digits):
    paths = [str(export_digits(target, "int8").path) for target in ("tflite", "onnx", "executorch")]
    result = run_cli(capsys, "audit", *paths, "--expect", "int8", "--json")
    assert result.code == 0, result.out[-3000:]
    reports = json.loads(result.out)
    assert [report["path"] for report in reports] == paths  # one report per file, in order
    for report in reports:
        assert report["looks_like"] == "int8" and report["quantization"] == "static"
        assert report["compute"]["int8"]["mac_share"] == 1.0, report["path"]
        assert set(report["weights"]) == {"int8 per-channel"}, report["path"]


def test_an_fp32_onnx_and_pte_named_int8_are_caught(capsys, export_digits, tmp_path):
    for target, suffix in (("onnx", ".onnx"), ("executorch", ".pte")):
        named = tmp_path / f"model-int8{suffix}"
        shutil.copy(export_digits(target, "fp32").path, named)
        result, reasons = _audit(capsys, str(named), "--expect", "int8")
        assert result.code == 1 and "compute in float (100.0 % of MACs)" in reasons[0]


def test_float_islands_are_named_by_module_path(capsys, digits_model, digits_data, tmp_path):
    from edgekit.export.pipeline import export_artifact

    made = export_artifact(digits_model, digits_data, "tflite", "int8", out_dir=tmp_path,
                           keep_float=("block6.project",)).artifact  # fmt: skip
    assert made.manifest.audit["passed"]  # asked for: not a reason at export
    result, [reason] = _audit(capsys, str(made.path), "--expect", "int8")
    assert result.code == 1
    assert "float islands (1): block6.project" in result.out
    assert "1 of 20 conv/matmul ops compute in float" in reason and "block6.project" in reason


def test_export_audits_what_it_wrote(export_digits):
    fp16 = export_digits("tflite", "fp16").manifest.audit
    assert fp16["looks_like"] == "fp16" and fp16["passed"]
    dynamic = export_digits("onnx", "int8-dynamic")
    # onnxruntime's dynamic quantization takes MatMul/Gemm only: the convolutions stay float
    assert not dynamic.manifest.audit["passed"]
    assert any("compute in float" in w for w in dynamic.manifest.warnings)


def test_a_third_party_zoo_file_is_described(capsys):
    squeezenet = foreign_files.light_model("light_squeezenet")
    [report] = json.loads(run_cli(capsys, "audit", str(squeezenet), "--json").out)
    assert report["looks_like"] == "fp32"
    assert report["compute"]["fp32"]["ops"] == 26  # its 26 convolutions
    assert report["compute"]["fp32"]["macs"] > 300_000_000  # SqueezeNet 1.0: ~0.35 GMAC


def test_a_plain_executorch_file_without_xnnpack_is_not_delegated(capsys, digits_foreign_pte):
    bare = digits_foreign_pte(xnnpack=False)
    result, [reason] = _audit(capsys, str(bare), "--require-full-delegation")
    assert result.code == 1
    assert "aten::convolution.out (portable kernels)" in reason
    lowered = digits_foreign_pte(xnnpack=True)
    result, reasons = _audit(capsys, str(lowered), "--require-full-delegation", "--expect", "fp32")
    assert result.code == 0 and not reasons, result.out
