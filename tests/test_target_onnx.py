"""The onnx target on digits-mobilenet: every recipe exported, opened on the CPU EP, and measured
against the source model; coverage of what onnxruntime actually runs; unsupported cases.

Bounds are the measured figures (100 evaluation samples, onnxruntime 1.32, x86) with margin:
fp32 SQNR 130 dB, int8 33 dB (max abs diff 0.63), int8-dynamic 51 dB, fp16 61 dB; all agree 100%.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from target_helpers import export_raw as export
from target_helpers import measure

from edgekit.errors import DeviceUnavailable, UnsupportedExport, UserInputError
from edgekit.sources.source import SourceModel
from edgekit.targets import get_target
from edgekit.targets.session import Accelerator

SAMPLES = 100


@pytest.fixture(scope="module")
def target():
    return get_target("onnx")


@pytest.fixture(scope="module")
def artifacts(digits_export):
    """Each recipe from the session's store (exported once per test run, calibration 200):
    recipe -> (path, manifest, ExportInfo)."""
    return {
        recipe: digits_export("onnx", recipe) for recipe in ("fp32", "int8", "int8-dynamic", "fp16")
    }


def weight_reach(path) -> int:
    """The largest magnitude among the file's int8 weight initializers."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    weights = [numpy_helper.to_array(init) for init in graph.initializer
               if init.data_type == onnx.TensorProto.INT8 and len(init.dims) > 1]  # fmt: skip
    return int(max(abs(weight.astype(int)).max() for weight in weights))


def zero_point_types(path):
    """Element types of the QDQ zero points: activations (QuantizeLinear) and weights (a
    per-channel DequantizeLinear of an initializer)."""
    import onnx

    graph = onnx.load(str(path)).graph
    inits = {init.name: init for init in graph.initializer}

    def dtype(name):
        return onnx.TensorProto.DataType.Name(inits[name].data_type)

    activations = {dtype(n.input[2]) for n in graph.node if n.op_type == "QuantizeLinear"}
    weights = {
        dtype(n.input[2])
        for n in graph.node
        if n.op_type == "DequantizeLinear" and n.input[0] in inits and len(inits[n.input[1]].dims)
    }
    return activations, weights - {"INT32"}  # int32: the biases


def test_fp32_matches_the_source_model(target, artifacts, reference):
    path, manifest, info = artifacts["fp32"]
    assert info.details["exporter"].startswith("torch.onnx dynamo")
    assert info.details["opset"] == 18
    assert info.input.shape == [1, 1, 32, 32] and info.input.dtype == "float32"
    assert info.output.shape == [1, 10] and info.warnings == []

    figures, runtime = measure(target, path, manifest, reference, threads=1)
    assert figures["sqnr_db"] >= 40.0 and figures["top1_agreement"] >= 0.99
    assert figures["max_abs_diff"] < 1e-3
    assert runtime["providers"] == ["CPUExecutionProvider"]
    assert runtime["graph_optimization_level"] == "ORT_ENABLE_ALL"


def test_fp32_coverage_all_on_cpu_ep_without_transposes(target, artifacts):
    path, manifest, _ = artifacts["fp32"]
    coverage = target.coverage(path, manifest)
    assert coverage.fast_fraction == 1.0 and coverage.fallback_ops == []
    assert coverage.transposes == 0
    assert coverage.int8_ops is None  # a float model has no int8 figure
    # onnxruntime fuses Conv+Clip (ReLU6) and the residual adds: 38 file nodes -> ~23 run
    assert coverage.total_ops < 30
    assert "placement: CPUExecutionProvider" in coverage.summary


def test_int8_static_is_u8s8_qdq_and_fully_int8(target, artifacts, reference):
    path, manifest, info = artifacts["int8"]
    assert info.details["quant_format"] == "QDQ"
    assert info.details["activation_type"].startswith("uint8")  # U8S8: the fast x86 kernels
    assert (
        info.details["weight_type"].startswith("int8")
        and "per-channel" in info.details["weight_type"]
    )
    assert info.details["calibration_samples"] == 200
    # ... and the file agrees: uint8 activation zero points, int8 per-channel conv weights
    activation_zp, weight_zp = zero_point_types(path)
    assert activation_zp == {"UINT8"} and weight_zp == {"INT8"}
    # 7-bit weights, so a CPU without VNNI cannot saturate U8S8's int16 pair sums
    assert "reduce_range" in info.details["weight_type"]
    assert 56 <= weight_reach(path) <= 64
    fp32_size = artifacts["fp32"][0].stat().st_size
    assert path.stat().st_size < 0.7 * fp32_size  # measured 145 KB vs 266 KB

    figures, _ = measure(target, path, manifest, reference, threads=1)
    assert figures["sqnr_db"] >= 25.0  # measured 33.0
    assert figures["top1_agreement"] >= 0.97  # measured 1.0
    assert figures["max_abs_diff"] < 2.0  # measured 0.63

    coverage = target.coverage(path, manifest)
    # onnxruntime fuses DQ->Conv->Q into QLinearConv (and Add, Gemm): every compute op is int8
    assert coverage.int8_fraction == 1.0
    assert coverage.compute_ops >= 20
    assert "QLinearConv" in coverage.summary
    assert coverage.fallback_ops == []
    assert coverage.transposes <= 2  # ORT's NHWC layout transform at the graph's two ends


def test_int8_dynamic_quantizes_matmul_gemm_only(target, artifacts, reference):
    path, manifest, info = artifacts["int8-dynamic"]
    assert info.details["op_types_to_quantize"] == ["MatMul", "Gemm"]
    assert any("MatMul/Gemm only" in warning for warning in info.warnings)

    figures, _ = measure(target, path, manifest, reference, threads=1)
    assert figures["sqnr_db"] >= 40.0  # measured 51.0: only the classifier is int8
    assert figures["top1_agreement"] >= 0.99

    coverage = target.coverage(path, manifest)
    assert coverage.fallback_ops == [] and "ConvInteger" not in coverage.summary
    assert coverage.int8_ops == 1  # the Gemm, as DynamicQuantizeMatMul; the convs stay fp32
    assert coverage.int8_fraction < 0.1


def test_coverage_flags_dynamic_int8_convolutions(target, digits_model, tmp_path, monkeypatch):
    """The trap the default avoids: dynamic quantization of every op makes ConvInteger nodes,
    off onnxruntime's fast path on x86. coverage() reports them as the slow path."""
    import edgekit.targets.onnx.quantize as onnx_quantize

    monkeypatch.setattr(onnx_quantize, "DYNAMIC_OP_TYPES", None)
    path, manifest, info = export(target, digits_model, "int8-dynamic", tmp_path)
    assert path.exists() and not path.with_suffix(".onnx").exists()  # written exactly there
    assert info.details["op_types_to_quantize"] == "all"
    assert any("ConvInteger" in warning and "slow path" in warning for warning in info.warnings)

    coverage = target.coverage(path, manifest)
    assert "ConvInteger" in coverage.fallback_ops
    assert coverage.fast_fraction < 1.0  # measured 114/133: the 19 ConvInteger are not fast
    assert coverage.int8_fraction > 0.8  # "int8" on paper (measured 20/20), slow in practice
    assert "slow path: ConvInteger x19" in coverage.summary


def test_fp16_keeps_float32_io(target, artifacts, reference):
    import onnxruntime as ort

    path, manifest, info = artifacts["fp16"]
    assert info.details["keep_io_types"] is True
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == "tensor(float)"
    assert session.get_outputs()[0].type == "tensor(float)"
    assert path.stat().st_size < 0.7 * artifacts["fp32"][0].stat().st_size

    figures, _ = measure(target, path, manifest, reference, threads=1)
    assert figures["sqnr_db"] >= 45.0  # measured 60.8
    assert figures["top1_agreement"] >= 0.99


def test_fp16_coverage_shows_cpu_ep_computes_in_float32(target, artifacts):
    path, manifest, info = artifacts["fp16"]
    assert any("no fp16 convolutions" in warning for warning in info.warnings)
    coverage = target.coverage(path, manifest)
    assert "compute ops in float16 at run time: 0/" in coverage.summary
    assert coverage.fast_fraction == 1.0


def test_stage_and_invoke_run_one_inference(target, artifacts, digits_data):
    path, manifest, _ = artifacts["int8"]
    session = target.open(path, manifest, threads=2)
    staged = session.stage(digits_data.evaluation.x[:1].astype(np.float64))
    assert staged["input"].dtype == np.float32  # converted outside the timed region
    logits = session.output(session.invoke(staged))
    assert logits.shape == (1, 10) and logits.dtype == np.float32
    assert session.info["threads"] == 2


def test_the_census_names_the_float_pool_between_int8_ops(artifacts):
    from edgekit.targets.onnx.census import census

    path, manifest, _ = artifacts["int8"]
    trips = census(path, manifest).qdq_pairs
    # the global pool has no int8 kernel here: it leaves int8 and comes back (the one walk of
    # edgekit.targets.round_trips, as for every target)
    assert len(trips) == 1 and "ReduceMean" in trips[0] and trips[0].endswith("float->int8")


def test_keep_float_leaves_a_module_in_float(target, digits_model, calibration, tmp_path):
    path, manifest, info = export(
        target, digits_model, "int8", tmp_path, calibration=calibration.x, keep_float=("stem",)
    )
    assert info.details["nodes_excluded"]
    coverage = target.coverage(path, manifest)
    assert coverage.int8_ops == coverage.compute_ops - 1  # the stem conv runs in float


def test_keep_float_with_an_unknown_module_path(target, digits_model, calibration, tmp_path):
    with pytest.raises(UserInputError, match="no_such_block"):
        export(target, digits_model, "int8", tmp_path, calibration.x, keep_float=("no_such_block",))


def test_gpu_without_onnxruntime_gpu_is_unavailable(target, artifacts):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("onnxruntime-gpu is installed here")
    path, manifest, _ = artifacts["fp32"]
    with pytest.raises(DeviceUnavailable, match="CPUExecutionProvider"):
        target.open(path, manifest, Accelerator.GPU)


def test_keras_models_are_unsupported(target, digits_model, tmp_path):
    keras_source = SourceModel(
        "a-keras-model", "keras", object(), digits_model.preprocess, "", "model.keras"
    )
    reason = target.unsupported_reason("fp32", keras_source)
    assert "keras model" in reason and "onnx exports torch, onnx models" in reason


def test_integer_io_is_unsupported(target, digits_model):
    reason = target.unsupported_reason("int8", digits_model, io_dtype="int8")
    assert reason is not None and "float32" in reason
    assert target.unsupported_reason("int8", digits_model) is None


@torch.library.custom_op("edgekit_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


class MysteryNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(1, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(mystery(x).mean(dim=(2, 3)))


def test_an_operator_without_onnx_translation_is_named(target, digits_model, tmp_path):
    source = SourceModel(
        "mystery-net", "torch", MysteryNet().eval(), digits_model.preprocess, "", "test"
    )
    with pytest.raises(UnsupportedExport, match=r"onnx: .*operator edgekit_test\.mystery"):
        export(target, source, "fp32", tmp_path)
    assert not list(tmp_path.glob("*partial*"))  # whatever the partial file was called


def test_the_target_declares_its_packages(target):
    assert {"onnx", "onnxruntime", "torch"} <= set(target.packages)
    assert target.official_runner().env_var == "EDGEKIT_ORT_PERF_TEST"


class BranchyNet(torch.nn.Module):
    """A data-dependent branch: torch.export (dynamo) cannot capture it, TorchScript tracing can."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(1, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = x.mean(dim=(2, 3))
        if pooled.sum() > 100:
            pooled = pooled * 2
        return self.fc(pooled)


def test_a_data_dependent_branch_is_refused_not_frozen(target, digits_model, tmp_path):
    """The legacy trace would keep one branch only: inputs taking the other get wrong answers."""
    source = SourceModel(
        "branchy-net", "torch", BranchyNet().eval(), digits_model.preprocess, "", "test"
    )
    with pytest.raises(UnsupportedExport, match="data-dependent control flow"):
        export(target, source, "fp32", tmp_path)
    assert not list(tmp_path.glob("*.partial"))


def test_culprit_quantizes_a_block_as_the_export_quantizes_the_model(monkeypatch, tmp_path):
    import numpy as np
    import onnxruntime.quantization
    import torch

    from edgekit.targets.onnx.convert_block import convert_block
    from edgekit.targets.onnx.int8_options import static_options

    asked: dict = {}

    def record(model_input, model_output, reader, **options):
        asked.update(options)
        raise RuntimeError("recorded")

    monkeypatch.setattr(onnxruntime.quantization, "quantize_static", record)
    block = torch.nn.Conv2d(1, 2, 3).eval()
    sample = np.zeros((1, 1, 8, 8), dtype=np.float32)
    with pytest.raises(RuntimeError, match="recorded"):
        convert_block(block, sample, "int8", [sample], tmp_path, lambda stage: None)
    assert asked == static_options()


def _two_convs_sharing_a_bias(path) -> None:
    """Conv -> Reshape -> Conv, the convolutions sharing the bias ``b``, the reshaped tensor
    named ``b0``: the name onnxruntime's quantizer gives its own copy of ``b`` (torch.onnx's
    ``val_11`` and ``val_118`` in PoolFormer's GroupNorms)."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.normal(size=(2, 2, 1, 1)).astype(np.float32), name)
        for name in ("w1", "w2")
    ]
    bias = numpy_helper.from_array(np.array([0.1, -0.1], dtype=np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, 2, 4, 4], dtype=np.int64), "shape")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b"], ["c"], name="first"),
            helper.make_node("Reshape", ["c", "shape"], ["b0"], name="reshape"),
            helper.make_node("Conv", ["b0", "w2", "b"], ["y"], name="second"),
        ],
        "shared_bias",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 4, 4])],
        [*weights, bias, shape],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_bias_two_nodes_share_is_quantized_under_a_name_no_tensor_has(tmp_path):
    import onnxruntime
    import onnxruntime.quantization

    from edgekit.targets.onnx.int8_options import static_options
    from edgekit.targets.onnx.quantize import CalibrationReader, own_biases

    shared = tmp_path / "shared.onnx"
    _two_convs_sharing_a_bias(shared)
    samples = np.random.default_rng(1).random((4, 2, 4, 4), dtype=np.float32)
    quantized = tmp_path / "int8.onnx"
    with pytest.raises(ValueError, match="shared mode is not supported"):  # onnxruntime alone
        onnxruntime.quantization.quantize_static(
            str(shared), str(quantized), CalibrationReader(samples, "x"), **static_options()
        )
    unshared = own_biases(shared, tmp_path)
    onnxruntime.quantization.quantize_static(
        str(unshared), str(quantized), CalibrationReader(samples, "x"), **static_options()
    )
    session = onnxruntime.InferenceSession(str(quantized), providers=["CPUExecutionProvider"])
    float_session = onnxruntime.InferenceSession(str(shared), providers=["CPUExecutionProvider"])
    x = {"x": samples[:1]}
    assert np.allclose(session.run(None, x)[0], float_session.run(None, x)[0], atol=0.05)
    assert own_biases(unshared, tmp_path) == unshared  # nothing shared: the file as it is
