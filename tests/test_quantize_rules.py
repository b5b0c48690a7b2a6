"""The quantizer rules export applies before PT2E calibrates (edgekit.quantize.pt2e), on
blocks shaped as what transformers' classifiers do: SwinV2's continuous position bias (a table
gathered by a constant integer index, through a sigmoid, scaled) and Perceiver's index
arithmetic with a Python scalar. Both targets' quantizers, as export sets them."""

from __future__ import annotations

from operator import attrgetter

import numpy as np
import pytest
import torch

from edgekit.quantize.pt2e import quantize_pt2e, with_runtime_rules

QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"


class GatheredSigmoid(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Linear(8, 8)
        self.index = torch.arange(8).flip(0)  # a plain tensor: torch.export lifts it, no meta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 16 * torch.sigmoid(self.table(x)[:, self.index])


class ShiftedGather(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.table(x)[:, torch.arange(4) + 4]  # the second half, computed in the graph


def litert_quantizer():
    from litert_torch.quantize.pt2e_quantizer import (
        PT2EQuantizer,
        get_symmetric_quantization_config,
    )

    return PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def xnnpack_quantizer():
    from edgekit.targets.executorch.convert import xnnpack_quantizer as export_quantizer

    return export_quantizer(dynamic=False, keep_float=())


QUANTIZERS = {"tflite": litert_quantizer, "executorch": xnnpack_quantizer}
CALIBRATION = np.random.default_rng(0).random((8, 8), dtype=np.float32)


def _quantized(target: str) -> tuple[dict[str, tuple[float, int]], set[str]]:
    """Each quantize node's (scale, zero point), by the node it quantizes; and the names of the
    graph's integer constants."""
    graph = quantize_pt2e(
        GatheredSigmoid().eval(), CALIBRATION[:1], QUANTIZERS[target](), CALIBRATION, fold=False
    )
    quantized = {
        node.args[0].name: (node.args[1], node.args[2])
        for node in graph.graph.nodes
        if str(node.target) == QUANTIZE
    }
    constants = [node for node in graph.graph.nodes if node.op == "get_attr"]
    integers = {n.name for n in constants if not attrgetter(n.target)(graph).is_floating_point()}
    return quantized, integers


def test_without_the_rules_the_integer_index_gets_a_histogram_observer():
    with pytest.raises(NotImplementedError, match="histogram_cpu"):
        _prepared_raw(GatheredSigmoid(), "tflite")(torch.from_numpy(CALIBRATION[:1]))


@pytest.mark.parametrize("target", sorted(QUANTIZERS))
def test_an_integer_index_calibrates_and_is_never_quantized(target):
    quantized, integers = _quantized(target)
    assert {"x", "linear"} <= set(quantized)  # the linear's input and output are int8
    assert integers and not integers & set(quantized)  # the index, per-channel zero points


def test_a_sigmoid_an_int8_op_consumes_is_quantized_at_1_256_from_minus_128():
    """TFLite's LOGISTIC takes no other output scale ("output->params.scale == 1. / 256")."""
    quantized, _ = _quantized("tflite")
    assert quantized["sigmoid"] == (1 / 256, -128)


def test_the_rules_keep_the_inner_quantizers_annotations_elsewhere():
    rules = with_runtime_rules(litert_quantizer())
    graph = torch.export.export(GatheredSigmoid().eval(), (torch.from_numpy(CALIBRATION[:1]),))
    annotated = rules.annotate(graph.module())
    linear = next(n for n in annotated.graph.nodes if n.target == torch.ops.aten.linear.default)
    spec = linear.meta["quantization_annotation"].output_qspec
    assert spec.dtype == torch.int8 and not spec.is_dynamic


def _prepared_raw(module: torch.nn.Module, target: str):
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    graph = torch.export.export(module.eval(), (torch.from_numpy(CALIBRATION[:1]),))
    return prepare_pt2e(graph.module(), QUANTIZERS[target]())


def test_integer_index_arithmetic_stays_integer_through_xnnpacks_transform():
    """XNNPACKQuantizer alone turns the scalar 4 into a float32 constant: the index goes float."""
    with pytest.raises(IndexError, match="tensors used as indices"):
        _prepared_raw(ShiftedGather(), "executorch")(torch.from_numpy(CALIBRATION[:1]))
    module = ShiftedGather().eval()
    graph = quantize_pt2e(module, CALIBRATION[:1], xnnpack_quantizer(), CALIBRATION)
    with torch.no_grad():  # one sample at a time, as exported
        pairs = [(module(x[None]), graph(x[None])) for x in torch.from_numpy(CALIBRATION)]
    expected, got = (torch.cat(side).numpy() for side in zip(*pairs, strict=True))
    assert got.shape == (8, 4)
    assert np.abs(got - expected).max() < 0.05  # int8 rounding, not the other half's values


class PaddedStem(torch.nn.Module):
    """BiT's stem: a convolution, then a zero pad and a max-pool the quantizer leaves alone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.pad = torch.nn.ConstantPad2d(1, 0.0)
        self.pool = torch.nn.MaxPool2d(3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.pad(self.conv(x)))


def test_a_pad_after_an_int8_conv_loads_in_xnnpack(tmp_path, monkeypatch):
    import edgekit.targets.executorch.convert_block as executorch_block

    images = np.random.default_rng(2).random((4, 1, 3, 16, 16), dtype=np.float32)
    module = PaddedStem().eval()
    run = executorch_block.convert_block(module, images[0], "int8", images, tmp_path, print)
    with torch.no_grad():
        expected = module(torch.from_numpy(images[1])).numpy()
    assert np.abs(run(images[1]) - expected).max() < 0.05
    monkeypatch.setattr(executorch_block, "with_runtime_rules", lambda quantizer: quantizer)
    with pytest.raises(RuntimeError, match="Failed to load method forward"):  # the pad left float
        executorch_block.convert_block(module, images[0], "int8", images, tmp_path, print)


def test_a_program_xnnpack_cannot_compile_is_refused_naming_its_node(tmp_path, monkeypatch):
    """Export's load of such a file: the runtime's line that names the node, not only its
    summary ("Init failed for backend XnnpackBackend: 0x1")."""
    import edgekit.targets.executorch.convert_block as executorch_block
    from edgekit.errors import UserInputError
    from edgekit.targets.executorch.session import loading, runtime

    images = np.random.default_rng(2).random((4, 1, 3, 16, 16), dtype=np.float32)
    monkeypatch.setattr(executorch_block, "with_runtime_rules", lambda quantizer: quantizer)
    with pytest.raises(RuntimeError):
        executorch_block.convert_block(
            PaddedStem().eval(), images[0], "int8", images, tmp_path, print
        )
    program = tmp_path / "block.pte"
    named = pytest.raises(UserInputError, match="Failed to create StaticConstantPad node")
    with named, loading(program):
        runtime().Runtime.get().load_program(str(program)).load_method("forward")


def test_the_parts_of_a_split_convert_to_tflite_at_the_whole_tensors_scale(tmp_path, monkeypatch):
    """FocalNet's modulation, as transformers defines it: one projection split into a query, a
    context and gates, each part consumed by its own int8 op."""
    import transformers
    from transformers.models.focalnet.modeling_focalnet import FocalNetModulation

    import edgekit.targets.tflite.convert_block as tflite_block

    torch.manual_seed(0)
    module = FocalNetModulation(transformers.FocalNetConfig(), index=0, dim=8).eval()
    images = np.random.default_rng(3).random((4, 1, 6, 6, 8), dtype=np.float32)
    run = tflite_block.convert_block(module, images[0], "int8", images, tmp_path, print)
    with torch.no_grad():
        expected = module(torch.from_numpy(images[1])).numpy()
    assert np.abs(run(images[1]) - expected).max() < 0.05 * np.abs(expected).max()
    monkeypatch.setattr(tflite_block, "with_runtime_rules", lambda quantizer: quantizer)
    with pytest.raises(ValueError, match="same scale constraint"):  # each part at its own scale
        tflite_block.convert_block(module, images[0], "int8", images, tmp_path, print)


@pytest.mark.parametrize("target", sorted(QUANTIZERS))
def test_a_consumer_of_a_split_part_shares_the_whole_tensors_quantization(target):
    from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

    class Halves(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.projection = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            first, second = torch.split(self.projection(x), 4, dim=1)
            return first * second[:, 1:3].sum(dim=1, keepdim=True)

    graph = torch.export.export(Halves().eval(), (torch.from_numpy(CALIBRATION[:1]),)).module()
    annotated = with_runtime_rules(QUANTIZERS[target]()).annotate(graph)
    mul = next(n for n in annotated.graph.nodes if n.target == torch.ops.aten.mul.Tensor)
    first = mul.meta["quantization_annotation"].input_qspec_map[mul.args[0]]
    assert isinstance(first, SharedQuantizationSpec) and first.edge_or_node.name == "linear"
