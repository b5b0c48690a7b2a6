"""Where edgekit keeps what it can rebuild: trained weights, the emulated devices."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$EDGEKIT_CACHE`` or ``~/.cache/edgekit``."""
    root = os.environ.get("EDGEKIT_CACHE")
    path = Path(root) if root else Path.home() / ".cache" / "edgekit"
    path.mkdir(parents=True, exist_ok=True)
    return path
