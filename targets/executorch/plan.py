"""The memory plan an ExecuTorch ``Program`` carries: ``non_const_buffer_sizes`` of its
``forward`` execution plan (buffer 0 is reserved)."""

from __future__ import annotations

from typing import Any


def planned_bytes(program: Any) -> int:
    """The planned buffers of ``program``'s ``forward`` method (an ExecuTorch ``Program``)."""
    plans = {plan.name: plan for plan in program.execution_plan}
    plan = plans.get("forward", program.execution_plan[0])
    return int(sum(list(plan.non_const_buffer_sizes)[1:]))
