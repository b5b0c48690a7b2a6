"""What a tflite converter hands back, and the package versions it records."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


@dataclass
class Converted:
    file: Path  # in the scratch directory; the target moves it to request.output
    layout: str  # of the file's input tensor
    details: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


@contextlib.contextmanager
def no_progress_bars() -> Iterator[None]:
    """ai-edge-quantizer's calibration draws a tqdm bar on stderr for models over 100 ops."""
    from ai_edge_quantizer.utils import progress_utils

    original = progress_utils.tqdm.tqdm

    def silent(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "disable": True})

    progress_utils.tqdm.tqdm = silent
    try:
        yield
    finally:
        progress_utils.tqdm.tqdm = original
