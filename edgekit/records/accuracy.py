"""What an artifact's answers did against the source model's: top-1 and its drop with an
interval (``AccuracyRecord``), per class (``ClassChange``), image by image (``Flips``, the
``FlippedImage`` gallery, ``SharedFlips`` across artifacts) and whether it collapsed to one class
or one output (``Collapse``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from edgekit.common.schema import record_from
from edgekit.records.keyed import ReadByKey


@dataclass
class AccuracyRecord(ReadByKey):
    """One artifact on one device against the baseline, on the evaluation split."""

    artifact: str
    label: str
    device: str
    dataset: str
    samples: int
    top1: float
    # against the baseline; None for a file without a source model (labels only)
    baseline_top1: float | None
    drop_points: float | None
    drop_ci: tuple[float, float] | None
    confidence: float
    agreement: float | None
    sqnr_db: float | None
    max_abs_diff: float | None
    mean_abs_diff: float | None
    mcnemar: dict[str, float] | None
    top5: float | None = None
    baseline_top5: float | None = None
    changed_classes: list[dict[str, Any]] = field(default_factory=list)
    baseline: str = "source model, fp32, host CPU"
    reference: str = "baseline"
    runtime: dict[str, Any] = field(default_factory=dict)
    versus_host: dict[str, Any] | None = None  # device logits against the host's
    fingerprint: dict[str, Any] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)  # what was inferred about a foreign file
    # what changed image by image (edgekit.measure.flips); None without a source model
    per_class: list[dict[str, Any]] = field(default_factory=list)
    per_class_correction: str = ""
    confusion_change: list[list[int]] | None = None
    flips: dict[str, Any] | None = None
    collapse: dict[str, Any] | None = None  # needs no labels: set for every artifact
    # the flipped images with each side's top-3 (edgekit.measure.gallery), for the report
    gallery: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["drop_ci"] = None if self.drop_ci is None else list(self.drop_ci)
        return payload

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> AccuracyRecord:
        """The record its JSON holds (``common.schema.record_from``: the one way from JSON)."""
        return record_from(cls, payload)


@dataclass(frozen=True)
class ClassChange:
    """One true class: its top-1 on the source model and the artifact, the drop in points with
    its paired bootstrap interval, McNemar's exact p and that p adjusted across classes."""

    name: str
    images: int
    baseline_top1: float
    top1: float
    drop_points: float
    drop_ci: tuple[float, float]
    p_value: float
    p_adjusted: float

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drop_ci": list(self.drop_ci)}


# a collapsed artifact gives one class to at least this share of the inputs, where the source
# model gives that class less than SOURCE_SHARE_LIMIT of them (without a source, 3+ classes)
COLLAPSE_SHARE = 0.8
SOURCE_SHARE_LIMIT = 0.5
# outputs whose spread across inputs is below this fraction of their magnitude are constant
CONSTANT_SPREAD = 1e-4


@dataclass(frozen=True)
class Collapse:
    """The artifact's predictions and outputs as the collapse detector reads them: the class it
    predicts most and for what share of the inputs, how often the source model predicts that
    class (None without a source), and how much the outputs move from input to input. Needs no
    labels. ``judged(share)`` decides at a threshold; ``collapsed`` and ``reason`` are the
    decision at the default one."""

    dominant_class: str
    dominant_share: float
    source_share: float | None
    classes: int
    output_spread: float  # mean over outputs of their standard deviation across inputs
    output_scale: float  # mean magnitude of the outputs

    def judged(self, share: float = COLLAPSE_SHARE) -> str:
        """Why the artifact collapsed at ``share``, or "" when it did not."""
        scale, spread = self.output_scale, self.output_spread
        if spread == 0.0 or spread <= CONSTANT_SPREAD * scale:
            return (
                f"nearly constant outputs: their spread across inputs is {spread:.3g}, "
                f"{spread / scale if scale else 0.0:.2g} of their mean magnitude"
            )
        # the source giving that class as often explains it; without a source, two classes can
        source = self.source_share
        unexplained = self.classes >= 3 if source is None else source < SOURCE_SHARE_LIMIT
        if self.dominant_share < share or not unexplained:
            return ""
        than = "" if source is None else f" (the source model: {source:.0%})"
        return f"predicts {self.dominant_class!r} for {self.dominant_share:.0%} of the inputs{than}"

    @property
    def collapsed(self) -> bool:
        return bool(self.judged())

    @property
    def reason(self) -> str:
        return self.judged()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "collapsed": self.collapsed, "reason": self.reason}

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Collapse:
        return cls(**{name: payload[name] for name in cls.__dataclass_fields__})


@dataclass
class Flips:
    """Top-1 changes against the source model, counted both ways, with McNemar's exact p, the
    changed images (their indices in the evaluation split) and the flip rate by top-2 margin."""

    samples: int
    changed: int
    right_to_wrong: int
    wrong_to_right: int
    wrong_to_other_wrong: int
    mcnemar_p: float
    indices: list[int] = field(default_factory=list)
    by_margin: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FlippedImage:
    """One flipped image for the report's gallery: each side's top 3 and a small PNG."""

    index: int
    label: str
    way: str  # right to wrong, wrong to right, wrong to another wrong
    source_top3: list[list[Any]]
    artifact_top3: list[list[Any]]
    png: str  # base64


@dataclass
class FlipPair:
    """Two artifacts (or devices): the images both flipped and the Jaccard overlap."""

    a: str
    b: str
    both: int
    jaccard: float


@dataclass
class SharedFlips:
    """Do the same images flip? Every pair, and the images every artifact flipped."""

    pairs: list[FlipPair]
    flipped_by_all: list[int]
