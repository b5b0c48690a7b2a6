"""Exporting through one target directly, as the export pipeline calls it, for target tests."""

from __future__ import annotations

from pathlib import Path

from edgekit.targets.base import ExportRequest, Manifest


def export_raw(target, source, recipe: str, directory: Path, calibration=None, **options):
    """Export to a name without the target's suffix (the pipeline renames later) and build the
    manifest fields sessions read: -> (path, manifest, ExportInfo)."""
    io = options.get("io_dtype", "float32")
    path = directory / f"{source.name}-{recipe}-{io}.partial"
    info = target.export(ExportRequest(source, recipe, path, calibration=calibration, **options))
    manifest = Manifest(
        {
            "input": info.input.to_dict(),
            "output": info.output.to_dict(),
            "recipe": recipe,
            "details": info.details,
        }
    )
    return path, manifest, info
