"""The manifest ``<file>.json`` beside every artifact, as a typed, read-only value.

It is written once (at export, or inferred for a file another tool made) and read by every
command: the properties below are what they read, so no caller indexes the JSON. Its own
imports are the standard library and the numpy-only session module, because the emulated ARM64
guest, which has no torch and no edgekit, receives a manifest and opens its file with it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from edgekit.targets.session import TensorSpec

SCHEMA_VERSION = 1  # the newest manifest this edgekit writes and reads


def _frozen(value: Any) -> Any:
    """Parsed JSON made read-only all the way down: objects as mapping proxies, lists as
    tuples, so a reader cannot change what the next reader sees."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: _frozen(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    return value


def thawed(value: Any) -> Any:
    """A frozen value (or any part of one) as plain JSON again: dicts and lists."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thawed(item) for item in value]
    return copy.copy(value)


@dataclass(frozen=True)
class FileEntry:
    """The artifact file as exported: its name, size and digest."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SourceEntry:
    """The source model the file was exported from (what the baseline and evaluation load)."""

    name: str
    spec: str
    digest: str
    framework: str
    load_options: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """As the manifest writes it (what ``reload_model`` reads)."""
        return {
            "name": self.name,
            "spec": self.spec,
            "framework": self.framework,
            "digest": self.digest,
            "load_options": thawed(self.load_options),
        }


@dataclass(frozen=True)
class Manifest:
    """An artifact's manifest. ``fields`` is the JSON as written, read-only; ``to_dict`` gives
    it back for writing and ``replace`` makes a changed copy."""

    fields: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _frozen(self.fields))

    def to_dict(self) -> dict[str, Any]:
        return thawed(self.fields)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as its JSON (a mapping proxy does not pickle): a cluster task ships it
        return (Manifest, (self.to_dict(),))

    def replace(self, **changes: Any) -> Manifest:
        return Manifest({**self.fields, **changes})

    def get(self, name: str, default: Any = None) -> Any:
        """A field no property names (a newer edgekit's, a plugin's), frozen."""
        return self.fields.get(name, default)

    @property
    def schema_version(self) -> int:
        return int(self.fields["schema_version"])

    @property
    def target(self) -> str:
        return str(self.fields["target"])

    @property
    def recipe(self) -> str:
        return str(self.fields.get("recipe", ""))

    @property
    def file(self) -> FileEntry:
        entry = self.fields["file"]
        return FileEntry(str(entry.get("name", "")), int(entry["size"]), str(entry["sha256"]))

    @property
    def input(self) -> TensorSpec:
        return TensorSpec.from_dict(thawed(self.fields["input"]))

    @property
    def output(self) -> TensorSpec:
        return TensorSpec.from_dict(thawed(self.fields["output"]))

    @property
    def inputs(self) -> list[dict[str, Any]]:
        """Every input of a multi-input file (a foreign one), else the one ``input``."""
        return thawed(self.fields.get("inputs") or (self.fields["input"],))

    @property
    def preprocessing(self) -> dict[str, Any] | None:
        """The preprocessing config (``Preprocess.from_dict``); None for a file that is not an
        image classifier."""
        config = self.fields.get("preprocessing")
        return None if config is None else thawed(config)

    @property
    def class_names(self) -> list[str]:
        names = self.fields.get("class_names")
        if names is None:
            names = (self.fields.get("preprocessing") or {}).get("class_names", ())
        return list(names)

    @property
    def source(self) -> SourceEntry | None:
        entry = self.fields.get("source")
        if entry is None:
            return None
        return SourceEntry(
            name=str(entry.get("name", "")),
            spec=str(entry.get("spec", "")),
            digest=str(entry.get("digest", "")),
            framework=str(entry.get("framework", "torch")),
            load_options=thawed(entry.get("load_options") or {}),
        )

    @property
    def foreign(self) -> dict[str, Any] | None:
        """What edgekit inferred about a file another tool made; None for its own."""
        return self._section("foreign")

    @property
    def is_foreign(self) -> bool:
        return self.fields.get("foreign") is not None

    @property
    def classifier(self) -> bool:
        return not self.is_foreign or bool(self.fields["foreign"].get("classifier"))

    @property
    def not_a_classifier(self) -> str | None:
        """Why a foreign file is not taken for an image classifier."""
        return (self.fields.get("foreign") or {}).get("not_a_classifier")

    @property
    def assumed(self) -> list[str]:
        """What edgekit inferred about a foreign file, one line each (nothing for its own)."""
        return list((self.fields.get("foreign") or {}).get("inferred", ()))

    @property
    def keep_float(self) -> list[str]:
        return list(self.fields.get("keep_float", ()))

    @property
    def warnings(self) -> list[str]:
        return list(self.fields.get("warnings", ()))

    @property
    def details(self) -> dict[str, Any]:
        return thawed(self.fields.get("details") or {})

    def _section(self, name: str) -> dict[str, Any] | None:
        section = self.fields.get(name)
        return None if section is None else thawed(section)

    @property
    def validation(self) -> dict[str, Any] | None:
        return self._section("validation")

    @property
    def coverage(self) -> dict[str, Any] | None:
        return self._section("coverage")

    @property
    def audit(self) -> dict[str, Any] | None:
        return self._section("audit")

    @property
    def accuracy_aware(self) -> dict[str, Any] | None:
        return self._section("accuracy_aware")

    @property
    def tool_versions(self) -> dict[str, str]:
        return thawed(self.fields.get("tool_versions") or {})

    @property
    def created(self) -> str | None:
        return self.fields.get("created")

    @property
    def reused(self) -> dict[str, Any] | None:
        """Where a copy out of the export cache came from (None: exported afresh)."""
        return self._section("reused")
