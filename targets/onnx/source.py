"""An ONNX file as the source model (``--model model.onnx``): the baseline is the original graph
in onnxruntime fp32, the onnx target's recipes apply to the user's graph, and tflite and
executorch get a torch module converted from it by onnx2torch.

Why onnx2torch: it turns an ONNX graph into a torch.fx module that edgekit's own, tested torch
paths take (litert-torch, torch.export + XNNPACK), and it is pure Python on top of the pinned
torch and onnx. onnx2tf, the usual ONNX->TFLite tool, pins old numpy/onnx/tensorflow releases
that cannot co-install with this stack. The adjustments, each said in the export's details:

- onnxruntime's basic optimisations fold the graph first (onnx2torch wants weights as
  initializers; some files compute them), opsets above 17 are converted down (onnx2torch knows
  the older forms of ReduceMean, Split...), and Reshape's ``allowzero=1`` is dropped where the
  constant shape has no 0 (torch.onnx writes it; onnx2torch refuses it);
- onnx2torch imports torchvision for its NonMaxSuppression and RoiAlign converters only, and no
  torchvision works beside this CPU torch build: where torchvision does not import, edgekit
  gives onnx2torch a stand-in whose two functions refuse by name (a classifier needs neither);
- its Reshape reads the target shape from a tensor at run time, which torch.export cannot trace
  (a data-dependent guard): every Reshape becomes a static reshape of the shape it took.

Old opsets (the ONNX model zoo is opset 7-12) are upgraded to ``MIN_OPSET`` with onnx's
version converter, and graphs of IR version < 4 (weights listed as graph inputs) are cleaned."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import replace as dataclass_replace
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UnsupportedExport, UserInputError, first_line
from edgekit.sources.source import SourceModel

MIN_OPSET = 13  # per-channel QDQ (quantize_static) needs opset 13
# `make install` puts onnx2torch here, outside site-packages (the Makefile says why: its
# torchvision does not run beside the CPU torch build); one installed as usual comes first
ONNX2TORCH_FOLDER = Path(sys.prefix) / "onnx2torch"
# onnx2torch 1.5.15 converts ReduceMean/Split/... in their opset <= 17 forms only (opset 18 moved
# their axes to an input); torch.onnx writes opset 18+, so its graphs are converted down first
ONNX2TORCH_MAX_OPSET = 17


class OnnxModel:
    """The user's graph in onnxruntime, fp32, CPU: a callable on the model's own layout."""

    def __init__(self, model_bytes: bytes, threads: int = 1) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.model_bytes = model_bytes
        self.session = ort.InferenceSession(
            model_bytes, options, providers=["CPUExecutionProvider"]
        )
        self.input_name = self.session.get_inputs()[0].name

    def __call__(self, x: np.ndarray) -> np.ndarray:
        output = self.session.run(None, {self.input_name: np.ascontiguousarray(x)})[0]
        return np.asarray(output).reshape(len(x), -1)


def upgraded(path: Path) -> tuple[Any, list[str]]:
    """The model, at least opset ``MIN_OPSET``, initializers no longer listed as inputs."""
    import onnx
    from onnx import version_converter

    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise UserInputError(f"{path}: not a readable ONNX file ({first_line(exc)})") from None
    notes = []
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < MIN_OPSET:
        try:
            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as exc:
            raise UserInputError(
                f"{path}: opset {opset} could not be upgraded to {MIN_OPSET} ({first_line(exc)})"
            ) from None
        notes.append(f"opset {opset} upgraded to {MIN_OPSET} with onnx's version converter")
    constants = {init.name for init in model.graph.initializer}
    listed = [value for value in model.graph.input if value.name in constants]
    if listed:
        keep = [value for value in model.graph.input if value.name not in constants]
        del model.graph.input[:]
        model.graph.input.extend(keep)
        notes.append(
            f"{len(listed)} weights listed as graph inputs (IR {model.ir_version}) unlisted"
        )
    model.ir_version = max(model.ir_version, 8)
    return model, notes


def load_source(path: Path, described: dict[str, Any], load_options: dict[str, Any]) -> SourceModel:
    """An ONNX classifier as the source model; ``described`` is its inferred manifest
    (edgekit.artifacts.foreign: layout, preprocessing, what was assumed)."""
    from edgekit.sources.preprocess import Preprocess

    model, notes = upgraded(path)
    data = model.SerializeToString()
    preprocess = Preprocess.from_dict(described["preprocessing"], f"{path}: preprocessing")
    preprocess = dataclass_replace(preprocess, layout=described["input"]["layout"])
    return SourceModel(
        name=path.stem,
        framework="onnx",
        module=OnnxModel(data),
        preprocess=preprocess,
        digest=hashlib.sha256(path.read_bytes()).hexdigest(),
        spec=str(path.resolve()),  # the baseline child process opens it again
        max_batch=256 if _dynamic_batch(model) else int(described["input"]["shape"][0]),
        load_options=load_options,
        notes=[*described["foreign"]["inferred"], *notes],
    )


def _dynamic_batch(model: Any) -> bool:
    constants = {init.name for init in model.graph.initializer}
    first = next(value for value in model.graph.input if value.name not in constants)
    dims = first.type.tensor_type.shape.dim
    return bool(dims) and not dims[0].HasField("dim_value")


def _onnx2torch_importable() -> bool:
    if (
        importlib.util.find_spec("onnx2torch") is None
        and (ONNX2TORCH_FOLDER / "onnx2torch").is_dir()
    ):
        sys.path.append(str(ONNX2TORCH_FOLDER))  # its dist-info too: metadata.version finds it
        importlib.invalidate_caches()
    return importlib.util.find_spec("onnx2torch") is not None


@contextlib.contextmanager
def _torchvision_stand_in() -> Iterator[None]:
    """onnx2torch imports torchvision for NMS and RoiAlign only; where none imports, a stand-in
    whose functions refuse by name (removed again afterwards)."""
    if importlib.util.find_spec("torchvision") is not None:
        yield
        return

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedExport("onnx2torch: NonMaxSuppression/RoiAlign need torchvision")

    stand_in, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.nms = ops.roi_align = ops.box_convert = refuse
    stand_in.ops = ops
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = stand_in, ops
    try:
        yield
    finally:
        sys.modules.pop("torchvision", None)
        sys.modules.pop("torchvision.ops", None)


def _static_reshapes(module: Any, example: Any) -> int:
    """Replace onnx2torch's Reshape (shape read at run time) with the static shape it took."""
    import torch

    seen: dict[str, tuple[int, ...]] = {}
    handles = []
    for name, child in module.named_modules():
        if type(child).__name__ == "OnnxReshape":

            def record(_module: Any, _inputs: Any, out: Any, name: str = name) -> None:
                seen[name] = tuple(out.shape)

            handles.append(child.register_forward_hook(record))
    with torch.no_grad():
        module(example)
    for handle in handles:
        handle.remove()

    class StaticReshape(torch.nn.Module):
        def __init__(self, shape: tuple[int, ...]) -> None:
            super().__init__()
            self.shape = shape

        def forward(self, x: torch.Tensor, _shape: Any = None) -> torch.Tensor:
            return torch.reshape(x, self.shape)

    for name, shape in seen.items():
        module.set_submodule(name, StaticReshape(shape))
    return len(seen)


def as_torch(source: SourceModel, target: str) -> SourceModel:
    """The ONNX source as a torch module (onnx2torch), for a target that exports torch; the
    conversion is done once per source and kept on it. One line naming the operator where
    onnx2torch has no converter for it."""
    import torch

    cached = getattr(source.module, "as_torch", None)
    if cached is not None:
        return cached
    import onnx

    if not _onnx2torch_importable():
        raise UnsupportedExport(
            f"{target}: an ONNX source reaches {target} through onnx2torch, which is not "
            "installed (pip install 'edgekit-bench[onnx-source]'; `make install` has it)"
        )
    graph, down = _for_onnx2torch(onnx.load_from_string(folded(source.module.model_bytes)))
    try:
        with _torchvision_stand_in():
            from onnx2torch import convert

            module = convert(graph).eval()
    except Exception as exc:
        raise UnsupportedExport(f"{target}: {_conversion_failure(source, exc)}") from None
    nchw = source.preprocess.layout == "NCHW"
    example = torch.from_numpy(source.example_input())
    if not nchw:
        module = _channels_last(module)
    try:
        reshapes = _static_reshapes(module, example)
    except Exception as exc:  # the converted graph does not run: a converter gap in practice
        raise UnsupportedExport(
            f"{target}: onnx2torch's conversion of {source.name} does not run "
            f"({type(exc).__name__}: {first_line(exc)})"
        ) from None
    onnx2torch_version = importlib.metadata.version("onnx2torch")

    converted = SourceModel(
        name=source.name,
        framework="torch",
        module=module.eval(),
        preprocess=dataclass_replace(source.preprocess, layout="NCHW"),
        digest=source.digest,
        spec=source.spec,
        max_batch=1,  # its reshapes are static now, batch 1
        load_options=source.load_options,
        notes=[
            *source.notes,
            f"converted to torch by onnx2torch {onnx2torch_version} after onnxruntime's basic "
            f"constant folding{down} ({reshapes} Reshape(s) made static"
            + ("; NHWC input permuted to the graph" if not nchw else "")
            + ")",
        ],
    )
    source.module.as_torch = converted
    return converted


def _for_onnx2torch(model: Any) -> tuple[Any, str]:
    """The graph in a form onnx2torch converts, and what was done, for the notes: an opset it
    knows (onnx's version converter, down), and Reshape's ``allowzero=1`` (torch.onnx writes it;
    onnx2torch refuses it) dropped where the constant shape holds no 0, the only case in which
    the attribute changes anything."""
    from onnx import numpy_helper, version_converter

    done = ""
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset > ONNX2TORCH_MAX_OPSET:
        try:
            model = version_converter.convert_version(model, ONNX2TORCH_MAX_OPSET)
            done += f", opset {opset} converted down to {ONNX2TORCH_MAX_OPSET}"
        except Exception:  # no adapter for some op: onnx2torch then names what it lacks
            pass
    constants = {init.name: init for init in model.graph.initializer}
    cleared = 0
    for node in model.graph.node:
        flag = next((a for a in node.attribute if a.name == "allowzero"), None)
        shape = constants.get(node.input[1]) if node.op_type == "Reshape" else None
        harmless = shape is not None and 0 not in numpy_helper.to_array(shape).tolist()
        if flag is not None and flag.i == 1 and harmless:
            node.attribute.remove(flag)
            cleared += 1
    if cleared:
        done += f", allowzero dropped from {cleared} Reshape(s) with no 0 in their shape"
    return model, done


def folded(model_bytes: bytes) -> bytes:
    """The graph after onnxruntime's basic optimisations (constant folding above all):
    onnx2torch wants weights as initializers, and some files compute them (ConstantOfShape,
    Constant nodes); Conv+BatchNorm folds too, which changes nothing a classifier computes."""
    import onnxruntime as ort

    from edgekit.common.fileio import temporary_directory

    with temporary_directory(".onnx-fold-") as work:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(work / "folded.onnx")
        options.log_severity_level = 3
        ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        return (work / "folded.onnx").read_bytes()


def _conversion_failure(source: SourceModel, exc: BaseException) -> str:
    match = re.search(r"operation_type='([^']+)', version=(\d+)", str(exc))
    if match:
        return (
            f"onnx2torch has no converter for operator {match.group(1)} (opset "
            f"{match.group(2)}) in {source.name}; the onnx target exports the graph as it is"
        )
    return (
        f"onnx2torch cannot convert {source.name} ({type(exc).__name__}: {first_line(exc)}); "
        "the onnx target exports the graph as it is"
    )


def _channels_last(inner: Any) -> Any:
    """NCHW in, like every torch source; the converted graph wants NHWC."""
    import torch

    class ChannelsLast(torch.nn.Module):
        def __init__(self, graph: torch.nn.Module) -> None:
            super().__init__()
            self.graph = graph

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.graph(x.permute(0, 2, 3, 1))

    return ChannelsLast(inner)
