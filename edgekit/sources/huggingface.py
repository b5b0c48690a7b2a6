"""Hugging Face transformers classifiers as source models, as they come.

- A module whose ``forward`` takes ``pixel_values`` (a ``*ForImageClassification``) returns a
  ``ModelOutput``; edgekit uses it through ``Logits``, whose ``forward(x)`` is
  ``model(pixel_values=x).logits`` (or the output's one field of the labels' shape, where it has
  no ``logits``). Its config gives the classes (``id2label``) and, where it
  has one, the input shape (``num_channels``, ``image_size``).
- A ``save_pretrained`` folder (``config.json``, the weights, ``preprocessor_config.json``) is
  loaded with ``AutoModelForImageClassification.from_pretrained(folder, local_files_only=True)``;
  its preprocessing comes from ``preprocessor_config.json``.

Whatever edgekit assumes is one line in ``SourceModel.notes``, printed as a warning and kept in
the manifest (``preprocessing.notes.huggingface``)."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from edgekit.common.quiet import quiet_user_code, verbose
from edgekit.errors import UserInputError, first_line
from edgekit.sources.hf_output import Logits, field_note
from edgekit.sources.preprocess import RESAMPLES, Preprocess, preprocess_from_config
from edgekit.sources.source import SourceModel, torch_digest

if TYPE_CHECKING:
    from transformers import PretrainedConfig

log = logging.getLogger("edgekit")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")  # fmt: skip
PIL_FILTERS = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
RESCALE = 1 / 255  # transformers' default rescale_factor: pixels 0..255 to [0, 1]


def as_classifier(
    model: torch.nn.Module, declared: dict[str, Any], spec: str, *, quiet: bool = False
) -> tuple[Logits, list[str]]:
    """A factory's transformers model as edgekit's classifier, with its ``edgekit_preprocess``
    (``declared`` wins) completed from its config; the notes say what was taken from where."""
    kind = type(model).__name__
    notes = [f"{spec}: {kind} taken through its logits (forward(pixel_values=x).logits)"]
    config = getattr(model, "config", None)
    facts = dict(declared)
    shape = _config_shape(config)
    if shape is not None and not {"channels", "input_size"} & set(facts):
        facts.update(channels=shape[0], input_size=shape[1:])
        notes.append(
            f"{spec}: input shape {','.join(map(str, shape))} (C,H,W) from the model's config "
            "(num_channels, image_size; --input-shape overrides)"
        )
    if config is not None and not {"class_names", "num_classes"} & set(facts):
        facts["class_names"] = class_names(config, spec, notes)
    classes = facts.get("num_classes") or len(facts.get("class_names") or ()) or None
    wrapped = Logits(model, classes)
    if classes:
        notes[0] += f"; where its output has none, the one field of {classes} columns"
    if {"channels", "input_size"} <= set(facts) and classes:  # probed where the shape is known
        with contextlib.suppress(Exception):
            wrapped.probe((facts["channels"], *facts["input_size"]))
            notes[0] = field_note(spec, wrapped)
    if "mean" not in facts and "std" not in facts:
        notes.append(
            f"{spec}: no image processor known for a {kind} built in code: images in [0, 1] fed "
            "without normalisation (set edgekit_preprocess, or pass its save_pretrained folder)"
        )
    wrapped.edgekit_preprocess = facts  # what models reads from any factory's module
    _say(notes, quiet=quiet)
    return wrapped, notes


def noted(
    preprocess: Preprocess, model: torch.nn.Module, notes: list[str], field: str = "logits"
) -> Preprocess:
    """The preprocessing with what was assumed kept in it (the manifest stores it)."""
    inner = getattr(model, "model", model)
    record = {"model": type(inner).__name__, "output": field, "assumed": list(notes)}
    return replace(preprocess, notes={**preprocess.notes, "huggingface": record})


def class_names(config: PretrainedConfig, where: str, notes: list[str]) -> list[str]:
    """``config.id2label`` in index order; transformers' placeholders (LABEL_0...) become
    edgekit's (class_0...), so an image folder's class folders match by sorted order."""
    labels = dict(getattr(config, "id2label", None) or {})
    count = int(getattr(config, "num_labels", len(labels)))
    names = [labels.get(index, labels.get(str(index))) for index in range(count)]
    if any(name is None for name in names):
        notes.append(f"{where}: id2label does not name all {count} classes: named class_0..")
        return [f"class_{index}" for index in range(count)]
    if all(str(name) == f"LABEL_{index}" for index, name in enumerate(names)):
        notes.append(
            f"{where}: id2label holds transformers' placeholders LABEL_0..LABEL_{count - 1}: "
            f"classes named class_0..class_{count - 1} (class folders match in sorted order)"
        )
        return [f"class_{index}" for index in range(count)]
    return [str(name) for name in names]


def _config_shape(config: PretrainedConfig | None) -> tuple[int, int, int] | None:
    """(C, H, W) from a vision config's ``num_channels`` and ``image_size``, if it has both."""
    channels = getattr(config, "num_channels", None)
    size = getattr(config, "image_size", None)
    if isinstance(size, int):
        size = (size, size)
    if not isinstance(channels, int) or not isinstance(size, (list, tuple)) or len(size) != 2:
        return None
    return (channels, int(size[0]), int(size[1]))


def load_folder(
    folder: Path, input_shape: tuple[int, int, int] | None = None, *, quiet: bool = False
) -> SourceModel:
    """A ``save_pretrained`` folder as the source model (see the module docstring)."""
    if not (folder / "config.json").is_file():
        raise UserInputError(
            f"{folder}: not a Hugging Face model folder: no config.json in it "
            "(model.save_pretrained(folder) writes config.json and model.safetensors)"
        )
    raw = _read_json(folder / "config.json")
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        raise UserInputError(
            f"{folder}: no weights beside config.json (model.safetensors or pytorch_model.bin)"
        )
    with quiet_user_code():  # transformers' imports pull in torchao: its chatter too
        model = _from_pretrained(folder, raw)
    parameters = list(inspect.signature(model.forward).parameters) or ["nothing"]
    # ImageGPT's colour-cluster token ids; ShieldGemma2's prompt beside the image (Perceiver
    # takes `inputs` first and pixel_values by name: it is an image classifier)
    if "pixel_values" not in parameters or parameters[0] == "input_ids":
        what = (
            "does not take pixel_values"
            if "pixel_values" not in parameters
            else "takes input_ids first"
        )
        raise UserInputError(
            f"{folder}: {type(model).__name__} {what}: edgekit exports image classifiers whose "
            "forward takes the image alone"
        )
    config = model.config
    notes = [f"{folder}: {type(model).__name__} taken through its logits "
             "(forward(pixel_values=x).logits)"]  # fmt: skip
    channels = int(getattr(config, "num_channels", 3))
    pre, flip = folder_preprocessing(folder, channels, notes)
    shape = _input_shape(folder, config, pre, input_shape, notes)
    pre.update(channels=shape[0], input_size=shape[1:])
    pre["class_names"] = class_names(config, f"{folder}: config.json", notes)
    preprocess = preprocess_from_config(pre, f"{folder}: preprocessor_config.json")
    wrapped = Logits(model, len(pre["class_names"]), flip_channels=flip).eval()
    with quiet_user_code():
        _probe(wrapped, shape, folder, notes, shape_given=input_shape is not None)
    _say(notes, quiet=quiet)
    options = {} if input_shape is None else {"input_shape": list(input_shape)}
    return SourceModel(
        folder.resolve().name, "torch", wrapped, noted(preprocess, model, notes, wrapped.taken),
        torch_digest(wrapped), str(folder.resolve()),  # the baseline child loads it again
        load_options=options, notes=notes,
    )  # fmt: skip


def _read_json(path: Path) -> dict[str, Any]:
    try:
        payload = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserInputError(f"{path}: not readable JSON ({first_line(exc)})") from None
    if not isinstance(payload, dict):
        raise UserInputError(f"{path}: must hold a JSON object, got {type(payload).__name__}")
    return payload


def _from_pretrained(folder: Path, raw: dict[str, Any]) -> Any:
    """The folder's model, refused in one line where transformers lacks its architecture or
    where it would not be the model saved (a head left untrained). Called inside
    ``quiet_user_code``."""
    import transformers
    from transformers import AutoModelForImageClassification
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    version = transformers.__version__
    architectures = raw.get("architectures") or []
    if not isinstance(architectures, list):
        raise UserInputError(f"{folder}: config.json 'architectures' must be a list of names")
    for name in architectures:
        if not isinstance(name, str) or not hasattr(transformers, name):
            raise UserInputError(
                f"{folder}: config.json names the architecture {name!r}, which transformers "
                f"{version} does not have"
            )
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise UserInputError(
            f"{folder}: config.json's model_type {model_type!r} is not one transformers "
            f"{version} knows"
        )
    try:
        with _no_progress_bar():
            model, info = AutoModelForImageClassification.from_pretrained(
                str(folder), local_files_only=True, output_loading_info=True
            )
    except Exception as exc:  # transformers raises whatever the folder provokes
        raise UserInputError(
            f"{folder}: transformers cannot load it as an image classifier "
            f"({type(exc).__name__}: {first_line(exc)})"
        ) from None
    if architectures and type(model).__name__ not in architectures:
        raise UserInputError(
            f"{folder}: config.json's architecture {architectures[0]} is not an image classifier "
            f"(AutoModelForImageClassification would add an untrained head: {type(model).__name__})"
        )
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise UserInputError(
            f"{folder}: the weights lack {len(missing)} tensor(s) of the model ({missing[0]}...); "
            "they would be random"
        )
    return model.eval()


@contextlib.contextmanager
def _no_progress_bar() -> Iterator[None]:
    """from_pretrained draws a "Loading weights" bar on stderr (shown with EDGEKIT_VERBOSE)."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    if shown and not verbose():
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def folder_preprocessing(
    folder: Path, channels: int, notes: list[str]
) -> tuple[dict[str, Any], bool]:
    """edgekit's preprocessing dict from ``preprocessor_config.json`` (input_size only where it
    names one), and whether the model takes BGR."""
    path = folder / "preprocessor_config.json"
    if not path.is_file():
        notes.append(
            f"{folder}: no preprocessor_config.json: images in [0, 1] fed without normalisation, "
            "resized bilinear"
        )
        return {}, False
    raw = _read_json(path)
    where = f"{path}:"
    pre: dict[str, Any] = {"resample": _resample(raw, path, notes)}
    size = _size(raw, path, notes)
    if size is not None:
        pre["input_size"] = size
    factor = raw.get("rescale_factor", RESCALE)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
        raise UserInputError(f"{where} 'rescale_factor' must be a positive number, got {factor!r}")
    # edgekit's images are in [0, 1]; transformers rescales 0..255 pixels by rescale_factor
    pre["scale"] = float(f"{factor * 255:.10g}") if raw.get("do_rescale", True) else 255.0
    if raw.get("do_normalize", True):
        if "image_mean" in raw and "image_std" in raw:
            pre.update(mean=raw["image_mean"], std=raw["image_std"])
        else:
            notes.append(f"{where} do_normalize without image_mean/image_std: none applied")
    flip = bool(raw.get("do_flip_channel_order", False))
    if flip:
        notes.append(f"{where} the model takes BGR (do_flip_channel_order): the flip is built "
                     "into the exported graph, the artifact takes RGB")  # fmt: skip
    elif channels == 3:
        notes.append(f"{where} channel order RGB (as transformers' image processors take images)")
    return pre, flip


def _resample(raw: dict[str, Any], path: Path, notes: list[str]) -> str:
    value = raw.get("resample")
    if value is None:
        notes.append(f"{path}: no resample given: bilinear assumed")
        return "bilinear"
    if isinstance(value, int) and not isinstance(value, bool) and value in PIL_FILTERS:
        return PIL_FILTERS[value]
    if isinstance(value, str) and value.lower() in RESAMPLES:
        return value.lower()
    raise UserInputError(f"{path}: 'resample' {value!r} is not a Pillow filter (0..5)")


def _size(raw: dict[str, Any], path: Path, notes: list[str]) -> tuple[int, int] | None:
    """The model's input (H, W): the center crop where one is made, else the resize size; a
    ``shortest_edge`` becomes a square (edgekit resizes whole images to one size)."""
    if raw.get("do_center_crop") and raw.get("crop_size") is not None:
        height, width = _pair(raw["crop_size"], "crop_size", path)
        notes.append(f"{path}: center crop not made: whole images resized to {height}x{width} "
                     "(crop_size)")  # fmt: skip
        return height, width
    if raw.get("do_resize", True) is False or raw.get("size") is None:
        return None
    size = raw["size"]
    if isinstance(size, dict):
        size = {key: value for key, value in size.items() if value is not None}
    if isinstance(size, dict) and "shortest_edge" in size and "height" not in size:
        edge = _pair(size["shortest_edge"], "size.shortest_edge", path)[0]
        crop = f"; crop_pct {raw['crop_pct']} not applied" if raw.get("crop_pct") else ""
        notes.append(f"{path}: size shortest_edge {edge}: taken as a square {edge}x{edge} input "
                     f"(aspect ratio not kept{crop})")  # fmt: skip
        return edge, edge
    return _pair(size, "size", path)


def _pair(value: object, name: str, path: Path) -> tuple[int, int]:
    if isinstance(value, dict) and value.get("height") and value.get("width"):
        value = (value["height"], value["width"])
    elif isinstance(value, int):
        value = (value, value)
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise UserInputError(f"{path}: '{name}' {value!r} is not a size edgekit reads "
                             "(height and width, shortest_edge, or one number)")  # fmt: skip
    return int(value[0]), int(value[1])


def _input_shape(
    folder: Path,
    config: PretrainedConfig,
    pre: dict[str, Any],
    given: tuple[int, int, int] | None,
    notes: list[str],
) -> tuple[int, int, int]:
    """--input-shape, else the preprocessor's size, else the config's image_size."""
    channels = int(getattr(config, "num_channels", 3))
    if given is not None:
        notes.append(f"{folder}: input shape {','.join(map(str, given))} from --input-shape")
        return given
    from_config = _config_shape(config)
    if "input_size" in pre:
        height, width = pre["input_size"]
        if from_config is not None and from_config[1:] != (height, width):
            notes.append(f"{folder}: preprocessor size {height}x{width} used, not config.json's "
                         f"image_size {from_config[1]}x{from_config[2]}")  # fmt: skip
        return channels, height, width
    if from_config is None:
        raise UserInputError(
            f"{folder}: neither preprocessor_config.json nor config.json gives the input size; "
            "pass --input-shape C,H,W"
        )
    notes.append(f"{folder}: input size {from_config[1]}x{from_config[2]} from config.json's "
                 "image_size")  # fmt: skip
    return from_config


def _probe(
    model: Logits, shape: tuple[int, int, int], folder: Path, notes: list[str], *, shape_given: bool
) -> None:
    """One zero image through the model: a shape it does not take is one line now, not an
    exporter's traceback later; the field its logits come from is noted."""
    classes = model.classes
    try:
        out = model.probe(shape)
        notes[0] = field_note(str(folder), model)
    except Exception as exc:
        advice = (
            "--input-shape was given: the model takes another size, or no NCHW image at all"
            if shape_given
            else "pass --input-shape"
        )
        raise UserInputError(
            f"{folder}: the model does not run on a {'x'.join(map(str, shape))} (C,H,W) input "
            f"({type(exc).__name__}: {first_line(exc)}); {advice}"
        ) from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (1, classes):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UserInputError(
            f"{folder}: the model's logits are {got}, not (1, {classes}) for its {classes} labels"
        )


def _say(notes: list[str], *, quiet: bool) -> None:
    if not quiet:
        for note in notes:
            log.warning(note)
