"""Source model to artifact: the export pipeline (``pipeline``: convert, quantize, validate,
write atomically), the accuracy-aware int8 loop (``accuracy_aware``, ``--max-drop``) and the
export cache of ``edgekit run`` (``cache``). Imports sources, targets, quantize and artifacts;
``accuracy_aware`` measures through ``edgekit.measure``.

``from edgekit.export import export_artifact`` (this package's name was a module's) keeps
working for one release, with a ``MovedPathWarning``: import from
``edgekit.export.pipeline``."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from edgekit.errors import MovedPathWarning

_MOVED = ("export_artifact", "artifact_name", "ExportResult", "VALIDATION_SAMPLES")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"edgekit.export.{name} moved to edgekit.export.pipeline.{name}; the old path goes "
            "in the next release",
            MovedPathWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("edgekit.export.pipeline"), name)
    raise AttributeError(f"module 'edgekit.export' has no attribute {name!r}")
