"""Artifacts: an exported model file plus its manifest ``<file>.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError
from edgekit.fileio import sha256_file
from edgekit.results import artifact_label

SCHEMA_VERSION = 1


def manifest_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + ".json")


@dataclass
class Artifact:
    path: Path
    manifest: dict[str, Any]

    @property
    def target(self) -> str:
        return self.manifest["target"]

    @property
    def recipe(self) -> str:
        return self.manifest["recipe"]

    @property
    def io_dtype(self) -> str:
        return str(self.manifest["input"]["dtype"])

    @property
    def label(self) -> str:
        return artifact_label(self.target, self.recipe, self.io_dtype)

    @property
    def model_name(self) -> str | None:
        return (self.manifest.get("source") or {}).get("name")

    @property
    def size_bytes(self) -> int:
        return int(self.manifest["file"]["size"])


def load_artifact(path: str | Path, verify_digest: bool = True) -> Artifact:
    """Open an artifact's manifest; a missing manifest or a digest mismatch is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: artifact not found")
    mpath = manifest_path(path)
    if not mpath.is_file():
        raise UserInputError(f"{path}: no manifest {mpath.name} beside it (export it with edgekit)")
    try:
        manifest = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{mpath}: manifest is not valid JSON ({exc})") from None
    missing = [
        k
        for k in ("schema_version", "target", "recipe", "file", "input", "output")
        if k not in manifest
    ]
    if missing:
        raise UserInputError(f"{mpath}: manifest lacks {', '.join(missing)}")
    if manifest["schema_version"] > SCHEMA_VERSION:
        raise UserInputError(
            f"{mpath}: manifest schema {manifest['schema_version']} is newer than this edgekit's "
            f"({SCHEMA_VERSION}); upgrade edgekit"
        )
    if verify_digest:
        actual = sha256_file(path)
        if actual != manifest["file"]["sha256"]:
            raise UserInputError(
                f"{path}: file does not match its manifest (sha256 {actual[:12]}..., "
                f"manifest says {manifest['file']['sha256'][:12]}...); it was modified after export"
            )
    return Artifact(path, manifest)
