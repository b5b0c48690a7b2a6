"""The cross-check column of ``edgekit quantize-debug --target T``: the per-layer int8 error that
the target's own quantizer tooling measures (``Target.layer_errors``), next to edgekit's
simulation, keyed by the same torch module paths."""

from __future__ import annotations

import copy

import numpy as np

from edgekit.fileio import temporary_directory
from edgekit.quantize.sensitivity import DebugReport
from edgekit.source import SourceModel
from edgekit.targets import get_target


def crosscheck_report(
    report: DebugReport, source: SourceModel, calibration: np.ndarray, target: str
) -> DebugReport:
    """A copy of ``report`` with the ``artifact_db`` column from ``target``'s own quantizer."""
    plugin = get_target(target)
    report = copy.deepcopy(report)
    x = np.ascontiguousarray(calibration[: report.samples], dtype=np.float32)
    names = [layer.name for layer in sorted(report.layers, key=lambda layer: layer.index)]
    with temporary_directory("edgekit-qdebug-") as tmp:
        tool, per_layer = plugin.layer_errors(source, x, names, tmp)
    report.target = target
    report.crosscheck = tool
    for row in report.layers:
        row.artifact_db = per_layer.get(row.name)
    missing = [row.name for row in report.layers if row.artifact_db is None]
    if missing:
        report.notes.append(f"{tool}: no tensor mapped back to {', '.join(missing)}")
    return report
