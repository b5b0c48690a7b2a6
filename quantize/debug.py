"""Per-layer int8 sensitivity of a torch classifier, named by torch module path (``block2.dw``).

A *layer* is a conv or linear unit: a ``Conv2d``/``Linear``, or the ``Sequential`` it opens
(conv + BatchNorm + activation, which every target fuses into one int8 op). Each layer owns its
weights and its output tensor; keeping a layer float in a real artifact means its output tensor
is float, which needs its producer *and* its consumers float (:func:`float_island`).

Measured on calibration data, with an int8 simulation in torch that every target shares
(per-channel symmetric int8 weights; per-tensor 8-bit activations over the calibrated min/max,
the way XNNPACK, ONNX Runtime's QDQ and LiteRT all quantize them):

- ``cumulative_db``: SQNR of the layer's output in the all-int8 model against fp32. It includes
  every upstream error, so a damaged tensor shows up at its *consumer's* output.
- ``only_db``: the model output's SQNR when only this layer (its weights and output tensor) is
  int8: the isolated harm of the layer. The table is sorted by it, most harmful first.
- ``all_but_db``: the model output's SQNR with everything int8 except this layer (top
  candidates only): how much keeping it float would give back.
- ``artifact_db`` (cross-check, ``--target``): the cumulative SQNR at the layer's output in the
  target's own quantizer, from its own tool: onnxruntime ``qdq_loss_debug`` (``xmodel_err``),
  ai-edge-quantizer ``validate()`` (its SNR is a linear ratio; converted to dB), torchao's PT2E
  numeric debugger on the XNNPACK-quantized graph (a delegated .pte cannot be probed per op).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import math
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UnsupportedExport, UserInputError
from edgekit.metrics import sqnr_db
from edgekit.models import SourceModel

DEFAULT_SAMPLES = 64  # calibration samples: ranges from them and SQNR on them
TOP_CANDIDATES = 5  # layers that get the (costlier) all-but-this-layer run
CROSSCHECK_TARGETS = ("onnx", "tflite", "executorch")
PT2E_SAMPLES = 16  # calibration for the executorch cross-check (its observers are slow)


@dataclass
class LayerSensitivity:
    name: str  # torch module path
    op: str  # Conv2d, Conv2d(depthwise), Linear
    index: int  # position in the model's forward order
    cumulative_db: float
    only_db: float
    all_but_db: float | None = None
    artifact_db: float | None = None
    consumers: list[str] = field(default_factory=list)

    @property
    def float_island(self) -> list[str]:
        """What must stay float to keep this layer's output tensor float."""
        return [self.name, *[c for c in self.consumers if c != self.name]]


@dataclass
class DebugReport:
    model: str
    target: str | None
    samples: int
    all_int8_db: float  # model output SQNR, all layers int8 (simulation)
    layers: list[LayerSensitivity]  # sorted by harm: lowest only_db first
    crosscheck: str | None = None  # the tool the artifact column came from
    notes: list[str] = field(default_factory=list)

    def ranking(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def layer(self, name: str) -> LayerSensitivity:
        return next(layer for layer in self.layers if layer.name == name)

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        for row, layer in zip(payload["layers"], self.layers, strict=True):
            row["float_island"] = layer.float_island
        return _finite(payload)


def _finite(value: Any) -> Any:
    """JSON has no inf: an exact match (no noise) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Layers and the graph between them


@dataclass(frozen=True)
class _Layer:
    name: str
    op: str
    unit: Any  # the module whose output is the layer's output
    weighted: Any  # the Conv2d / Linear holding the weights


def find_layers(module: Any) -> list[_Layer]:
    """Conv/linear units in definition order, named by module path."""
    import torch

    modules = dict(module.named_modules())
    layers = []
    for path, child in modules.items():
        if not isinstance(child, torch.nn.Conv2d | torch.nn.Linear):
            continue
        parent_path, _, attr = path.rpartition(".")
        parent = modules.get(parent_path)
        unit_path, unit = path, child
        # conv + norm + activation in one Sequential: the targets fuse it into one int8 op
        if isinstance(parent, torch.nn.Sequential) and parent_path and attr == "0":
            unit_path, unit = parent_path, parent
        op = type(child).__name__
        if isinstance(child, torch.nn.Conv2d) and child.groups > 1:
            op += "(depthwise)" if child.groups == child.in_channels else f"(groups={child.groups})"
        layers.append(_Layer(unit_path, op, unit, child))
    if not layers:
        raise UserInputError("quantize-debug: the model has no Conv2d or Linear layer to rank")
    return layers


def layer_of(path: str, names: list[str]) -> str | None:
    """The layer a module path belongs to (the longest layer name that contains it)."""
    best = None
    for name in names:
        if (path == name or path.startswith(name + ".")) and (
            best is None or len(name) > len(best)
        ):
            best = name
    return best


def consumers(module: Any, example: np.ndarray, names: list[str]) -> dict[str, list[str]]:
    """layer -> the layers that read its output tensor directly (from torch.export's graph)."""
    graph = _exported_graph(module, example)
    owner = {}
    for node in graph.nodes:
        stack = node.meta.get("nn_module_stack") or {}
        if node.op == "call_function" and stack:
            layer = layer_of(str(list(stack.values())[-1][0]), names)
            if layer:
                owner[node] = layer
    last: dict[str, Any] = {}
    for node, layer in owner.items():
        last[layer] = node  # graph order: the last node of a layer produces its output
    result = {}
    for layer, node in last.items():
        users = [owner.get(user) for user in node.users]
        result[layer] = sorted({u for u in users if u and u != layer}, key=names.index)
    return result


def _exported_graph(module: Any, example: np.ndarray) -> Any:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(module.eval(), (torch.from_numpy(example),)).graph


def float_island(layer: str, consumer_map: dict[str, list[str]]) -> list[str]:
    """The layers to keep float so that ``layer``'s output tensor stays float."""
    return [layer, *[c for c in consumer_map.get(layer, []) if c != layer]]


# --------------------------------------------------------------------------------------------
# The int8 simulation


def _fake_quant_weight(weight: Any) -> Any:
    """Symmetric per-output-channel int8 (what all three targets use for weights). BatchNorm
    folding scales each output channel, so quantizing the unfolded weight is the same."""
    import torch

    flat = weight.reshape(weight.shape[0], -1)
    scale = flat.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    shape = (-1,) + (1,) * (weight.dim() - 1)
    return torch.clamp(torch.round(weight / scale.view(shape)), -127, 127) * scale.view(shape)


def _fake_quant_activation(x: Any, low: float, high: float) -> Any:
    """Per-tensor affine 8-bit over [low, high] (the range always holds 0)."""
    import torch

    low, high = min(low, 0.0), max(high, 0.0)
    scale = max(high - low, 1e-12) / 255.0
    zero = round(-low / scale)
    return (torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale


class _Simulator:
    """Runs the model with a chosen set of layers int8 (weights + output tensor)."""

    def __init__(self, module: Any, layers: list[_Layer], x: np.ndarray) -> None:
        import torch

        self.module = copy.deepcopy(module).eval()
        units = dict(self.module.named_modules())
        self.layers = layers
        self.units = {layer.name: units[layer.name] for layer in layers}
        self.weighted = {
            layer.name: self.units[layer.name] if layer.unit is layer.weighted
            else self.units[layer.name][0]
            for layer in layers
        }  # fmt: skip
        self.float_weights = {n: m.weight.detach().clone() for n, m in self.weighted.items()}
        self.int8_weights = {n: _fake_quant_weight(w) for n, w in self.float_weights.items()}
        self.x = torch.from_numpy(np.ascontiguousarray(x))
        self.ranges: dict[str, tuple[float, float]] = {}
        self.input_range = (float(self.x.min()), float(self.x.max()))
        self.reference, self.float_outputs = self._run(set(), record=True)

    def _run(self, quantized: set[str], record: bool = False) -> tuple[Any, dict[str, Any]]:
        import torch

        captured: dict[str, Any] = {}
        handles = []

        def hook(name: str) -> Callable[..., Any]:
            def apply(_module: Any, _inputs: Any, output: Any) -> Any:
                if record:
                    self.ranges[name] = (float(output.min()), float(output.max()))
                if name in quantized:
                    output = _fake_quant_activation(output, *self.ranges[name])
                captured[name] = output
                return output

            return apply

        for name, unit in self.units.items():
            handles.append(unit.register_forward_hook(hook(name)))
        try:
            with torch.no_grad():
                for name, weighted in self.weighted.items():
                    source = self.int8_weights if name in quantized else self.float_weights
                    weighted.weight.copy_(source[name])
                x = self.x
                if quantized and len(quantized) == len(self.units):
                    x = _fake_quant_activation(x, *self.input_range)  # all-int8: the input too
                output = self.module(x)
        finally:
            for handle in handles:
                handle.remove()
        return output.numpy(), {k: v.numpy() for k, v in captured.items()}

    def output_db(self, quantized: set[str]) -> float:
        return sqnr_db(self.reference, self._run(quantized)[0])

    def all_int8(self) -> tuple[float, dict[str, float]]:
        output, tensors = self._run(set(self.units))
        per_layer = {n: sqnr_db(self.float_outputs[n], tensors[n]) for n in self.units}
        return sqnr_db(self.reference, output), per_layer


def analyze(
    source: SourceModel,
    calibration: np.ndarray,
    target: str | None = None,
    samples: int = DEFAULT_SAMPLES,
    top: int = TOP_CANDIDATES,
    crosscheck: bool = True,
) -> DebugReport:
    """Rank ``source``'s layers by int8 harm on ``calibration`` (NCHW float32)."""
    if source.framework != "torch":
        raise UnsupportedExport(
            f"quantize-debug: {source.name} is a {source.framework} model; layers are named by "
            "torch module path, so the debugger needs a torch source"
        )
    if target is not None and target not in CROSSCHECK_TARGETS:
        raise UserInputError(
            f"quantize-debug: unknown target '{target}' ({', '.join(CROSSCHECK_TARGETS)})"
        )
    x = np.ascontiguousarray(calibration[:samples], dtype=np.float32)
    layers = find_layers(source.module)
    names = [layer.name for layer in layers]
    simulator = _Simulator(source.module, layers, x)
    all_db, cumulative = simulator.all_int8()
    rows = [
        LayerSensitivity(
            name=layer.name,
            op=layer.op,
            index=index,
            cumulative_db=cumulative[layer.name],
            only_db=simulator.output_db({layer.name}),
        )
        for index, layer in enumerate(layers)
    ]
    rows.sort(key=lambda row: (row.only_db, row.index))
    everything = set(names)
    for row in rows[:top]:
        row.all_but_db = simulator.output_db(everything - {row.name})
    for name, readers in consumers(source.module, source.example_input(), names).items():
        next(row for row in rows if row.name == name).consumers = readers
    report = DebugReport(source.name, None, len(x), all_db, rows)
    if target is not None and crosscheck:
        report = crosscheck_report(report, source, x, target)
    return report


# --------------------------------------------------------------------------------------------
# Cross-checks on the target's own quantizer


def crosscheck_report(
    report: DebugReport, source: SourceModel, calibration: np.ndarray, target: str
) -> DebugReport:
    """A copy of ``report`` with the ``artifact_db`` column from ``target``'s own quantizer."""
    if target not in CROSSCHECK_TARGETS:
        raise UserInputError(
            f"quantize-debug: unknown target '{target}' ({', '.join(CROSSCHECK_TARGETS)})"
        )
    report = copy.deepcopy(report)
    x = np.ascontiguousarray(calibration[: report.samples], dtype=np.float32)
    names = [layer.name for layer in sorted(report.layers, key=lambda layer: layer.index)]
    runner = {"onnx": _onnx_errors, "tflite": _tflite_errors, "executorch": _pt2e_errors}[target]
    with tempfile.TemporaryDirectory(prefix="edgekit-qdebug-") as tmp:
        tool, per_layer = runner(source, x, names, Path(tmp))
    report.target = target
    report.crosscheck = tool
    for row in report.layers:
        row.artifact_db = per_layer.get(row.name)
    missing = [row.name for row in report.layers if row.artifact_db is None]
    if missing:
        report.notes.append(f"{tool}: no tensor mapped back to {', '.join(missing)}")
    return report


def _onnx_errors(
    source: SourceModel, x: np.ndarray, names: list[str], work: Path
) -> tuple[str, dict[str, float]]:
    """onnxruntime's qdq_loss_debug on the model the onnx target quantizes, ``xmodel_err``
    (float model vs QDQ model, cumulative) at each layer's last tensor. ``qdq_err`` is not used:
    ORT drops a Conv's Relu and renames the Conv output after it."""
    import onnx
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    from edgekit.targets.base import ExportRequest
    from edgekit.targets.onnx import INPUT_NAME, export_fp32, quantize_static_qdq

    fp32, quantized = work / "fp32.onnx", work / "int8.onnx"
    request = ExportRequest(source, "int8", quantized, calibration=x)
    with _quiet():
        export_fp32(source, fp32)
        quantize_static_qdq(fp32, quantized, request, work, [])
        # quantize_static_qdq leaves the pre-processed float model it quantized as pre.onnx
        pre = work / "pre.onnx" if (work / "pre.onnx").exists() else fp32
        modify_model_output_intermediate_tensors(str(pre), str(work / "f_aug.onnx"))
        modify_model_output_intermediate_tensors(str(quantized), str(work / "q_aug.onnx"))
        # collect_activations iterates its reader; a list of feeds is one
        feeds = [{INPUT_NAME: sample[None]} for sample in x]
        floats = collect_activations(str(work / "f_aug.onnx"), iter(feeds))
        ints = collect_activations(str(work / "q_aug.onnx"), iter(feeds))
        errors = compute_activation_error(create_activation_matching(ints, floats))
    producer_layer = {}
    for node in onnx.load(str(pre), load_external_data=False).graph.node:
        layer = layer_of(_onnx_scope(node), names)
        for output in node.output:
            producer_layer[output] = layer
    per_layer: dict[str, float] = {}
    for tensor, error in errors.items():  # graph order: a later tensor overrides
        layer = producer_layer.get(tensor)
        if layer and "xmodel_err" in error:
            per_layer[layer] = float(error["xmodel_err"])
    return "onnxruntime qdq_loss_debug xmodel_err", per_layer


def _onnx_scope(node: Any) -> str:
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return ""
            return str(scopes[-2]) if len(scopes) >= 2 else ""
    return ""


def _tflite_errors(
    source: SourceModel, x: np.ndarray, names: list[str], work: Path
) -> tuple[str, dict[str, float]]:
    """ai-edge-quantizer ``static_wi8_ai8`` on the fp32 .tflite, ``validate()`` per tensor."""
    from ai_edge_quantizer import quantizer as aeq
    from ai_edge_quantizer import recipe as recipes
    from ai_edge_quantizer.utils.validation_utils import ValidationErrorMetric

    from edgekit.targets.base import ExportRequest
    from edgekit.targets.tflite import (
        TFLiteTarget,
        _no_progress_bars,
        _quiet_native,
        _quiet_python,
        _signature_input,
        module_regex,
    )

    fp32 = work / "fp32.tflite"
    info = TFLiteTarget().export(ExportRequest(source, "fp32", fp32))
    nhwc = info.input.layout == "NHWC"
    feed_x = np.ascontiguousarray(x.transpose(0, 2, 3, 1) if nhwc else x)
    signature, input_name = _signature_input(fp32)
    feed = {signature: [{input_name: sample[None]} for sample in feed_x]}
    with _quiet_python(), _quiet_native(), _no_progress_bars():
        quantizer = aeq.Quantizer(str(fp32))
        quantizer.load_quantization_recipe(recipes.static_wi8_ai8())
        quantizer.quantize(quantizer.calibrate(feed), enable_progress_report=False)
        result = quantizer.validate(test_data=feed, error_metrics=[ValidationErrorMetric.SNR])
    comparison = result.get_signature_comparison_result(signature)
    patterns = {name: module_regex(name) for name in names}
    per_layer: dict[str, float] = {}
    tensors = {**comparison.intermediate_tensors, **comparison.output_tensors}
    for tensor, metrics in tensors.items():
        scope = tensor + ";"
        matched = [name for name, pattern in patterns.items() if re.search(pattern, scope)]
        if not matched and tensor in comparison.output_tensors:
            matched = [names[-1]]  # litert-torch names the output after the signature
        snr = metrics.get("snr")
        if matched and snr is not None and snr > 0:
            per_layer[max(matched, key=len)] = 10.0 * math.log10(snr) if math.isfinite(snr) else snr
    return "ai-edge-quantizer validate() SNR (static_wi8_ai8)", per_layer


def _pt2e_errors(
    source: SourceModel, x: np.ndarray, names: list[str], work: Path
) -> tuple[str, dict[str, float]]:
    """torchao's numeric debugger on the XNNPACK-quantized PT2E graph (what the .pte holds)."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e import (
        compare_results,
        extract_results_from_loggers,
        prepare_for_propagation_comparison,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True)
    )
    with _quiet():
        program = torch.export.export(
            _fold_batch_norms(source.module), (torch.from_numpy(source.example_input()),)
        )
        # both graphs must come from the same ExportedProgram: matching uses from_node ancestry
        prepared = prepare_pt2e(program.module(), quantizer)
        with torch.no_grad():
            # XNNPACK's histogram observers cost ~10 ms per op per sample: a ranking needs few
            for sample in x[:PT2E_SAMPLES]:
                prepared(torch.from_numpy(sample[None]))
        converted = convert_pt2e(prepared)
        reference = prepare_for_propagation_comparison(program.module())
        actual = prepare_for_propagation_comparison(converted)
        with torch.no_grad():
            for sample in x[: PT2E_SAMPLES // 2]:
                batch = torch.from_numpy(sample[None])
                reference(batch)
                actual(batch)
        results = compare_results(
            extract_results_from_loggers(reference), extract_results_from_loggers(actual)
        )
    per_layer: dict[str, float] = {}
    for summary in results.values():  # graph order: a layer's last node wins
        layer = layer_of(str(summary.ref_module_stack), names)
        if layer:
            per_layer[layer] = float(torch.stack([r.sqnr for r in summary.results]).mean())
    return "torchao PT2E numeric debugger (XNNPACKQuantizer)", per_layer


def _fold_batch_norms(module: Any) -> Any:
    """A copy with each conv + BatchNorm of a Sequential folded into the conv. prepare_pt2e folds
    them in the quantized graph only, so the float graph's conv output (before its BatchNorm)
    would be compared with the quantized one's (after it), and the BatchNorm has no partner."""
    import torch
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    folded = copy.deepcopy(module).eval()
    for unit in folded.modules():
        if (
            isinstance(unit, torch.nn.Sequential)
            and len(unit) > 1
            and isinstance(unit[0], torch.nn.Conv2d)
            and isinstance(unit[1], torch.nn.BatchNorm2d)
        ):
            unit[0] = fuse_conv_bn_eval(unit[0], unit[1])
            unit[1] = torch.nn.Identity()
    return folded


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    import logging

    logger = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


# --------------------------------------------------------------------------------------------
# Output


def _db(value: float | None) -> str:
    if value is None:
        return "-"
    return "exact" if math.isinf(value) and value > 0 else f"{value:.1f}"


def table(report: DebugReport) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the ranking table (most harmful first)."""
    header = ["#", "layer", "op", "only int8 dB", "all but dB", "cumulative dB"]
    if report.crosscheck:
        header.append(f"{report.target} dB")
    header.append("float island")
    rows = []
    for rank, layer in enumerate(report.layers, start=1):
        row = [
            str(rank),
            layer.name,
            layer.op,
            _db(layer.only_db),
            _db(layer.all_but_db),
            _db(layer.cumulative_db),
        ]
        if report.crosscheck:
            row.append(_db(layer.artifact_db))
        row.append(" + ".join(layer.float_island))
        rows.append(row)
    return header, rows


def plot(report: DebugReport, path: Path) -> Path:
    """Per-layer SQNR in forward order: isolated (bars), cumulative and the cross-check (lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = sorted(report.layers, key=lambda layer: layer.index)
    labels = [layer.name for layer in ordered]
    positions = np.arange(len(ordered))

    def finite(values: list[float | None]) -> list[float]:
        return [np.nan if v is None or not math.isfinite(v) else v for v in values]

    figure, axis = plt.subplots(figsize=(max(6.0, 0.45 * len(ordered) + 2), 4.5))
    worst = report.layers[0].name
    colors = ["tab:red" if name == worst else "tab:blue" for name in labels]
    axis.bar(positions, finite([layer.only_db for layer in ordered]), color=colors, alpha=0.6,
             label="only this layer int8 (model output)")  # fmt: skip
    axis.plot(positions, finite([layer.cumulative_db for layer in ordered]), "k.-",
              label="all int8: layer output (cumulative)")  # fmt: skip
    if report.crosscheck:
        axis.plot(positions, finite([layer.artifact_db for layer in ordered]), "o--",
                  color="tab:orange", label=f"{report.target}: {report.crosscheck}")  # fmt: skip
    axis.axhline(report.all_int8_db, color="gray", linestyle=":", label="all int8: model output")
    axis.set_xticks(positions, labels, rotation=60, ha="right", fontsize=7)
    axis.set_ylabel("SQNR against fp32 (dB, higher is better)")
    axis.set_title(f"{report.model}: int8 sensitivity per layer ({report.samples} samples)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
