"""The cross-check column of ``edgekit quantize-debug --target T``: the per-layer int8 error that
the target's own quantizer tooling measures (``Target.layer_errors``), next to edgekit's
simulation, keyed by the same torch module paths (``edgekit.targets.layermap``)."""

from __future__ import annotations

import copy

import numpy as np

from edgekit.common.fileio import temporary_directory
from edgekit.quantize.sensitivity import DebugReport
from edgekit.sources.source import SourceModel
from edgekit.targets import get_target


def crosscheck_report(
    report: DebugReport, source: SourceModel, calibration: np.ndarray, target: str
) -> DebugReport:
    """A copy of ``report`` with the ``artifact_db`` column from ``target``'s own quantizer, and
    one note per reason some layers have no figure."""
    plugin = get_target(target)
    report = copy.deepcopy(report)
    x = np.ascontiguousarray(calibration[: report.samples], dtype=np.float32)
    names = [layer.name for layer in sorted(report.layers, key=lambda layer: layer.index)]
    with temporary_directory("edgekit-qdebug-") as tmp:
        errors = plugin.layer_errors(source, x, names, tmp)
    report.target = target
    report.crosscheck = errors.tool
    for row in report.layers:
        row.artifact_db = errors.db.get(row.name)
    by_reason: dict[str, list[str]] = {}
    for name in names:
        if name not in errors.db:
            reason = errors.missing.get(name, "no figure (the tool gave no reason)")
            by_reason.setdefault(reason, []).append(name)
    for reason, layers in by_reason.items():
        report.notes.append(f"{target}: no figure for {', '.join(layers)}: {reason}")
    return report
