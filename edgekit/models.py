"""Source models: the trained fp32 classifier in its own framework, with its preprocessing.

A model spec is one of:
- a zoo name (``digits-mobilenet``, also written ``zoo:digits-mobilenet``);
- ``package.module:factory``, optionally with a state-dict file loaded with ``weights_only=True``;
- a ``.pt2`` file saved with ``torch.export.save``;
- a Keras ``.keras`` file.
"""

from __future__ import annotations

import hashlib
import importlib
import pickle
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import UserInputError
from edgekit.preprocess import Preprocess

DEFAULT_MODEL = "digits-mobilenet"


@dataclass
class SourceModel:
    """The fp32 classifier to export. ``framework`` is ``torch`` or ``keras``."""

    name: str
    framework: str
    module: Any
    preprocess: Preprocess
    digest: str
    spec: str
    max_batch: int = 256  # an ExportedProgram with a static batch dimension runs that batch only

    def example_input(self, batch: int = 1) -> np.ndarray:
        """A deterministic NCHW float32 input of the model's shape."""
        rng = np.random.default_rng(0)
        return rng.standard_normal(self.preprocess.input_shape(batch)).astype(np.float32)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Logits for NCHW float32 inputs, in the model's own framework on the host CPU."""
        outputs = []
        for start in range(0, len(x), self.max_batch):
            chunk = x[start : start + self.max_batch]
            if self.framework == "torch":
                import torch

                with torch.no_grad():
                    outputs.append(self.module(torch.from_numpy(chunk)).numpy())
            else:
                if self.preprocess.layout == "NHWC":
                    chunk = chunk.transpose(0, 2, 3, 1)
                outputs.append(np.asarray(self.module(chunk, training=False)))
        return np.concatenate(outputs).astype(np.float32)


def torch_digest(module: Any) -> str:
    """sha256 over the state dict's names and tensor bytes, in order."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def load_model(
    spec: str = DEFAULT_MODEL,
    weights: str | Path | None = None,
    input_shape: tuple[int, int, int] | None = None,
    quiet: bool = False,
) -> SourceModel:
    """Resolve a model spec (see the module docstring) to a :class:`SourceModel`."""
    from edgekit import zoo

    name = spec.removeprefix("zoo:")
    if name in zoo.ZOO:
        if weights is not None:
            raise UserInputError(f"{spec}: zoo models bring their own weights; drop --weights")
        return zoo.load_zoo_model(name, quiet=quiet)
    if spec.startswith("zoo:"):
        raise UserInputError(f"{spec}: no such zoo model (have: {', '.join(zoo.ZOO)})")
    path = Path(spec)
    if path.suffix == ".pt2":
        return _load_exported_program(path)
    if path.suffix in (".keras", ".h5"):
        return _load_keras(path)
    if ":" in spec and not path.exists():
        return _load_factory(spec, weights, input_shape)
    if path.exists():
        raise UserInputError(f"{spec}: unknown model file type (expected .pt2 or .keras)")
    raise UserInputError(
        f"{spec}: not a zoo model, a file, or package.module:factory (zoo: {', '.join(zoo.ZOO)})"
    )


def _preprocess_from(
    module: Any, input_shape: tuple[int, int, int] | None, spec: str
) -> Preprocess:
    """Preprocessing from the module's ``edgekit_preprocess`` dict, else from ``input_shape``."""
    config = dict(getattr(module, "edgekit_preprocess", {}) or {})
    if input_shape is not None:
        channels, height, width = input_shape
        config.update(channels=channels, input_size=(height, width))
    if "channels" not in config or "input_size" not in config:
        raise UserInputError(
            f"{spec}: cannot tell the model's input shape; pass --input-shape C,H,W "
            "or set an edgekit_preprocess dict on the module"
        )
    channels = int(config["channels"])
    num_classes = config.get("num_classes")
    names = config.get("class_names")
    if names is None:
        if num_classes is None:
            raise UserInputError(f"{spec}: set class_names or num_classes in edgekit_preprocess")
        names = [f"class_{index}" for index in range(int(num_classes))]
    return Preprocess(
        input_size=tuple(int(v) for v in config["input_size"]),
        channels=channels,
        mean=tuple(config.get("mean", (0.0,) * channels)),
        std=tuple(config.get("std", (1.0,) * channels)),
        class_names=tuple(str(n) for n in names),
        layout=config.get("layout", "NCHW"),
    )


def _load_factory(
    spec: str, weights: str | Path | None, input_shape: tuple[int, int, int] | None
) -> SourceModel:
    import torch

    module_name, _, attr = spec.partition(":")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # a user's own module beside their project
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserInputError(f"{spec}: cannot import the factory ({exc})") from None
    try:
        module = factory()
    except Exception as exc:
        raise UserInputError(f"{spec}: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(module, torch.nn.Module):
        raise UserInputError(f"{spec}: the factory returned {type(module).__name__}, not nn.Module")
    if weights is not None:
        _load_state_dict(module, Path(weights))
    module.eval()
    preprocess = _preprocess_from(module, input_shape, spec)
    return SourceModel(attr, "torch", module, preprocess, torch_digest(module), spec)


def _load_state_dict(module: Any, path: Path) -> None:
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
    except (RuntimeError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UserInputError(
            f"{path}: not a readable torch state dict ({_first_line(exc)})"
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise UserInputError(f"{path}: holds a {type(state).__name__}, not a state dict")
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        raise UserInputError(
            f"{path}: state dict does not fit the model ({_first_line(exc)})"
        ) from None


def _load_exported_program(path: Path) -> SourceModel:
    import torch

    if not path.is_file():
        raise UserInputError(f"{path}: model file not found")
    try:
        program = torch.export.load(str(path))
    except Exception as exc:
        raise UserInputError(
            f"{path}: not a loadable ExportedProgram ({_first_line(exc)})"
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
    try:
        import keras

        model = keras.saving.load_model(str(path), compile=False, safe_mode=True)
    except Exception as exc:
        raise UserInputError(f"{path}: not a loadable Keras model ({_first_line(exc)})") from None
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
