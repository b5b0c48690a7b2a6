"""What one attempt at converting a block gave: passed, or failed in one of six classes, with
the stage, the error's first line and the op it names."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

# the failure classes, in the order a conversion meets them
FAILURES = ("export", "convert", "load", "crash", "hang", "mismatch")
STAGE_CLASS = {
    "export": "export",
    "quantize": "convert",
    "convert": "convert",
    "load": "load",
    "run": "load",
}
_OP_PATTERNS = (
    re.compile(r"OpOverload\(op='([\w.]+)', overload='(\w+)'\)"),
    re.compile(r"Lowering not found: ([\w.]+)"),
    re.compile(r"Operator torch\._ops\.([\w.]+) is not"),
    re.compile(r"target=torch\.ops\.([\w.]+)\]"),
    re.compile(r"'(tfl\.\w+)' op"),
    re.compile(r"\b(aten\.\w+(?:\.\w+)?)"),
    # LiteRT's interpreter names the node that failed to prepare by its op (or its delegate)
    re.compile(r"Node number \d+ \((\w+)\) failed"),
    # litert-torch's layout pass names the graph node, numbered per graph: the op without it
    re.compile(r"node to NHWC: ([a-z][a-z0-9_]*?)(?:_\d+)?\b"),
    # an ExecuTorch/XNNPACK partitioner rule names the overload it refuses
    re.compile(r"^([a-z_]+\.default) only supports"),
    # a kernel missing for a dtype: "histogram_cpu" not implemented for 'Long'
    re.compile(r'"(\w+)" not implemented for'),
    # the XNNPACK delegate's compiler names the node kind it could not create
    re.compile(r"Failed to create (\w+) node"),
)


@dataclass
class Outcome:
    """``failure`` is None when the block converted, loaded and matched its torch outputs."""

    failure: str | None
    stage: str = ""
    message: str = ""
    op: str | None = None
    seconds: float = 0.0
    verdict: dict[str, Any] = field(default_factory=dict)

    @property
    def degenerate(self) -> bool:
        return bool(self.verdict.get("degenerate"))

    def same_failure(self, other: Outcome) -> bool:
        """Does this block reproduce ``other``: the same class, and the same op where both
        name one."""
        if self.failure is None or self.failure != other.failure:
            return False
        return self.op is None or other.op is None or self.op == other.op

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(**data)


def op_named(error: BaseException | str | None) -> str | None:
    """The operator an error is about, from its message or its causes' (None: not named)."""
    seen = 0
    while error is not None and seen < 8:
        text = error if isinstance(error, str) else str(error)
        for pattern in _OP_PATTERNS:
            match = pattern.search(text)
            if match:
                return ".".join(group for group in match.groups() if group)
        if isinstance(error, str):
            return None
        error = error.__cause__ or error.__context__
        seen += 1
    return None
