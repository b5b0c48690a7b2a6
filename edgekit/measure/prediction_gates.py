"""Gates on what quantization changed image by image: the worst class's drop (on the upper end
of its interval by default, like ``--max-drop``), the number of flipped predictions, and a
collapse (one class for most inputs, or constant outputs)."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.common.budget import DropBudget
from edgekit.errors import UserInputError
from edgekit.measure.accuracy import AccuracyRecord
from edgekit.measure.gates import GateResult, accuracy_records
from edgekit.records import COLLAPSE_SHARE, Collapse
from edgekit.results import Results


@dataclass(frozen=True)
class FlipBound:
    """``--max-flips``: a count of images (``5``) or a share of the split (``2%``)."""

    value: float
    percent: bool

    @classmethod
    def parse(cls, text: str) -> FlipBound:
        word = text.strip()
        number = word[:-1] if word.endswith("%") else word
        try:
            value = float(number)
        except ValueError:
            value = -1.0
        if value < 0 or (not word.endswith("%") and not value.is_integer()):
            raise UserInputError(
                f"--max-flips {text}: expected a count of images (5) or a percentage (2%)"
            )
        return cls(value, word.endswith("%"))

    def limit(self, samples: int) -> float:
        """The most images that may flip on a split of ``samples`` images."""
        return self.value * samples / 100.0 if self.percent else self.value

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{self.value:g}"


@dataclass(frozen=True)
class PredictionBounds:
    """The bounds of ``check --max-class-drop --max-flips --fail-on-collapse``."""

    max_class_drop: float | None = None
    max_flips: FlipBound | None = None
    fail_on_collapse: bool = False
    point_estimate: bool = False
    collapse_share: float = COLLAPSE_SHARE

    def __post_init__(self) -> None:
        if self.max_class_drop is not None and not 0 <= self.max_class_drop <= 100:
            raise UserInputError(
                f"--max-class-drop {self.max_class_drop:g}: expected points of top-1, 0 to 100"
            )
        if not 0 < self.collapse_share <= 1:
            raise UserInputError(
                f"--collapse-share {self.collapse_share:g}: expected a share of the inputs, "
                "above 0 and at most 1"
            )

    @property
    def any(self) -> bool:
        given = (self.max_class_drop, self.max_flips)
        return any(bound is not None for bound in given) or self.fail_on_collapse


def prediction_gates(record: AccuracyRecord, bounds: PredictionBounds) -> list[GateResult]:
    """One gate per bound given; a class-drop or flip bound on a file without a source model is
    one line (there is nothing to compare against), a collapse gate is not (it needs none)."""
    name, device = record.label, record.device
    results = []
    if (bounds.max_class_drop is not None or bounds.max_flips is not None) and not record.flips:
        raise UserInputError(
            f"{record.artifact}: no source model to count flips or class drops against (a file "
            "another tool made); --fail-on-collapse needs none"
        )
    if bounds.max_class_drop is not None:
        budget = DropBudget.of(bounds.max_class_drop, point_estimate=bounds.point_estimate)
        results.append(_class_drop_gate(record, budget))
    if bounds.max_flips is not None:
        flips = record.flips
        limit = bounds.max_flips.limit(flips["samples"])
        detail = (
            f"{flips['changed']} of {flips['samples']} top-1 predictions changed against the "
            f"source model: {flips['right_to_wrong']} right -> wrong, {flips['wrong_to_right']} "
            f"wrong -> right, {flips['wrong_to_other_wrong']} wrong -> another wrong; McNemar "
            f"p={flips['mcnemar_p']:.3g}"
        )
        what = f"flipped predictions (max {bounds.max_flips})"
        changed = flips["changed"]
        results.append(
            GateResult(
                artifact=name,
                device=device,
                gate=what,
                measured=changed,
                bound=limit,
                passed=changed <= limit,
                detail=detail,
            )
        )
    if bounds.fail_on_collapse:
        if not record.collapse:
            raise UserInputError(
                f"{record.artifact}: no collapse figures (evaluated by an older "
                "edgekit: evaluate it again)"
            )
        found = Collapse.from_dict(record.collapse)
        reason = found.judged(bounds.collapse_share)
        detail = reason or (
            f"no collapse: {found.dominant_class!r} is the most predicted class, for "
            f"{found.dominant_share:.0%} of the inputs"
        )
        what = f"collapse (share of the top class, max {bounds.collapse_share:g})"
        results.append(
            GateResult(
                artifact=name,
                device=device,
                gate=what,
                measured=found.dominant_share,
                bound=bounds.collapse_share,
                passed=not reason,
                detail=detail,
            )
        )
    return results


def _class_drop_gate(record: AccuracyRecord, budget: DropBudget) -> GateResult:
    classes = record.per_class
    measured = [budget.measured(c["drop_points"], c["drop_ci"][1]) for c in classes]
    worst = max(range(len(classes)), key=measured.__getitem__)
    over = [c for c, figure in zip(classes, measured, strict=True) if figure > budget.points]

    def said(change: dict) -> str:
        low, high = change["drop_ci"]
        return (
            f"class {change['name']!r}: drop "
            f"{change['drop_points']:.2f} [{low:.2f}, {high:.2f}] points on "
            f"{change['images']} images, adjusted p={change['p_adjusted']:.3g}"
        )

    detail = "; ".join(said(change) for change in (over or [classes[worst]]))
    detail += f" ({record.per_class_correction})" if record.per_class_correction else ""
    what = f"worst class {budget.figure}" + f" ({record.confidence:.0%})" * budget.on_upper_bound
    return GateResult(
        artifact=record.label,
        device=record.device,
        gate=what,
        measured=measured[worst],
        bound=budget.points,
        passed=not over,
        detail=detail,
    )


def run_prediction_gates(results: Results, bounds: PredictionBounds) -> list[GateResult]:
    """The same gates on every row of a run's results.json that has an accuracy figure."""
    gates = []
    for record in accuracy_records(results):
        gates += prediction_gates(record, bounds)
    return gates
