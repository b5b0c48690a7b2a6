"""edgekit: export an image classifier to TFLite, ExecuTorch and ONNX, quantize it, and measure
latency and accuracy of every artifact against the baseline: the source model in its own
framework, on the host's CPU (or a CUDA GPU through the server-cuda device).

The public API is imported lazily (each part pulls heavy runtimes)::

    from edgekit import load_model, export_artifact, evaluate_artifact, bench_artifacts, run_matrix
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any

from edgekit.errors import EdgekitError, ExportRejected, MovedPathWarning, UserInputError

__version__ = "0.2.0"

_API = {
    "load_model": "edgekit.sources.load",
    "load_dataset": "edgekit.sources.data",
    "export_artifact": "edgekit.export.pipeline",
    "evaluate_artifact": "edgekit.measure.accuracy",
    "bench_artifact": "edgekit.measure.bench",
    "bench_artifacts": "edgekit.measure.bench",
    "latency_regression": "edgekit.measure.gates",
    "tune_artifacts": "edgekit.tune.api",
    "measure_memory": "edgekit.measure.memory",
    "run_matrix": "edgekit.run.matrix",
    "RunConfig": "edgekit.run.config",
    "build_report": "edgekit.report",
    "get_device": "edgekit.devices",
    "get_target": "edgekit.targets",
    "make_bundle": "edgekit.golden.make",
    "check_bundle": "edgekit.golden.check",
    "verify_outputs": "edgekit.golden.verify",
}
__all__ = ["EdgekitError", "ExportRejected", "UserInputError", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'edgekit' has no attribute {name!r}")


# Module paths from before the tree became one folder per stage (0.3): they import the module's
# new home, under one warning, for one release.
MOVED_MODULES = {
    "edgekit.cache": "edgekit.common.cache",
    "edgekit.fileio": "edgekit.common.fileio",
    "edgekit.machine": "edgekit.common.machine",
    "edgekit.metrics": "edgekit.common.metrics",
    "edgekit.native": "edgekit.common.quiet",
    "edgekit.pipcheck": "edgekit.common.pipcheck",
    "edgekit.plugins": "edgekit.common.plugins",
    "edgekit.schema": "edgekit.common.schema",
    "edgekit.stats": "edgekit.common.stats",
    "edgekit.versions": "edgekit.common.versions",
    "edgekit.architectures": "edgekit.sources.architectures",
    "edgekit.data": "edgekit.sources.data",
    "edgekit.huggingface": "edgekit.sources.huggingface",
    "edgekit.models": "edgekit.sources.load",
    "edgekit.preprocess": "edgekit.sources.preprocess",
    "edgekit.source": "edgekit.sources.source",
    "edgekit.training": "edgekit.sources.training",
    "edgekit.zoo": "edgekit.sources.zoo",
    "edgekit.weights": "edgekit.sources.weights",
    "edgekit.artifact": "edgekit.artifacts.artifact",
    "edgekit.audit": "edgekit.artifacts.audit",
    "edgekit.foreign": "edgekit.artifacts.foreign",
    "edgekit.accuracy_aware": "edgekit.export.accuracy_aware",
    "edgekit.export_cache": "edgekit.export.cache",
    "edgekit.child": "edgekit.worker.parent",
    "edgekit.loop": "edgekit.worker.loop",
    "edgekit.latency": "edgekit.worker.latency",
    "edgekit.interference": "edgekit.worker.interference",
    "edgekit.accuracy": "edgekit.measure.accuracy",
    "edgekit.bench": "edgekit.measure.bench",
    "edgekit.interleave": "edgekit.measure.interleave",
    "edgekit.peak": "edgekit.measure.peak",
    "edgekit.peak_cache": "edgekit.measure.peak_cache",
    "edgekit.peak_kernels": "edgekit.targets.peak_kernels",
    "edgekit.gates": "edgekit.measure.gates",
    "edgekit.profile": "edgekit.analysis.profile",
    "edgekit.explain": "edgekit.analysis.explain",
    "edgekit.crosscheck": "edgekit.analysis.crosscheck",
    "edgekit.doctor": "edgekit.analysis.doctor",
    "edgekit.matrix": "edgekit.run.matrix",
    "edgekit.cells": "edgekit.run.cells",
    "edgekit.resume": "edgekit.run.resume",
    "edgekit.run_config": "edgekit.run.config",
    "edgekit.run_profile": "edgekit.run.profile",
    "edgekit.layermap": "edgekit.targets.layermap",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import edgekit.models`` gives ``edgekit.sources.load`` itself (one module object,
    so a patch through either name patches both) and warns once per old name."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        new = MOVED_MODULES[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes in the next release",
            MovedPathWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self._spec  # importlib stamped the old name's spec on the module


# first: it answers only the old names, and a stale file of one (an editable install of an older
# checkout, an upgrade over a copied tree) must not shadow the module's new home
if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
