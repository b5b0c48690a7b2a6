"""The tflite target: every recipe exported from digits-mobilenet (litert-torch) and from a small
Keras model (tf.lite), opened with the LiteRT Interpreter (XNNPACK and builtin kernels) and the
GPU accelerator, measured against the source model; coverage read from the file; unsupported cases.

Bounds are the measured figures with margin (100 evaluation samples, ai-edge-litert 2.3.0, x86):
digits-mobilenet fp32 SQNR 129 dB; int8 26.0 dB (max abs diff 0.67), same with int8 I/O;
int8-dynamic 37.0 dB (20 of 27 ops delegated: XNNPACK leaves the 7 hybrid depthwise convs);
fp16 62.7 dB; all agree 100%. Keras model (random weights, random data): see the Keras tests.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from target_helpers import export_raw as export
from target_helpers import measure

from edgekit.common.metrics import compare_outputs
from edgekit.errors import DeviceUnavailable, UnsupportedExport, UserInputError
from edgekit.sources.source import SourceModel
from edgekit.targets import get_target
from edgekit.targets.base import ExportRequest
from edgekit.targets.layermap import unmapped_reason
from edgekit.targets.session import Accelerator
from edgekit.targets.tflite.flatbuffer import graph_ops

SAMPLES = 100


@pytest.fixture(scope="module")
def target():
    return get_target("tflite")


@pytest.fixture(scope="module")
def artifacts(digits_export):
    """(recipe, io_dtype) -> (path, manifest, info), from the session's store (each exported
    once per test run, calibration 200)."""
    return lambda recipe, io_dtype="float32": digits_export("tflite", recipe, io_dtype)


# ---- digits-mobilenet (torch -> litert-torch) ------------------------------------------------


def test_fp32_is_nhwc_fully_delegated_and_matches_torch(target, artifacts, reference):
    path, manifest, info = artifacts("fp32")
    # to_channel_last_io moved the layout change out of the graph: the file takes NHWC
    assert info.input.layout == "NHWC" and info.input.shape == [1, 32, 32, 1]
    assert info.input.dtype == "float32" and info.output.shape == [1, 10]
    assert info.details["channel_last_io"] is True
    assert info.details["converter"].startswith("litert-torch")

    metrics, runtime = measure(target, path, manifest, reference, threads=2)
    assert metrics["sqnr_db"] >= 40 and metrics["top1_agreement"] >= 0.99
    assert runtime["delegate"] == "XNNPACK" and runtime["delegate_applied"] is True
    assert runtime["threads"] == 2

    coverage = target.coverage(path, manifest)
    assert coverage.total_ops == info.details["ops"] > 20
    assert coverage.fast_ops == coverage.total_ops and coverage.fallback_ops == []
    assert coverage.transposes == 0 and coverage.int8_fraction is None


def test_fp32_without_xnnpack_runs_the_builtin_kernels(target, artifacts, reference):
    path, manifest, _ = artifacts("fp32")
    metrics, runtime = measure(target, path, manifest, reference, xnnpack=False)
    assert runtime["delegate"] is None and runtime["delegate_applied"] is False
    assert runtime["delegated_ops"].startswith("0/")
    assert metrics["sqnr_db"] >= 40 and metrics["top1_agreement"] >= 0.99


def test_stage_invoke_output_contract(target, artifacts, reference):
    path, manifest, _ = artifacts("fp32")
    session = target.open(path, manifest)
    staged = session.stage(reference[0][:1])
    assert staged.shape == (1, 32, 32, 1) and staged.dtype == np.float32  # NCHW -> NHWC
    logits = session.output(session.invoke(staged))
    assert logits.shape == (1, 10) and logits.dtype == np.float32
    with pytest.raises(UserInputError, match="does not fit"):
        session.stage(np.zeros((1, 3, 32, 32), np.float32))
    session.close()


def test_int8_has_float_io_and_runs_all_compute_in_int8(target, artifacts, reference):
    path, manifest, info = artifacts("int8")
    assert info.input.dtype == "float32" and info.input.quantization is None
    assert info.output.dtype == "float32"
    assert "PT2EQuantizer" in info.details["quantizer"]
    # litert-torch makes int8 I/O; the target puts QUANTIZE/DEQUANTIZE ops at the boundary
    ops = graph_ops(path)
    assert ops[0].name == "QUANTIZE" and ops[0].inputs == ("float32",)
    assert ops[-1].name == "DEQUANTIZE" and ops[-1].outputs == ("float32",)

    metrics, runtime = measure(target, path, manifest, reference)
    assert metrics["sqnr_db"] >= 22 and metrics["top1_agreement"] >= 0.97
    assert metrics["max_abs_diff"] < 1.5
    assert runtime["delegate_applied"] is True

    coverage = target.coverage(path, manifest)
    assert coverage.fast_ops == coverage.total_ops and coverage.transposes == 0
    # every conv, fc, residual add and mean takes int8 activations in this graph
    assert coverage.compute_ops == 20 and coverage.int8_fraction == 1.0  # 19 conv + 1 fc
    assert "float compute ops" not in coverage.summary


def test_int8_keep_float_leaves_that_module_float(
    target, digits_model, calibration, reference, tmp_path
):
    # litert-torch's converter re-quantizes a float op left in a PT2E graph, so keep_float goes
    # through ai-edge-quantizer on the fp32 file with NO_QUANTIZE for the module's ops
    path, manifest, info = export(
        target, digits_model, "int8", tmp_path, calibration.x, keep_float=("block2.dw",)
    )
    assert "NO_QUANTIZE for block2.dw" in info.details["quantizer"]
    assert info.details["float_ops"] == {"block2.dw": ["PAD", "DEPTHWISE_CONV_2D"]}
    assert info.input.dtype == "float32" and info.output.dtype == "float32"
    ops = graph_ops(path)
    depthwise = [op for op in ops if op.name == "DEPTHWISE_CONV_2D"]
    assert [op.inputs[0] for op in depthwise].count("float32") == 1  # block2.dw, nothing else
    assert ops[0].name == "QUANTIZE" and ops[-1].name == "DEQUANTIZE"

    metrics, _ = measure(target, path, manifest, reference)
    # measured 18.1 dB and 99.7 % agreement (ai-edge-quantizer's static recipe is ~8 dB below
    # litert-torch's PT2E int8 on this model, with or without the float island)
    assert metrics["sqnr_db"] >= 14 and metrics["top1_agreement"] >= 0.96

    coverage = target.coverage(path, manifest)
    assert coverage.fast_ops == coverage.total_ops  # the float island stays in XNNPACK
    assert coverage.int8_ops == coverage.compute_ops - 1
    assert "float compute ops: DEPTHWISE_CONV_2D x1" in coverage.summary


def test_int8_with_int8_io_quantizes_in_stage(target, artifacts, reference):
    path, manifest, info = artifacts("int8", "int8")
    assert info.input.dtype == "int8" and info.output.dtype == "int8"
    assert info.input.quantization["scale"] > 0 and info.output.quantization["scale"] > 0
    assert [op.name for op in graph_ops(path)].count("QUANTIZE") == 0

    session = target.open(path, manifest)
    staged = session.stage(reference[0][:1])
    assert staged.dtype == np.int8 and staged.shape == (1, 32, 32, 1)
    raw = session.invoke(staged)
    assert raw.dtype == np.int8
    session.close()

    metrics, _ = measure(target, path, manifest, reference)
    assert metrics["sqnr_db"] >= 22 and metrics["top1_agreement"] >= 0.97
    # the same int8 graph as the float-I/O model: logits agree to a few output steps
    float_path, float_manifest, _ = artifacts("int8")
    x = reference[0][:20]
    with_int_io = target.open(path, manifest).predict(x)
    with_float_io = target.open(float_path, float_manifest).predict(x)
    assert np.abs(with_int_io - with_float_io).max() <= 3 * info.output.quantization["scale"]


def test_int8_dynamic_leaves_hybrid_depthwise_convs_off_xnnpack(target, artifacts, reference):
    path, manifest, info = artifacts("int8-dynamic")
    assert "dynamic_wi8_afp32" in info.details["quantizer"]
    metrics, _ = measure(target, path, manifest, reference)
    assert metrics["sqnr_db"] >= 30 and metrics["top1_agreement"] >= 0.97

    coverage = target.coverage(path, manifest)
    assert coverage.fallback_ops == ["DEPTHWISE_CONV_2D"]
    assert 0.6 < coverage.fast_fraction < 0.9
    # int8 weights on every conv and the fc (the int8 share counts the MAC ops); the residual
    # ADDs and the MEAN stay float, and the summary names them
    assert coverage.int8_fraction == 1.0
    assert "float compute ops: ADD x3, MEAN x1" in coverage.summary


def test_fp16_halves_the_weights_and_stays_fully_delegated(target, artifacts, reference):
    fp32_path, _, _ = artifacts("fp32")
    path, manifest, _ = artifacts("fp16")
    assert path.stat().st_size < 0.7 * fp32_path.stat().st_size
    assert any(op.name == "DEQUANTIZE" and op.inputs == ("float16",) for op in graph_ops(path))
    metrics, _ = measure(target, path, manifest, reference)
    assert metrics["sqnr_db"] >= 50 and metrics["top1_agreement"] >= 0.99
    coverage = target.coverage(path, manifest)
    assert coverage.fast_ops == coverage.total_ops


def test_channel_last_io_removes_the_input_transpose(target, tmp_path):
    """A 3-channel model: plain litert-torch conversion starts with an NCHW->NHWC TRANSPOSE."""
    import litert_torch

    from edgekit.sources.architectures import MobileNetV2
    from edgekit.sources.preprocess import Preprocess

    torch.manual_seed(0)
    module = MobileNetV2(
        num_classes=10,
        in_channels=3,
        stem_channels=8,
        stem_stride=2,
        last_channels=32,
        blocks=((1, 8, 1, 1), (4, 16, 2, 2)),
        dropout=0.0,
    ).eval()
    preprocess = Preprocess((32, 32), 3, (0.0,) * 3, (1.0,) * 3, tuple("0123456789"))
    source = SourceModel("rgb-net", "torch", module, preprocess, "test", "test")
    plain = tmp_path / "plain.tflite"
    litert_torch.convert(module, (torch.from_numpy(source.example_input()),)).export(str(plain))
    assert [op.name for op in graph_ops(plain)].count("TRANSPOSE") >= 1

    path, manifest, info = export(target, source, "fp32", tmp_path)
    assert not path.name.endswith(".tflite") and path.is_file()  # written exactly there
    assert info.input.layout == "NHWC" and info.input.shape == [1, 32, 32, 3]
    assert info.details["transposes"] == 0 and target.coverage(path, manifest).transposes == 0
    x = np.random.default_rng(1).standard_normal((8, 3, 32, 32)).astype(np.float32)
    metrics = compare_outputs(source.predict(x), target.open(path, manifest).predict(x))
    assert metrics["sqnr_db"] >= 40


# ---- unsupported combinations ----------------------------------------------------------------


def test_unsupported_combinations_say_why(target, digits_model, calibration, tmp_path):
    reason = target.unsupported_reason("fp16", digits_model, io_dtype="int8")
    assert "int8 input/output needs the int8 (static) recipe" in reason
    assert target.unsupported_reason("int8", digits_model, io_dtype="int8") is None
    dynamic = target.unsupported_reason("int8-dynamic", digits_model, io_dtype="int8")
    assert dynamic.startswith("tflite int8-dynamic: int8 input/output")
    with pytest.raises(UnsupportedExport, match="keep_float applies to the int8 recipe only"):
        target.export(
            ExportRequest(digits_model, "int8-dynamic", tmp_path / "b", keep_float=("block2.dw",))
        )
    # a path that names no module is refused before converting
    with pytest.raises(
        UserInputError, match=r"tflite int8: no module block2\.x in digits-mobilenet"
    ):
        target.export(
            ExportRequest(
                digits_model, "int8", tmp_path / "b", calibration.x, keep_float=("block2.x",)
            )
        )
    assert not (tmp_path / "b").exists()
    # a module no op of the converted file comes from is refused with that reason (once converted)
    reason = unmapped_reason("block2.x", ["stem", "block2.dw", None], "tflite")
    assert reason == "no op of the tflite file comes from it or from a module inside it"
    with pytest.raises(UserInputError, match="needs calibration"):
        target.export(ExportRequest(digits_model, "int8", tmp_path / "c"))
    jax_model = SourceModel("j", "jax", None, digits_model.preprocess, "d", "s")
    assert "is a jax model; tflite exports torch, keras" in target.unsupported_reason(
        "fp32", jax_model
    )
    assert "unknown recipe" in target.unsupported_reason("int4", digits_model)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_the_target_declares_what_it_can_do(target):
    assert target.io_dtypes == ("float32", "int8") and Accelerator.GPU in target.accelerators
    assert "ai-edge-litert" in target.packages and target.session_options == ("xnnpack", "api")
    assert target.official_runner().env_var == "EDGEKIT_BENCHMARK_MODEL"


# ---- GPU (LiteRT CompiledModel, WebGPU over Vulkan) ------------------------------------------


def predict_on_gpu(path, x):
    """The GPU session in a child process, as edgekit always runs it: a GPU driver that crashes
    (some do once TensorFlow is loaded in the same process) must not take the caller down."""
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.devices import get_device

    try:
        return get_device("gpu").predict(load_artifact(path), x)
    except DeviceUnavailable as exc:
        pytest.skip(f"no LiteRT GPU accelerator here: {exc}")


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["fp32", "int8"])
def test_gpu_runs_fully_accelerated(export_digits, reference, recipe):
    outputs, info = predict_on_gpu(export_digits("tflite", recipe).path, reference[0])
    assert info["device"] == "gpu" and info["fully_accelerated"] is True
    metrics = compare_outputs(reference[1], outputs)
    # the GPU computes in fp16: measured on lavapipe fp32 56 dB, int8 30 dB
    assert metrics["sqnr_db"] >= (45 if recipe == "fp32" else 22)
    assert metrics["top1_agreement"] >= 0.97


def test_gpu_without_a_vulkan_driver_is_unavailable(artifacts):
    """In a process that sees no Vulkan driver, device gpu raises DeviceUnavailable with why."""
    path, manifest, _ = artifacts("fp32")
    script = (
        "import json, sys\n"
        "from edgekit.targets import get_target\n"
        "from edgekit.targets.session import Accelerator\n"
        "from edgekit.targets.manifest import Manifest\n"
        "from edgekit.errors import DeviceUnavailable\n"
        "manifest = Manifest(json.loads(sys.argv[2]))\n"
        "try:\n"
        "    get_target('tflite').open(sys.argv[1], manifest, Accelerator.GPU)\n"
        "except DeviceUnavailable as exc:\n"
        "    print('UNAVAILABLE', exc)\n"
    )
    import json

    result = subprocess.run(
        [sys.executable, "-c", script, str(path), json.dumps(manifest.to_dict())],
        env={"VK_ICD_FILENAMES": "/nonexistent/icd.json", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "UNAVAILABLE tflite gpu:" in result.stdout, result.stderr[-2000:]
    assert "No adapters found" in result.stdout


# ---- a Keras source (tf.lite.TFLiteConverter) ------------------------------------------------


@pytest.fixture(scope="module")
def keras_source(tmp_path_factory):
    """A small NHWC Keras CNN (conv, BN, ReLU6, depthwise, residual add, GAP, dense) with random
    weights and non-trivial BN statistics, saved and loaded as a user's .keras file."""
    import keras

    from edgekit.sources.load import load_model

    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((32, 32, 3))
    x = layers.ReLU(6.0)(layers.BatchNormalization()(layers.Conv2D(32, 3, strides=2)(inputs)))
    # wide enough that tf.lite's dynamic range quantizes the weights (it skips < 1024 elements)
    y = layers.ReLU(6.0)(layers.BatchNormalization()(layers.Conv2D(64, 1)(x)))
    y = layers.ReLU(6.0)(layers.BatchNormalization()(layers.DepthwiseConv2D(3, padding="same")(y)))
    y = layers.BatchNormalization()(layers.Conv2D(32, 1)(y))
    x = layers.GlobalAveragePooling2D()(layers.Add()([x, y]))
    x = layers.Dense(128, activation="relu")(x)
    model = keras.Model(inputs, layers.Dense(10)(x))
    rng = np.random.default_rng(0)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            gamma, beta, _, _ = layer.get_weights()
            size = gamma.shape
            layer.set_weights([gamma, beta, rng.normal(0, 0.1, size), rng.uniform(0.5, 2.0, size)])
    path = tmp_path_factory.mktemp("keras") / "small.keras"
    model.save(path)
    return load_model(str(path))


@pytest.fixture(scope="module")
def keras_data():
    rng = np.random.default_rng(3)
    calibration = rng.uniform(-1, 1, (64, 3, 32, 32)).astype(np.float32)  # NCHW, as edgekit's
    x = rng.uniform(-1, 1, (SAMPLES, 3, 32, 32)).astype(np.float32)
    return calibration, x


# recipe, io_dtype, min SQNR dB, min agreement; measured: 127, 36.9, 36.9, 37.3, 67.7 dB, all 100%
KERAS_CASES = [
    ("fp32", "float32", 40, 0.99),
    ("int8", "float32", 30, 0.95),
    ("int8", "int8", 30, 0.95),
    ("int8-dynamic", "float32", 30, 0.95),
    ("fp16", "float32", 55, 0.99),
]


@pytest.mark.parametrize(("recipe", "io_dtype", "min_sqnr", "min_agree"), KERAS_CASES)
def test_keras_source_through_tf_lite(
    target, keras_source, keras_data, tmp_path, recipe, io_dtype, min_sqnr, min_agree
):
    calibration, x = keras_data
    path, manifest, info = export(
        target, keras_source, recipe, tmp_path, calibration, io_dtype=io_dtype
    )
    assert info.details["converter"].startswith("tf.lite.TFLiteConverter")
    assert info.input.layout == "NHWC" and info.input.shape == [1, 32, 32, 3]  # batch 1, static
    assert info.input.dtype == io_dtype and info.output.dtype == io_dtype
    assert (info.input.quantization is not None) == (io_dtype == "int8")

    session = target.open(path, manifest)
    metrics = compare_outputs(keras_source.predict(x), session.predict(x))
    assert metrics["sqnr_db"] >= min_sqnr and metrics["top1_agreement"] >= min_agree

    coverage = target.coverage(path, manifest)
    assert coverage.transposes == 0
    assert coverage.fast_ops == coverage.total_ops  # XNNPACK takes all of it, whatever the recipe
    if recipe == "int8":
        assert coverage.int8_fraction == 1.0
    if recipe == "int8-dynamic":
        # the 1x1 convs and the dense layers get int8 weights (4 of the 6 ops with MACs); the
        # small depthwise conv and the stem stay float, as do ADD and MEAN (named, not counted)
        assert (coverage.int8_ops, coverage.compute_ops) == (4, 6)
        assert "float compute ops: CONV_2D x1, DEPTHWISE_CONV_2D x1, ADD x1, MEAN x1" in (
            coverage.summary
        )
