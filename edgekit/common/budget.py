"""The accuracy budget: how many top-1 points an artifact may lose against its baseline, and
which figure is held to it. One rule, read the same way by the accuracy-aware loop, the
accuracy gate and the recommendation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DropBudget:
    """``points`` of top-1 an artifact may lose. By default the upper bound of the drop's 95 %
    interval is held to it (a drop that may be over budget counts as over); with
    ``on_upper_bound=False`` (``--point-estimate``) the drop itself is."""

    points: float = 1.0
    on_upper_bound: bool = True

    @classmethod
    def of(cls, points: float, *, point_estimate: bool = False) -> DropBudget:
        """From the command line's two settings, ``--max-drop`` and ``--point-estimate``."""
        return cls(points, on_upper_bound=not point_estimate)

    def measured(self, drop: float, upper: float) -> float:
        """The figure held to the budget: the drop's upper bound, or the drop."""
        return upper if self.on_upper_bound else drop

    def over(self, drop: float, upper: float) -> bool:
        return self.measured(drop, upper) > self.points

    @property
    def figure(self) -> str:
        """What ``measured`` is, in words: ``drop upper bound`` or ``drop``."""
        return "drop upper bound" if self.on_upper_bound else "drop"

    @property
    def rule(self) -> str:
        """The rule as a manifest records it."""
        return "upper bound of the drop's 95% interval" if self.on_upper_bound else "drop"

    def why_over(self, drop: float, upper: float) -> str:
        """``drop upper bound +1.40 > budget 1``, one line for a row over budget."""
        return f"{self.figure} {self.measured(drop, upper):+.2f} > budget {self.points:g}"
