"""The records a measurement produces and a results file keeps, one dataclass each: what runs
on the fast path (``Coverage``), an artifact's accuracy against the baseline (``AccuracyRecord``,
with its ``ClassChange`` per class, its ``Flips``, ``Collapse`` and ``FlippedImage`` gallery), its
memory (``MemoryRecord``), the accuracy-aware loop (``AwareLoop`` of ``Step``), a per-layer
profile (``ArtifactProfile`` of ``LayerTime``), and a run's ``SharedFlips`` and ``GoldenLink``.

They sit below every stage that makes them, beside ``edgekit.results``, so that results.json is
checked against these very fields and types (``edgekit.common.schema.record_spec``): a field added
here is checked on reading with no table to keep in step. Each stage still exports its record
under the name it always had (``edgekit.measure.accuracy.AccuracyRecord``). A record whose value
travels as JSON (flips, the gallery, the loop) is written with ``asdict`` of its dataclass, so
its fields have this one home. ``accuracy`` holds what an artifact's answers did against the
source model's; ``measured`` the rest."""

from edgekit.records.accuracy import (
    COLLAPSE_SHARE,
    CONSTANT_SPREAD,
    SOURCE_SHARE_LIMIT,
    AccuracyRecord,
    ClassChange,
    Collapse,
    FlipPair,
    FlippedImage,
    Flips,
    SharedFlips,
)
from edgekit.records.measured import (
    SCALING,
    ArtifactProfile,
    AwareEvaluation,
    AwareLoop,
    Coverage,
    GoldenLink,
    LayerTime,
    MemoryRecord,
    Step,
    Timing,
)

__all__ = [
    "COLLAPSE_SHARE",
    "CONSTANT_SPREAD",
    "SCALING",
    "SOURCE_SHARE_LIMIT",
    "AccuracyRecord",
    "ArtifactProfile",
    "AwareEvaluation",
    "AwareLoop",
    "ClassChange",
    "Collapse",
    "Coverage",
    "FlipPair",
    "FlippedImage",
    "Flips",
    "GoldenLink",
    "LayerTime",
    "MemoryRecord",
    "SharedFlips",
    "Step",
    "Timing",
]
