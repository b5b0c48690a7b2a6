"""The files a runtime's own tools check a bundle with, written by the artifact's target (its
``golden_files`` role: a new runtime brings its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.artifacts.artifact import Artifact
from edgekit.targets import get_target


def write_format_files(root: Path, spec: dict[str, Any], artifact: Artifact) -> dict[str, str]:
    """{what it is: its path in the bundle} of every file the target wrote into ``root``."""
    return get_target(artifact.target).golden_files(
        root, spec, root / "artifact" / artifact.path.name
    )
