"""Source models: the trained fp32 classifier in its own framework, with its preprocessing.

A model spec is one of:
- a zoo name (``digits-mobilenet``, also written ``zoo:digits-mobilenet``);
- ``package.module:factory``, optionally with a state-dict file loaded with ``weights_only=True``;
- a ``.pt2`` file saved with ``torch.export.save``;
- a Keras ``.keras`` file;
- an ``.onnx`` file (``edgekit.targets.onnx.source``);
- a Hugging Face ``save_pretrained`` folder (``edgekit.sources.huggingface``, as a factory's
  transformers model is).

A ``module:factory`` model that does not declare its input shape takes it from ``--input-shape``,
else from the dataset (said in a warning).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import pickle
import sys
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.errors import UserInputError, first_line
from edgekit.sources import zoo
from edgekit.sources.preprocess import Preprocess, preprocess_from_config
from edgekit.sources.source import SourceModel, torch_digest
from edgekit.sources.zoo import DEFAULT_MODEL

if TYPE_CHECKING:
    import torch

    from edgekit.artifacts.foreign import ForeignOptions
    from edgekit.targets.base import Target

log = logging.getLogger("edgekit")


def load_model(
    spec: str = DEFAULT_MODEL,
    *,
    weights: str | Path | None = None,
    input_shape: tuple[int, int, int] | None = None,
    quiet: bool = False,
    foreign: ForeignOptions | None = None,
    data: str | None = None,
) -> SourceModel:
    """Resolve a model spec (see the module docstring) to a ``SourceModel``. ``foreign``
    (ForeignOptions) describes an .onnx file; ``data`` is the dataset a shapeless factory takes
    its input shape from."""
    name = spec.removeprefix("zoo:")
    if name in zoo.ZOO:
        if weights is not None:
            raise UserInputError(f"{spec}: zoo models bring their own weights; drop --weights")
        return load_zoo_model(name, quiet=quiet)
    if spec.startswith("zoo:"):
        raise UserInputError(f"{spec}: no such zoo model (have: {', '.join(zoo.ZOO)})")
    path = Path(spec)
    if path.is_dir():
        if weights is not None:
            raise UserInputError(f"{spec}: a model folder brings its own weights; drop --weights")
        from edgekit.sources.huggingface import load_folder

        return load_folder(path, input_shape, quiet=quiet)
    if path.suffix == ".pt2":
        return _load_exported_program(path)
    if path.suffix in (".keras", ".h5"):
        return _load_keras(path)
    loader = _source_target(path)
    if loader is not None:
        return _load_model_file(path, loader, foreign, input_shape)
    if ":" in spec and not path.exists():
        return _load_factory(spec, weights, input_shape, data, quiet=quiet)
    if path.exists():
        raise UserInputError(
            f"{spec}: unknown model file type (expected .pt2, .keras, .onnx or a model folder)"
        )
    raise UserInputError(
        f"{spec}: not a zoo model, a file, or package.module:factory (zoo: {', '.join(zoo.ZOO)})"
    )


def _source_target(path: Path) -> Any:
    """The target whose files can be source models, for this suffix (an .onnx), else None."""
    from edgekit.targets import get_target, target_for_suffix

    name = target_for_suffix(path.suffix)
    return get_target(name) if name is not None and get_target(name).loads_source else None


def _load_model_file(
    path: Path,
    loader: Target,
    foreign: ForeignOptions | None,
    input_shape: tuple[int, int, int] | None,
) -> SourceModel:
    """A model file another tool made, as the source: described like any foreign file."""
    from edgekit.artifacts.foreign import ForeignOptions, describe_foreign

    options = foreign or ForeignOptions()
    if input_shape is not None:
        options = replace(options, input_shape=input_shape)
    if not path.is_file():
        raise UserInputError(f"{path}: model file not found")
    described = describe_foreign(path, options)
    if not described["foreign"]["classifier"]:
        raise UserInputError(
            f"{path}: as a source model edgekit needs an image classifier, but "
            f"{described['foreign']['not_a_classifier']}"
        )
    given = {k: list(v) if isinstance(v, tuple) else v for k, v in options.given().items()}
    return loader.load_source(path, described, {"foreign": given})


def _preprocess_from(
    module: torch.nn.Module, input_shape: tuple[int, int, int] | None, spec: str
) -> Preprocess:
    """Preprocessing from the module's ``edgekit_preprocess`` dict, else from ``input_shape``."""
    config = _declared(module, spec)
    if input_shape is not None:
        channels, height, width = input_shape
        config.update(channels=channels, input_size=(height, width))
        if "class_names" not in config and "num_classes" not in config:
            config["num_classes"] = _output_width(module, input_shape, spec)
    return preprocess_from_config(config, f"{spec}: edgekit_preprocess")


def _output_width(module: torch.nn.Module, input_shape: tuple[int, int, int], spec: str) -> int:
    """The class count of a module that does not declare it: its output on a zero input."""
    import torch

    try:
        with torch.no_grad():
            out = module(torch.zeros(1, *input_shape))
    except Exception as exc:
        shape = "x".join(map(str, input_shape))
        raise UserInputError(
            f"{spec}: the model does not run on a {shape} (C,H,W) input "
            f"({type(exc).__name__}: {first_line(exc)}); pass --input-shape"
        ) from None
    if not hasattr(out, "shape") or out.ndim != 2 or out.shape[-1] < 2:
        got = tuple(out.shape) if hasattr(out, "shape") else f"(a {type(out).__name__})"
        raise UserInputError(
            f"{spec}: the model's output {got} is not one vector of class scores per image "
            "(a tensor of shape (N, classes))"
        )
    return int(out.shape[-1])


def _declared(module: torch.nn.Module, spec: str) -> dict[str, Any]:
    config = getattr(module, "edgekit_preprocess", None) or {}
    if not isinstance(config, dict):
        raise UserInputError(
            f"{spec}: edgekit_preprocess must be a dict, got {type(config).__name__}"
        )
    return dict(config)


def _shape_from_data(
    module: torch.nn.Module, spec: str, input_shape: tuple[int, int, int] | None, data: str | None
) -> tuple[tuple[int, int, int] | None, list[str]]:
    """``--input-shape`` wins; a module that declares its shape keeps it; otherwise the
    dataset's image shape, with a note the caller says once the model runs on it."""
    declared = _declared(module, spec)
    if input_shape is not None or data is None or {"channels", "input_size"} <= set(declared):
        return input_shape, []
    from edgekit.sources.data import image_shape

    shape = image_shape(data)
    if shape is None:
        return None, []
    note = (
        f"{spec}: input shape {','.join(map(str, shape))} (C,H,W) taken from the data {data} "
        "(the model does not declare one; --input-shape overrides)"
    )
    return shape, [note]


def _load_factory(
    spec: str,
    weights: str | Path | None,
    input_shape: tuple[int, int, int] | None,
    data: str | None = None,
    *,
    quiet: bool = False,
) -> SourceModel:
    import torch

    from edgekit.common.quiet import quiet_user_code
    from edgekit.sources import huggingface
    from edgekit.sources.hf_output import field_note, takes_pixel_values

    module_name, _, attr = spec.partition(":")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # a user's own module beside their project
    try:
        with quiet_user_code():  # what the user's imports (transformers, torchao) log
            factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserInputError(f"{spec}: cannot import the factory ({exc})") from None
    try:
        with quiet_user_code():
            module = factory()
    except Exception as exc:
        raise UserInputError(f"{spec}: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(module, torch.nn.Module):
        raise UserInputError(f"{spec}: the factory returned {type(module).__name__}, not nn.Module")
    if weights is not None:
        _load_state_dict(module, Path(weights))
    notes: list[str] = []
    if takes_pixel_values(module):  # a transformers model: its ModelOutput's logits
        module, notes = huggingface.as_classifier(
            module, _declared(module, spec), spec, quiet=quiet
        )
    module.eval()
    input_shape, shape_notes = _shape_from_data(module, spec, input_shape, data)
    preprocess = _preprocess_from(module, input_shape, spec)
    for note in shape_notes:  # said once the model ran on it (a refusal says it already)
        log.warning(note)
    if notes and not {"channels", "input_size"} <= set(module.edgekit_preprocess):
        # as_classifier probed where the config gave the shape; here the data gave it
        with contextlib.suppress(Exception):
            module.probe(tuple(input_shape))
            notes[0] = field_note(spec, module)
        preprocess = huggingface.noted(preprocess, module, [*notes, *shape_notes], module.taken)
    notes += shape_notes
    options: dict[str, Any] = {}
    if weights is not None:
        options["weights"] = str(Path(weights).resolve())
    if input_shape is not None:
        options["input_shape"] = list(input_shape)
    return SourceModel(
        attr,
        "torch",
        module,
        preprocess,
        torch_digest(module),
        spec,
        load_options=options,
        notes=notes,
    )


def _load_state_dict(module: torch.nn.Module, path: Path) -> None:
    import torch

    if not path.is_file():
        raise UserInputError(f"{path}: weights file not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unsafe pickle"
        raise UserInputError(
            f"{path}: refused to load: the file holds objects that would run code on load "
            f"(weights_only=True: {first[:160]})"
        ) from None
    except Exception as exc:  # torch's unpickler raises whatever the bytes provoke
        raise UserInputError(
            f"{path}: not a readable torch state dict ({first_line(exc)})"
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise UserInputError(f"{path}: holds a {type(state).__name__}, not a state dict")
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise UserInputError(
            f"{path}: state dict does not fit the model ({first_line(exc)})"
        ) from None


def _load_exported_program(path: Path) -> SourceModel:
    import torch

    if not path.is_file():
        raise UserInputError(f"{path}: model file not found")
    from edgekit.common.quiet import quiet_python

    try:
        with quiet_python(loggers=("torch.export",)):  # it logs the whole traceback first
            program = torch.export.load(str(path))
    except Exception as exc:
        raise UserInputError(
            f"{path}: not a loadable ExportedProgram ({first_line(exc)})"
        ) from None
    placeholders = [
        node for node in program.graph.nodes if node.op == "placeholder" and "val" in node.meta
    ]
    user_inputs = program.graph_signature.user_inputs
    shapes = [tuple(node.meta["val"].shape) for node in placeholders if node.name in user_inputs]
    if len(shapes) != 1 or len(shapes[0]) != 4:
        raise UserInputError(f"{path}: expected one NCHW image input, found shapes {shapes}")
    batch, channels, height, width = (int(v) for v in shapes[0])
    module = program.module()
    with torch.no_grad():
        out = module(torch.zeros(batch, channels, height, width))
    num_classes = int(out.shape[-1])
    preprocess = Preprocess(
        input_size=(height, width),
        channels=channels,
        mean=(0.0,) * channels,
        std=(1.0,) * channels,
        class_names=tuple(f"class_{index}" for index in range(num_classes)),
    )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return SourceModel(path.stem, "torch", module, preprocess, digest, str(path), max_batch=batch)


def _load_keras(path: Path) -> SourceModel:
    if not path.is_file():
        raise UserInputError(f"{path}: model file not found")
    if path.suffix == ".keras" and not zipfile.is_zipfile(path):  # said before TensorFlow starts
        raise UserInputError(
            f"{path}: not a loadable Keras model (not a zip archive, as a .keras file is)"
        )
    try:
        import keras

        model = keras.saving.load_model(str(path), compile=False, safe_mode=True)
    except Exception as exc:
        raise UserInputError(f"{path}: not a loadable Keras model ({first_line(exc)})") from None
    shape = model.input_shape
    if isinstance(shape, list) or len(shape) != 4:
        raise UserInputError(f"{path}: expected one NHWC image input, found {shape}")
    _, height, width, channels = shape
    if None in (height, width, channels):
        raise UserInputError(f"{path}: the input shape {shape} must be fixed (H, W, C)")
    num_classes = int(model.output_shape[-1])
    preprocess = Preprocess(
        input_size=(int(height), int(width)),
        channels=int(channels),
        mean=(0.0,) * int(channels),
        std=(1.0,) * int(channels),
        class_names=tuple(f"class_{index}" for index in range(num_classes)),
        layout="NHWC",
    )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return SourceModel(path.stem, "keras", model, preprocess, digest, str(path))


def load_zoo_model(name: str, *, quiet: bool = False) -> SourceModel:
    """Build a zoo model; trained entries load the weights that ship with edgekit (the same
    on every machine: see ``edgekit.sources.weights``)."""
    entry = zoo.ZOO[name]
    module = entry.build()
    if entry.trained_on is not None:
        from edgekit.sources.weights import load_shipped

        module.load_state_dict(load_shipped(name))
    module.eval()
    return SourceModel(name, "torch", module, entry.preprocess, torch_digest(module), f"zoo:{name}")


def reload_model(info: dict[str, Any], *, quiet: bool = True) -> SourceModel:
    """The source model a manifest or request describes (spec + its load options)."""
    options = info.get("load_options") or {}
    shape = options.get("input_shape")
    foreign = None
    if "foreign" in options:
        from edgekit.artifacts.foreign import ForeignOptions

        foreign = ForeignOptions.from_dict(options["foreign"], info["spec"])
    return load_model(
        info["spec"],
        weights=options.get("weights"),
        input_shape=None if shape is None else tuple(shape),
        quiet=quiet,
        foreign=foreign,
    )
