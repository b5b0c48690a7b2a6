"""The source model: the trained fp32 classifier in its own framework, with its preprocessing.

A leaf: the zoo, the loaders, the targets and the baseline all hold a ``SourceModel``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.sources.logits import SOURCE_LOGITS
from edgekit.sources.preprocess import Preprocess

if TYPE_CHECKING:
    import torch


@dataclass
class SourceModel:
    """The fp32 classifier to export. ``framework`` is ``torch``, ``keras`` or ``onnx``."""

    name: str
    framework: str
    module: Any
    preprocess: Preprocess
    digest: str
    spec: str
    max_batch: int = 256  # an ExportedProgram with a static batch dimension runs that batch only
    # what load_model needs besides the spec to load the same model again (the baseline child)
    load_options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what edgekit inferred, said in one line each

    def example_input(self, batch: int = 1) -> np.ndarray:
        """A deterministic NCHW float32 input of the model's shape."""
        rng = np.random.default_rng(0)
        return rng.standard_normal(self.preprocess.input_shape(batch)).astype(np.float32)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Logits for NCHW float32 inputs, in the model's own framework on the host CPU; the
        same weights and inputs run once per process (``edgekit.sources.logits``)."""
        return SOURCE_LOGITS(self, x, self._forward)

    def _forward(self, x: np.ndarray) -> np.ndarray:
        outputs = []
        for start in range(0, len(x), self.max_batch):
            chunk = x[start : start + self.max_batch]
            outputs.append(self._predict_chunk(chunk))
        return np.concatenate(outputs).astype(np.float32)

    def _predict_chunk(self, chunk: np.ndarray) -> np.ndarray:
        if self.framework == "torch":
            import torch

            with torch.no_grad():
                return self.module(torch.from_numpy(chunk)).numpy()
        if self.preprocess.layout == "NHWC":
            chunk = chunk.transpose(0, 2, 3, 1)
        if self.framework == "keras":
            return np.asarray(self.module(chunk, training=False))
        return np.asarray(self.module(chunk))  # a callable (the onnx source's session)

    def weight_bytes(self) -> int:
        """Bytes of the model's weights (0 where the framework does not say)."""
        if self.framework == "torch":
            return sum(p.numel() * p.element_size() for p in self.module.state_dict().values())
        if self.framework == "keras":
            return int(self.module.count_params()) * 4
        return len(getattr(self.module, "model_bytes", b""))  # an ONNX graph: its weights, mostly

    def to_manifest(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "framework": self.framework,
            "digest": self.digest,
            "load_options": self.load_options,
        }


def torch_digest(module: torch.nn.Module) -> str:
    """sha256 over the state dict's names and tensor bytes, in order."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
