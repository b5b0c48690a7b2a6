"""Which source a target converts: the user's model itself, or, for an .onnx source and a
torch target, the torch model converted from it once. Shared by the export in process and the
bounded conversion's child (edgekit.export.bounded), which loads the source again."""

from __future__ import annotations

from pathlib import Path

from edgekit.sources.source import SourceModel
from edgekit.targets import get_target
from edgekit.targets.base import Target


def exportable(source: SourceModel, target: str) -> SourceModel:
    """The source ``target`` converts: an .onnx source for a torch target is converted once
    (one line naming a missing op); any other source is itself."""
    origin = _origin(source)
    if source.framework not in get_target(target).frameworks and origin is not None:
        return origin.convert_source(source, target)
    return source


def _origin(source: SourceModel) -> Target | None:
    """The target that loaded a model-file source (an .onnx), else None."""
    from edgekit.targets import target_for_suffix

    name = target_for_suffix(Path(source.spec).suffix)
    return get_target(name) if name is not None and get_target(name).loads_source else None
