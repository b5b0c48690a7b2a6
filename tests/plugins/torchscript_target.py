"""A fourth target defined outside edgekit, as a user's plugin would be: TorchScript (a traced
``.ts`` file run by ``torch.jit.load``). One module plus one registry line (``add_target``);
``EDGEKIT_PLUGINS=torchscript_target`` makes edgekit and its child processes load it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.targets.base import (
    Accelerator,
    Coverage,
    ExportInfo,
    ExportRequest,
    Manifest,
    Session,
    Target,
    TensorSpec,
    add_target,
    register,
)

add_target("torchscript", __name__, ".ts")


@register
class TorchScriptTarget(Target):
    name = "torchscript"
    runtime = "TorchScript"
    recipes = ("fp32",)
    packages = ("torch",)
    run_modules = ("torch.jit",)
    session_module = __name__

    def export(self, request: ExportRequest) -> ExportInfo:
        import torch

        example = torch.from_numpy(request.source.example_input())
        with torch.no_grad():
            torch.jit.trace(request.source.module.eval(), example).save(str(request.output))
        batch, channels, height, width = request.source.preprocess.input_shape(1)
        classes = request.source.preprocess.num_classes
        return ExportInfo(
            TensorSpec("input", [batch, channels, height, width], "float32", "NCHW"),
            TensorSpec("logits", [1, classes], "float32", "NC"),
            {"exporter": f"torch.jit.trace (torch {torch.__version__})"},
        )

    def coverage(self, path: Path, manifest: Manifest) -> Coverage:
        return Coverage(total_ops=1, fast_ops=1, fallback_ops=[], transposes=0, summary="jit")


class TorchScriptSession(Session):
    def __init__(self, path: Path, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        self._module = torch.jit.load(str(path)).eval()
        self.info = {"runtime": f"torch.jit {torch.__version__}", "threads": threads}

    def stage(self, sample: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(sample, dtype=np.float32))

    def invoke(self, staged: Any) -> Any:
        import torch

        with torch.no_grad():
            return self._module(staged)

    def output(self, raw: Any) -> np.ndarray:
        return raw.numpy().astype(np.float32)


def open_session(
    path: Path, manifest: Manifest, accelerator: Accelerator, threads: int = 1, **options: Any
) -> Session:
    return TorchScriptSession(Path(path), threads)
