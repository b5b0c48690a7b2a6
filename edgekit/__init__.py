"""edgekit: export an image classifier to TFLite, ExecuTorch and ONNX, quantize it, and measure
latency and accuracy of every artifact against the server baseline.

The public API is imported lazily (each part pulls heavy runtimes)::

    from edgekit import load_model, export_artifact, evaluate_artifact, bench_artifacts, run_matrix
"""

from __future__ import annotations

import importlib
from typing import Any

from edgekit.errors import EdgekitError, ExportRejected, UserInputError

__version__ = "0.2.0"

_API = {
    "load_model": "edgekit.models",
    "load_dataset": "edgekit.data",
    "export_artifact": "edgekit.export",
    "evaluate_artifact": "edgekit.accuracy",
    "bench_artifact": "edgekit.bench",
    "bench_artifacts": "edgekit.bench",
    "latency_regression": "edgekit.gates",
    "run_matrix": "edgekit.matrix",
    "RunConfig": "edgekit.run_config",
    "build_report": "edgekit.report",
    "get_device": "edgekit.devices",
    "get_target": "edgekit.targets",
}
__all__ = ["EdgekitError", "ExportRejected", "UserInputError", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'edgekit' has no attribute {name!r}")
