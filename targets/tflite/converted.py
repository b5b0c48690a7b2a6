"""What a tflite converter hands back, and the package versions it records."""

from __future__ import annotations

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
