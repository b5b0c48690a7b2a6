"""The onnxruntime options ``edgekit tune`` searches beside the thread count: onnxruntime
1.32's SessionOptions and session config keys, applied by edgekit.targets.onnx.session, whose
DEFAULT_SETTINGS are each knob's first value."""

from __future__ import annotations

from typing import Any

from edgekit.targets.knobs import Knob
from edgekit.targets.onnx.session import DEFAULT_SETTINGS


def _knob(name: str, others: tuple[Any, ...], why: str, **requires: Any) -> Knob:
    return Knob(name, (DEFAULT_SETTINGS[name], *others), why, requires)


# onnxruntime 1.32 runs ORT_PARALLEL sequentially unless it has more than one inter-op thread
# (the session's own options read back ORT_SEQUENTIAL): the parallel candidate brings two
PARALLEL = Knob(
    "execution_mode",
    ("ORT_SEQUENTIAL", "ORT_PARALLEL"),
    "independent branches of the graph at once (with 2 inter-op threads)",
    companions={"ORT_PARALLEL": {"inter_op_threads": 2}},
)


KNOBS = (
    _knob(
        "graph_optimization_level",
        ("ORT_ENABLE_EXTENDED", "ORT_ENABLE_BASIC"),
        "graph rewrites; ALL adds the CPU EP's NCHWc layout transformation",
    ),
    PARALLEL,
    _knob(
        "inter_op_threads",
        (2,),
        "threads for parallel branches (1 makes ORT_PARALLEL run sequentially)",
        execution_mode="ORT_PARALLEL",
    ),
    _knob(
        "allow_spinning",
        (False,),
        "intra-op threads spin between ops (session.intra_op.allow_spinning)",
    ),
    _knob("enable_mem_pattern", (False,), "plans activations from the first run's pattern"),
    _knob("enable_cpu_mem_arena", (False,), "the CPU allocator's arena"),
)
