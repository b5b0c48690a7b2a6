"""The source model's logits, computed once per process for the same weights and inputs.

Every artifact is checked against the source's logits on the same images: ``edgekit export
--recipe all`` validates each recipe on one split, a run evaluates each artifact (on each
device) on another, and a script or a test file that gates file after file asks again. The
key is what decides the logits: the weights as they are at the call (a fresh digest, so
weights changed in place run again), the inputs' bytes, the batch the source runs them in and
torch's thread count (the order of its sums). A torch module in training mode, or with a
forward hook anywhere, runs every time: the forward pass itself is then what the caller wants.
Least recently used first out, within ``max_bytes``.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch

MAX_BYTES = 256 << 20  # ImageNet's 50,000 validation logits of 1000 classes take 200 MB


class Keyed(Protocol):
    """What the key reads of a ``SourceModel`` (``edgekit.sources.source`` imports this leaf, so
    it is named by its shape here)."""

    framework: str
    module: Any
    digest: str
    max_batch: int


class SourceLogits:
    """``memo(source, x, compute)``: ``compute(x)`` once per key, a copy of it every time."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def __call__(
        self, source: Keyed, x: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """``source`` is a ``SourceModel`` (whose ``predict`` calls this: a leaf below it)."""
        weights = weights_key(source)
        if weights is None:
            return compute(x)
        key = (weights, source.max_batch, x.shape, x.dtype.str, _bytes_digest(x))
        logits = self._entries.get(key)
        if logits is not None:
            self._entries.move_to_end(key)
            return logits.copy()
        logits = compute(x)
        self._entries[key] = logits.copy()  # the caller's copy is the caller's to change
        while sum(a.nbytes for a in self._entries.values()) > self.max_bytes:
            self._entries.popitem(last=False)
        return logits

    def __len__(self) -> int:
        return len(self._entries)


def weights_key(source: Keyed) -> tuple | None:
    """What the logits depend on besides the inputs, as the weights are now; ``None`` where the
    forward pass must run every time (or the weights cannot be read)."""
    if source.framework == "torch":
        return _torch_key(source.module)
    if source.framework == "keras":
        digest = hashlib.blake2b()
        for array in source.module.get_weights():
            digest.update(str((array.shape, array.dtype.str)).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return ("keras", digest.hexdigest())
    return (source.framework, source.digest)  # an ONNX session: its weights cannot change


def _torch_key(module: object) -> tuple | None:
    import torch

    if not isinstance(module, torch.nn.Module) or module.training or _hooked(module):
        return None
    state = module.state_dict()
    # buffers a state dict leaves out (non-persistent ones) decide the logits too
    unsaved = {name: b for name, b in module.named_buffers() if name not in state}
    digest = hashlib.blake2b()
    for name, tensor in itertools.chain(state.items(), unsaved.items()):
        if not isinstance(tensor, torch.Tensor):  # packed weights (torch.ao's quantized modules)
            return None
        try:
            flat = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        except (RuntimeError, NotImplementedError):  # no bytes to read: meta, quantized
            return None
        digest.update(f"{name} {tuple(tensor.shape)} {tensor.dtype}".encode())
        digest.update(flat.numpy().tobytes())
    return ("torch", digest.hexdigest(), torch.get_num_threads())


def _hooked(module: torch.nn.Module) -> bool:
    # torch has no public query for registered hooks: its own module keeps them in these dicts
    from torch.nn.modules import module as torch_module

    if torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())


def _bytes_digest(x: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(x).tobytes()).hexdigest()


# one per process: every caller of SourceModel.predict shares it
SOURCE_LOGITS = SourceLogits()
