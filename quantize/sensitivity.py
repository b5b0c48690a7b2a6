"""Per-layer int8 sensitivity of a torch classifier, named by torch module path (``block2.dw``,
see ``edgekit.quantize.layers``).

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
  numeric debugger on the XNNPACK-quantized graph (each target's ``layer_errors``, called by
  ``edgekit.analysis.crosscheck``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.common.metrics import sqnr_db
from edgekit.errors import UnsupportedExport
from edgekit.quantize.layers import Layer, consumers, find_layers

if TYPE_CHECKING:
    import torch

    from edgekit.sources.source import SourceModel

DEFAULT_SAMPLES = 64  # calibration samples: ranges from them and SQNR on them
TOP_CANDIDATES = 5  # layers that get the (costlier) all-but-this-layer run


@dataclass
class LayerSensitivity:
    name: str  # torch module path
    op: str  # Conv2d, Conv2d(depthwise), Linear
    index: int  # position in the model's forward order
    cumulative_db: float | None  # None: the layer's own forward never runs (no output tensor)
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


def _finite(value: object) -> Any:
    """JSON has no inf: an exact match (no noise) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# The int8 simulation


def _fake_quant_weight(weight: torch.Tensor) -> Any:
    """Symmetric per-output-channel int8 (what all three targets use for weights). BatchNorm
    folding scales each output channel, so quantizing the unfolded weight is the same."""
    import torch

    flat = weight.reshape(weight.shape[0], -1)
    scale = flat.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    shape = (-1,) + (1,) * (weight.dim() - 1)
    return torch.clamp(torch.round(weight / scale.view(shape)), -127, 127) * scale.view(shape)


def _fake_quant_activation(x: torch.Tensor, low: float, high: float) -> Any:
    """Per-tensor affine 8-bit over [low, high] (the range always holds 0)."""
    import torch

    low, high = min(low, 0.0), max(high, 0.0)
    scale = max(high - low, 1e-12) / 255.0
    zero = round(-low / scale)
    return (torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale


class _Simulator:
    """Runs the model with a chosen set of layers int8 (weights + output tensor)."""

    def __init__(self, module: torch.nn.Module, layers: list[Layer], x: np.ndarray) -> None:
        import torch

        self.module = copy.deepcopy(module).eval()
        units = dict(self.module.named_modules())
        self.layers = layers
        self.units = {layer.name: units[layer.name] for layer in layers}
        self.weighted = {
            layer.name: self.units[layer.name]
            if layer.unit is layer.weighted
            else self.units[layer.name][0]
            for layer in layers
        }
        self.float_weights = {n: m.weight.detach().clone() for n, m in self.weighted.items()}
        self.int8_weights = {n: _fake_quant_weight(w) for n, w in self.float_weights.items()}
        self.x = torch.from_numpy(np.ascontiguousarray(x))
        self.ranges: dict[str, tuple[float, float]] = {}
        self.input_range = (float(self.x.min()), float(self.x.max()))
        self.reference, self.float_outputs = self._run(set(), record=True)

    def _run(self, quantized: set[str], *, record: bool = False) -> tuple[Any, dict[str, Any]]:
        import torch

        captured: dict[str, Any] = {}
        handles = []

        def hook(name: str) -> Callable[..., Any]:
            def apply(
                _module: torch.nn.Module, _inputs: tuple[Any, ...], output: torch.Tensor
            ) -> Any:
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

    def all_int8(self) -> tuple[float, dict[str, float | None]]:
        output, tensors = self._run(set(self.units))
        per_layer = {
            n: sqnr_db(self.float_outputs[n], tensors[n]) if n in tensors else None
            for n in self.units
        }
        return sqnr_db(self.reference, output), per_layer

    def never_called(self) -> list[str]:
        """Layers whose module's forward never runs: an enclosing module uses their weights
        itself (nn.MultiheadAttention's out_proj), so only their weights are made int8."""
        return [name for name in self.units if name not in self.float_outputs]


def analyze(
    source: SourceModel,
    calibration: np.ndarray,
    samples: int = DEFAULT_SAMPLES,
    top: int = TOP_CANDIDATES,
) -> DebugReport:
    """Rank ``source``'s layers by int8 harm on ``calibration`` (NCHW float32)."""
    if source.framework != "torch":
        raise UnsupportedExport(
            f"quantize-debug: {source.name} is a {source.framework} model; layers are named by "
            "torch module path, so the debugger needs a torch source"
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
    notes = [
        f"{name}: its forward never runs (an enclosing module uses its weights in its own "
        "forward): only its weights are simulated in int8, and it has no cumulative figure"
        for name in simulator.never_called()
    ]
    return DebugReport(source.name, None, len(x), all_db, rows, notes=notes)


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
    axis.bar(
        positions,
        finite([layer.only_db for layer in ordered]),
        color=colors,
        alpha=0.6,
        label="only this layer int8 (model output)",
    )
    axis.plot(
        positions,
        finite([layer.cumulative_db for layer in ordered]),
        "k.-",
        label="all int8: layer output (cumulative)",
    )
    if report.crosscheck:
        axis.plot(
            positions,
            finite([layer.artifact_db for layer in ordered]),
            "o--",
            color="tab:orange",
            label=f"{report.target}: {report.crosscheck}",
        )
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
