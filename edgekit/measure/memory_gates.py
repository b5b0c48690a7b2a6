"""``edgekit check``'s memory gates: the model's own share of the peak (``--max-peak-mb``), the
file's size (``--max-size-kb``), the resident set's growth per 1000 invokes
(``--max-leak-kb-per-1k``: the slope's 95 % upper bound, as the drop gate takes the drop's), and
a candidate's share against a reference's (``--max-memory-regression``)."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.errors import UserInputError
from edgekit.measure.gates import GateResult
from edgekit.measure.memory import MemoryRecord
from edgekit.results import Results


@dataclass(frozen=True)
class MemoryBounds:
    max_peak_mb: float | None = None
    max_size_kb: float | None = None
    max_leak_kb_per_1k: float | None = None
    max_memory_regression: float | None = None  # percent of the reference's model share

    def __post_init__(self) -> None:
        for name in ("max_peak_mb", "max_size_kb", "max_leak_kb_per_1k", "max_memory_regression"):
            value = getattr(self, name)
            if value is not None and value < 0:
                option = "--" + name.replace("_", "-")
                raise UserInputError(f"{option} must be >= 0, got {value:g}")

    @property
    def measured(self) -> bool:
        """Whether any bound needs a session's memory (the size alone needs none)."""
        return any(
            b is not None
            for b in (self.max_peak_mb, self.max_leak_kb_per_1k, self.max_memory_regression)
        )


def memory_gates(
    memory: MemoryRecord,
    size_bytes: int,
    bounds: MemoryBounds,
    reference: MemoryRecord | None = None,
) -> list[GateResult]:
    """Each bound given, as a gate; a memory that could not be measured fails the gates that
    need it, with why."""
    gates = []
    if bounds.max_size_kb is not None:
        size_kb = size_bytes / 1024
        gates.append(
            GateResult(
                artifact=memory.label,
                device=memory.device,
                gate="size KB",
                measured=size_kb,
                bound=bounds.max_size_kb,
                passed=size_kb <= bounds.max_size_kb,
            )
        )
    if not bounds.measured:
        return gates
    if memory.status != "ok" or memory.model_mb is None:
        why = memory.error or (memory.notes[0] if memory.notes else memory.status)
        for gate, bound in (
            ("model's peak MB", bounds.max_peak_mb),
            ("leak kB per 1k invokes", bounds.max_leak_kb_per_1k),
            ("memory regression %", bounds.max_memory_regression),
        ):
            if bound is not None:
                gates.append(
                    GateResult(
                        artifact=memory.label,
                        device=memory.device,
                        gate=gate,
                        measured=float("nan"),
                        bound=bound,
                        passed=False,
                        detail=f"not measured: {why}",
                    )
                )
        return gates
    if bounds.max_peak_mb is not None:
        gates.append(
            GateResult(
                artifact=memory.label,
                device=memory.device,
                gate="model's peak MB",
                measured=memory.model_mb,
                bound=bounds.max_peak_mb,
                passed=memory.model_mb <= bounds.max_peak_mb,
                detail=(
                    f"above the runtime's floor of {memory.floor_mb:.1f} MB (process peak "
                    f"{memory.process_peak_mb:.1f} MB)"
                ),
                figures=memory.to_dict(),
            )
        )
    if bounds.max_leak_kb_per_1k is not None:
        gates.append(_leak_gate(memory, bounds.max_leak_kb_per_1k))
    if bounds.max_memory_regression is not None and reference is not None:
        gates.append(_regression_gate(memory, reference, bounds.max_memory_regression))
    return gates


def _leak_gate(memory: MemoryRecord, bound: float) -> GateResult:
    if memory.leak_interval is None:
        return GateResult(
            artifact=memory.label,
            device=memory.device,
            gate="leak kB per 1k invokes",
            measured=float("nan"),
            bound=bound,
            passed=False,
            detail=f"too few samples over {memory.invokes} invokes for a slope",
        )
    low, high = memory.leak_interval
    return GateResult(
        artifact=memory.label,
        device=memory.device,
        gate="leak kB per 1k invokes",
        measured=memory.leak_kb_per_1k,
        bound=bound,
        passed=high <= bound,
        detail=(
            f"95% interval [{low:.2f}, {high:.2f}] over {memory.invokes} invokes (the upper end "
            "is gated)"
        ),
        figures={"leak_interval": [low, high], "invokes": memory.invokes},
    )


def _regression_gate(memory: MemoryRecord, reference: MemoryRecord, bound: float) -> GateResult:
    if reference.status != "ok" or not reference.model_mb:
        return GateResult(
            artifact=memory.label,
            device=memory.device,
            gate="memory regression %",
            measured=float("nan"),
            bound=bound,
            passed=False,
            detail=(
                f"the reference {reference.label}: {reference.error or 'no model share measured'}"
            ),
        )
    change = 100.0 * (memory.model_mb / reference.model_mb - 1.0)
    return GateResult(
        artifact=memory.label,
        device=memory.device,
        gate="memory regression %",
        measured=change,
        bound=bound,
        passed=change <= bound,
        detail=(
            f"model's share {memory.model_mb:.2f} MB against {reference.model_mb:.2f} MB of "
            f"{reference.label}"
        ),
        figures={"reference_model_mb": reference.model_mb},
    )


def run_memory_gates(results: Results, bounds: MemoryBounds) -> list[GateResult]:
    """A run directory's recorded rows: each artifact row's model share and file size (the
    leak and regression bounds need a session of their own, so they gate artifacts)."""
    gates = []
    for row in results.rows:
        if row.kind != "artifact" or row.status != "ok":
            continue
        memory = row.memory
        if memory is None:
            memory = MemoryRecord(row.label, str(row.device), int(row.threads or 1))
            memory.status, memory.error = "unavailable", "the run recorded no memory for it"
        gates += memory_gates(memory, int(row.size_bytes or 0), bounds)
    return gates
