"""Artifacts: an exported model file plus its manifest ``<file>.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.common.fileio import sha256_file
from edgekit.common.schema import check_fields, record_spec
from edgekit.errors import UserInputError
from edgekit.results import artifact_label
from edgekit.targets.manifest import SCHEMA_VERSION, FileEntry, Manifest, SourceEntry
from edgekit.targets.session import TensorSpec

if TYPE_CHECKING:
    from edgekit.artifacts.foreign import ForeignOptions


def manifest_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + ".json")


@dataclass(frozen=True)
class Artifact:
    """An exported model file and its manifest."""

    path: Path
    manifest: Manifest

    def __post_init__(self) -> None:
        if not isinstance(self.manifest, Manifest):  # parsed JSON, checked by whoever read it
            object.__setattr__(self, "manifest", Manifest(self.manifest))

    @property
    def foreign(self) -> bool:
        """Made by another tool: its manifest was inferred from the file, and it has no source
        model (so no baseline unless one is given)."""
        return self.manifest.is_foreign

    @property
    def classifier(self) -> bool:
        return self.manifest.classifier

    @property
    def target(self) -> str:
        return self.manifest.target

    @property
    def recipe(self) -> str:
        return self.manifest.recipe

    @property
    def io_dtype(self) -> str:
        return self.manifest.input.dtype

    @property
    def label(self) -> str:
        if self.foreign:  # the user's own file name says more than a guessed recipe
            return f"{self.path.name} ({self.target}, {self.recipe})"
        return artifact_label(self.target, self.recipe, self.io_dtype)

    @property
    def assumed(self) -> list[str]:
        """What edgekit inferred about a foreign file, one line each (nothing for its own)."""
        return self.manifest.assumed

    @property
    def model_name(self) -> str | None:
        source = self.manifest.source
        return None if source is None else source.name

    @property
    def size_bytes(self) -> int:
        return self.manifest.file.size


# the manifest's records are checked against their dataclasses' fields and types
TENSOR = record_spec(TensorSpec)
MANIFEST = {
    "schema_version": int,
    "target": str,
    "recipe": str,
    "file": record_spec(FileEntry),
    "input": TENSOR,
    "output": TENSOR,
    "preprocessing": dict[str, Any] | None,
    "inputs": list[dict[str, Any]],
    "outputs": list[dict[str, Any]],
    "foreign": dict[str, Any] | None,
    "class_names": list[str],
    "source": {
        **record_spec(SourceEntry),
        "load_options": {"weights": str, "input_shape": list[int]},
    },
    "keep_float": list[str],
    "coverage": dict[str, Any] | None,
    "audit": dict[str, Any] | None,
    "validation": dict[str, Any] | None,
    "details": dict[str, Any],
    "warnings": list[str],
}
# preprocessing may be null (a foreign file that is not an image classifier) but is always
# there: the worker and the evaluation read it by key
REQUIRED = ("schema_version", "target", "recipe", "file", "input", "output", "preprocessing")


def validate_manifest(manifest: Any, where: str) -> None:
    """Every field a command reads, of its type (one line naming the field otherwise)."""
    from edgekit.artifacts.runtime_options import check_runtime_options
    from edgekit.sources.preprocess import preprocess_from_config

    check_fields(manifest, MANIFEST, where, REQUIRED)
    check_fields(manifest["file"], MANIFEST["file"], f"{where}: file", ("size", "sha256"))
    for side in ("input", "output"):
        check_fields(manifest[side], TENSOR, f"{where}: {side}", ("shape", "dtype"))
        shape = manifest[side]["shape"]
        if not shape or any(dim == 0 or dim < -1 for dim in shape):
            raise UserInputError(
                f"{where}: {side}.shape {shape} is not a tensor's shape (dimensions >= 1, or -1 "
                "where the file leaves one dynamic)"
            )
    if manifest["schema_version"] > SCHEMA_VERSION or manifest["schema_version"] < 1:
        raise UserInputError(
            f"{where}: manifest schema {manifest['schema_version']} is not one this edgekit "
            f"reads (1 to {SCHEMA_VERSION}); upgrade edgekit or re-export"
        )
    if manifest.get("preprocessing") is not None:
        preprocess_from_config(manifest["preprocessing"], f"{where}: preprocessing")
    for side in ("input", "output"):
        quant = manifest[side].get("quantization")
        if quant is not None and not {"scale", "zero_point"} <= set(quant):
            raise UserInputError(f"{where}: {side}.quantization needs scale and zero_point")
    check_runtime_options(manifest, where)


def read_manifest(payload: Any, where: str) -> Manifest:
    """Parsed JSON checked field by field (one line naming ``where`` and the field)."""
    validate_manifest(payload, where)
    return Manifest(payload)


def as_artifact(item: str | Path | Artifact) -> Artifact:
    """``item`` as an Artifact: one already loaded as it is, a path loaded with its manifest
    (a file another tool made is described by the flags at the CLI's edge, ``load_artifact``)."""
    return item if isinstance(item, Artifact) else load_artifact(item)


def load_artifact(
    path: str | Path,
    *,
    verify_digest: bool = True,
    foreign: ForeignOptions | None = None,
    manifest: Manifest | dict | None = None,
) -> Artifact:
    """Open an artifact's manifest; without one (a file another tool made) describe the file
    itself, with ``foreign`` (``edgekit.artifacts.foreign.ForeignOptions``) for what it cannot
    say. ``manifest`` is one already read (a child process is handed its parent's). A digest
    mismatch is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: artifact not found")
    if manifest is not None:
        return Artifact(path, manifest)
    mpath = manifest_path(path)
    if not mpath.is_file():
        from edgekit.artifacts.foreign import describe_foreign

        return Artifact(path, describe_foreign(path, foreign))
    try:
        payload = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{mpath}: manifest is not valid JSON ({exc})") from None
    read = read_manifest(payload, str(mpath))
    from edgekit.targets import target_names

    if read.target not in target_names():
        raise UserInputError(
            f"{mpath}: target '{read.target}' is not one of {', '.join(target_names())}"
        )
    if read.file.size != path.stat().st_size:
        raise UserInputError(
            f"{path}: file does not match its manifest ({path.stat().st_size} bytes, the "
            f"manifest says {read.file.size}); it was modified after export"
        )
    if verify_digest:
        actual = sha256_file(path)
        if actual != read.file.sha256:
            raise UserInputError(
                f"{path}: file does not match its manifest (sha256 {actual[:12]}..., "
                f"manifest says {read.file.sha256[:12]}...); it was modified after export"
            )
    return Artifact(path, read)
