"""Model files edgekit did not make (a .tflite from TFLiteConverter or a hub, an .onnx from
``torch.onnx.export`` or Optimum, a .pte from ExecuTorch's scripts): what the file says about
itself, what edgekit inferred (layout, shape, preprocessing), written into a manifest held in
memory, so every figure measured on it says what it assumed.

Nothing is written beside the user's file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edgekit.common.fileio import sha256_file
from edgekit.errors import UserInputError
from edgekit.sources.preprocess import preprocess_from_config
from edgekit.targets import get_target, suffix_of, target_for_suffix, target_names
from edgekit.targets.base import FileFacts
from edgekit.targets.session import TensorSpec

IMAGE_CHANNELS = (1, 3, 4)
NUMERIC = ("float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64")


@dataclass(frozen=True)
class ForeignOptions:
    """What the user says about a foreign file (flags, or ``[model]`` in edgekit.toml)."""

    layout: str | None = None  # NCHW or NHWC; inferred from the shape otherwise
    input_shape: tuple[int, int, int] | None = None  # C,H,W where the file has dynamic sizes
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    scale: float | None = None  # images in [0, 1] times this before mean/std (255: 0..255)
    class_names: tuple[str, ...] | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, payload: object, where: str) -> ForeignOptions:
        """Options from ``[model]`` in edgekit.toml or a manifest's load options, each checked:
        a wrong type is one line naming ``where`` and the key."""
        if not isinstance(payload, dict):
            raise UserInputError(f"{where}: [model] must be a table")
        payload = dict(payload)
        unknown = sorted(set(payload) - set(MODEL_KEYS))
        if unknown:
            raise UserInputError(
                f"{where}: unknown key {unknown[0]!r} in [model] (known: {', '.join(MODEL_KEYS)})"
            )
        checked: dict[str, Any] = {}
        for key in ("layout",):
            if key in payload:
                checked[key] = _text(payload[key], key, where).upper()
        if "class_names" in payload:
            names = payload["class_names"]
            if isinstance(names, str):
                names = read_class_names(Path(names))
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise UserInputError(f"{where}: 'class_names' must be a list of strings or a file")
            checked["class_names"] = tuple(names)
        for key in ("mean", "std"):
            if key in payload:
                checked[key] = _numbers(payload[key], key, where)
        if "scale" in payload:
            value = payload["scale"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise UserInputError(f"{where}: 'scale' must be a positive number, got {value!r}")
            checked["scale"] = float(value)
        shape = payload.get("input_shape")
        if shape is None and ("channels" in payload or "input_size" in payload):
            shape = [payload.get("channels", -1), *payload.get("input_size", [-1, -1])]
        if shape is not None:
            if (
                not isinstance(shape, (list, tuple))
                or len(shape) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in shape)
            ):
                raise UserInputError(f"{where}: 'input_shape' must be [C, H, W], got {shape!r}")
            checked["input_shape"] = tuple(shape)
        return cls(**checked)


MODEL_KEYS = (
    "layout",
    "input_shape",
    "input_size",
    "channels",
    "mean",
    "std",
    "scale",
    "class_names",
)


def _text(value: object, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise UserInputError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


def _numbers(value: object, key: str, where: str) -> tuple[float, ...]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise UserInputError(f"{where}: {key!r} must be a number or a list of numbers")
    if key == "std" and min(value) <= 0:
        raise UserInputError(f"{where}: 'std' must be positive, got {list(value)}")
    return tuple(float(v) for v in value)


def read_class_names(path: Path) -> list[str]:
    """One class name per line (blank lines and a trailing newline ignored)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError(f"{path}: class-names file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{path}: not a readable text file ({exc})") from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if len(names) < 2:
        raise UserInputError(f"{path}: expected one class name per line, found {len(names)}")
    if len(set(names)) != len(names):
        raise UserInputError(f"{path}: class names repeat")
    return names


def load_model_section(path: Path) -> ForeignOptions:
    """``[model]`` of an edgekit.toml (an empty ForeignOptions where the file has none)."""
    from edgekit.common.fileio import read_toml

    payload = read_toml(path)
    return ForeignOptions.from_dict(payload.get("model", {}), str(path))


def infer_layout(shape: list[int], override: str | None, where: str) -> tuple[str, str]:
    """NCHW or NHWC of a 4-D image input, and how it was decided."""
    channels_first, channels_last = shape[1] in IMAGE_CHANNELS, shape[3] in IMAGE_CHANNELS
    if override is not None:
        if override not in ("NCHW", "NHWC"):
            raise UserInputError(f"--layout {override}: expected NCHW or NHWC")
        plausible = channels_first if override == "NCHW" else channels_last
        if not plausible and -1 not in shape:
            raise UserInputError(
                f"{where}: --layout {override} contradicts the input shape {shape} (its "
                f"{'second' if override == 'NCHW' else 'last'} dimension is not a channel count)"
            )
        return override, "given with --layout"
    if channels_first and not channels_last:
        return "NCHW", f"inferred from the shape {shape}"
    if channels_last and not channels_first:
        return "NHWC", f"inferred from the shape {shape}"
    return ("NHWC" if shape[3] in IMAGE_CHANNELS else "NCHW"), (
        f"ambiguous shape {shape}: assumed {'NHWC' if shape[3] in IMAGE_CHANNELS else 'NCHW'} "
        "(pass --layout to say)"
    )


def _resolve(spec: TensorSpec, options: ForeignOptions, where: str) -> tuple[list[int], list]:
    """Dynamic dimensions filled: the batch with 1, the rest from --input-shape."""
    shape, notes = list(spec.shape), []
    if shape and shape[0] == -1:
        shape[0] = 1
        notes.append(f"{spec.name}: dynamic batch dimension run as 1")
    if -1 in shape and (options.input_shape is None or len(shape) != 4):
        raise UserInputError(
            f"{where}: input {spec.name} has dynamic dimensions {spec.shape}; pass "
            "--input-shape C,H,W"
        )
    return shape, notes


def _image_shape(shape: list[int], layout: str, options: ForeignOptions, where: str) -> list[int]:
    """The image input's shape with its dynamic sizes taken from --input-shape (-1 in the
    option: keep the file's); a given size that contradicts a fixed one is refused."""
    if options.input_shape is None:
        return shape
    order = (1, 2, 3) if layout == "NCHW" else (3, 1, 2)  # where C, H, W sit
    resolved = list(shape)
    for axis, wanted in zip(order, options.input_shape, strict=True):
        if wanted == -1:
            continue
        if shape[axis] not in (-1, wanted):
            raise UserInputError(
                f"{where}: --input-shape {','.join(map(str, options.input_shape))} contradicts "
                f"the model's fixed input shape {shape} ({layout})"
            )
        resolved[axis] = wanted
    return resolved


def describe_foreign(path: Path, options: ForeignOptions | None = None) -> dict[str, Any]:
    """The manifest of a file edgekit did not make, inferred and said so: its inputs and
    outputs as the file gives them, the image preprocessing where it takes one image, and what
    was assumed on the way."""
    options = options or ForeignOptions()
    path = Path(path)
    name, facts, inputs, inferred = _read_inputs(path, options)
    first, preprocessing, why_not = _image_preprocessing(
        inputs, facts, options, str(path), inferred
    )
    inputs[0] = first
    audit = _audit(path, name, inferred)
    return {
        "schema_version": 1,
        "target": name,
        "recipe": audit["looks_like"] if audit else "unknown",
        "file": {"name": path.name, "size": path.stat().st_size, "sha256": sha256_file(path)},
        "input": first.to_dict(),
        "output": replace(facts.outputs[0], layout="NC").to_dict(),
        "inputs": [spec.to_dict() for spec in inputs],
        "outputs": [replace(s, layout="NC").to_dict() for s in facts.outputs],
        "preprocessing": preprocessing,
        "class_names": (preprocessing or {}).get("class_names", []),
        "source": None,
        "foreign": {
            "inferred": inferred,
            "classifier": why_not is None,
            "not_a_classifier": why_not,
            "facts": facts.facts,
            "options": {
                k: list(v) if isinstance(v, tuple) else v for k, v in options.given().items()
            },
        },
        "keep_float": [],
        "audit": audit,
        "details": {},
        "warnings": [],
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _read_inputs(
    path: Path, options: ForeignOptions
) -> tuple[str, FileFacts, list[TensorSpec], list[str]]:
    """The file's target, its own facts, its inputs with every dimension resolved (from the
    options where the file leaves one open) and what was inferred so far."""
    name = target_for_suffix(path.suffix)
    if name is None:
        raise UserInputError(
            f"{path}: not a model file edgekit runs (suffixes: "
            + ", ".join(suffix_of(t) for t in target_names())
            + ")"
        )
    facts = get_target(name).describe(path)
    where = str(path)
    if not facts.inputs or not facts.outputs:
        raise UserInputError(f"{where}: the model has no inputs or no outputs")
    for spec in facts.inputs:
        if spec.dtype not in NUMERIC:
            raise UserInputError(
                f"{where}: input {spec.name} is {spec.dtype}; edgekit feeds numeric tensors only"
            )
    inferred: list[str] = [f"inputs and outputs read from the file ({name})"]
    inputs = []
    for spec in facts.inputs:
        shape, notes = _resolve(spec, options, where)
        inferred += notes
        inputs.append(replace(spec, shape=shape))
    return name, facts, inputs, inferred


def _image_preprocessing(
    inputs: list[TensorSpec],
    facts: FileFacts,
    options: ForeignOptions,
    where: str,
    inferred: list[str],
) -> tuple[TensorSpec, dict[str, Any] | None, str | None]:
    """Where the file takes one image: that input with its layout, the preprocessing (from the
    options, else none) and None; otherwise the first input as it is, no preprocessing, and why
    it is not a classifier edgekit can score. Appends what it assumes to ``inferred``."""
    first = inputs[0]
    if len(inputs) != 1 or len(first.shape) != 4:
        why_not = (
            f"it takes {len(inputs)} inputs"
            if len(inputs) > 1
            else f"its input {first.name} {first.shape} is not one image"
        )
        return first, None, why_not
    layout, how = infer_layout(first.shape, options.layout, where)
    inferred.append(f"layout {layout}: {how}")
    shape = _image_shape(first.shape, layout, options, where)
    if -1 in shape:
        raise UserInputError(
            f"{where}: input {first.name} has dynamic dimensions {shape}; pass --input-shape C,H,W"
        )
    if shape != first.shape:
        inferred.append(f"input shape {shape} from --input-shape")
    first = replace(first, shape=shape, layout=layout)
    channels = shape[1] if layout == "NCHW" else shape[3]
    height, width = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    classes = _classes(facts.outputs)
    why_not = None
    if classes is None:
        why_not = (
            f"its output {facts.outputs[0].name} {facts.outputs[0].shape} is not one "
            "vector of class scores"
        )
    config = {
        "channels": channels,
        "input_size": (height, width),
        "layout": "NCHW",
        "num_classes": classes or 1,
        **_preprocessing(options, channels),
    }
    preprocessing = preprocess_from_config(config, f"{where}: preprocessing").to_dict()
    if options.class_names is not None:
        if classes is not None and len(options.class_names) != classes:
            raise UserInputError(
                f"{where}: --class-names gives {len(options.class_names)} names, the model "
                f"has {classes} outputs"
            )
        preprocessing["class_names"] = list(options.class_names)
    given = options.given()
    inferred += [
        f"{key} {value} given" for key, value in given.items() if key in ("mean", "std", "scale")
    ]
    if not any(k in given for k in ("mean", "std", "scale")):
        inferred.append("no normalisation given: images in [0, 1] fed as they are")
    return first, preprocessing, why_not


def _audit(path: Path, target: str, inferred: list[str]) -> dict[str, Any] | None:
    """``edgekit audit`` of the file: its recipe is what its conv/matmul ops compute in."""
    from edgekit.artifacts.audit import audit_file

    try:
        report = audit_file(path, census=get_target(target).census(path))
    except UserInputError:
        raise
    except Exception as exc:  # a census gap must not stop a benchmark
        inferred.append(f"recipe unknown: the op census failed ({type(exc).__name__})")
        return None
    inferred.append(
        f"recipe {report.looks_like}: what its conv/matmul ops compute in (edgekit audit)"
    )
    return report.summary()


def _classes(outputs: list[TensorSpec]) -> int | None:
    """The class count of a classifier's one output ([1, K] or [1, K, 1, 1]), else None."""
    if len(outputs) != 1 or outputs[0].dtype not in NUMERIC:
        return None
    shape = [d for d in outputs[0].shape]
    if len(shape) == 2 and shape[0] in (1, -1) and shape[1] > 1:
        return shape[1]
    if len(shape) == 4 and shape[0] in (1, -1) and shape[2:] == [1, 1] and shape[1] > 1:
        return shape[1]
    return None


def _preprocessing(options: ForeignOptions, channels: int) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key in ("mean", "std"):
        value = getattr(options, key)
        if value is not None:
            if len(value) == 1:
                value = value * channels
            config[key] = list(value)
    if options.scale is not None:
        config["scale"] = options.scale
    return config
