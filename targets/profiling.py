"""Per-op times from a runtime's own profiler, and how they are put on the op census
(``edgekit.targets.census``): each target's ``profile.py`` returns ``OpTimes``;
``place`` gives every census op its time.

onnxruntime names each profiled node, so its times are placed by name. XNNPACK (inside LiteRT
and ExecuTorch) profiles its own operators, after its own fusions: a 1x1 convolution becomes a
"Fully Connected", a PAD folds into the convolution after it, and it adds transposes and
converts of its own. Those events are placed by aligning the two sequences on what each op
does (``family``): the longest common subsequence of families, in order. An event that
matches no census op is kept as an op of its own (``inserted``); a census op that matches no
event took no time of its own (fused into a neighbour)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgekit.targets.census import Census

# the layers a profile names by what their ops do, where no module path names them
QUANT_GROUP = "(quantize/dequantize)"
DATA_GROUP = "(layout and data movement)"

MAC_WORDS = (
    "Convolution",
    "Deconvolution",
    "Fully Connected",
    "Batch Matrix Multiply",
    "CONV",
    "FULLY_CONNECTED",
    "BATCH_MATMUL",
    "TRANSPOSE_CONV",
    "ADDMM",
    "LINEAR",
    "_MM.",
    "::MM",
    "BMM",
)
QUANT_WORDS = ("Convert", "QUANTIZE", "DEQUANTIZE", "CAST")
DATA_WORDS = (
    "Transpose",
    "Reshape",
    "Copy",
    "Pad",
    "Concatenate",
    "Slice",
    "Split",
    "Even Split",
    "RESHAPE",
    "TRANSPOSE",
    "PAD",
    "CONCATENATION",
    "SLICE",
    "SQUEEZE",
    "PACK",
    "SHAPE",
    "STRIDED_SLICE",
    "GATHER",
    "Depth To Space",
    "Space To Depth",
)


@dataclass
class Event:
    name: str  # the profiler's own name for the op
    ms: float  # mean time per invoke
    op: str | None = None  # the census op's name, where the profiler names it (onnxruntime)


@dataclass
class OpTimes:
    method: str  # how the times were obtained, said with every profile
    events: list[Event]
    runs: int
    run_ms: float | None = None  # the runtime's own whole-invoke time while profiling
    notes: list[str] = field(default_factory=list)


@dataclass
class Placed:
    """A census op (or an event no census op matched) with its time."""

    index: int | None  # census op index; None for an inserted event
    name: str
    ms: float
    events: list[str] = field(default_factory=list)


# elementwise ops by what they compute, whatever the format calls them
ELEMENTWISE = (
    ("pool", ("mean", "average", "avg", "pool", "reduce")),
    ("add", ("add", "sum")),
    ("sub", ("sub",)),
    ("mul", ("mul",)),
    ("clamp", ("clamp", "relu", "clip")),
    ("sigmoid", ("sigmoid", "logistic")),
    ("hardswish", ("hardswish", "hard_swish")),
    ("softmax", ("softmax",)),
    ("gelu", ("gelu",)),
    ("tanh", ("tanh",)),
    ("max", ("max", "maximum")),
    ("div", ("div",)),
)


def family(name: str) -> str:
    """mac, quant, data, or what an elementwise op computes (add, clamp, pool...), from an op or
    event name of any of the three formats."""
    upper = name.upper()
    if any(word.upper() in upper for word in QUANT_WORDS):
        return "quant"
    if any(word.upper() in upper for word in MAC_WORDS) or "GEMM" in upper or "MATMUL" in upper:
        return "mac"
    if any(word.upper() in upper for word in DATA_WORDS):
        return "data"
    # aten::sigmoid.out (census) and native_call_sigmoid.out (ETDump) are the same kernel
    lower = re.sub(r"^(native_call_|[\w]+::)", "", name.lower()).removesuffix(".out")
    for kind, words in ELEMENTWISE:
        if any(word in lower for word in words):
            return kind
    return lower


def place(census: Census, times: OpTimes) -> list[Placed]:
    """Every census op with its time (0 when it has no event), plus inserted events."""
    placed = [Placed(op.index, op.op, 0.0) for op in census.ops]
    keyed = bool(times.events) and all(event.op is not None for event in times.events)
    if keyed and len(times.events) == len(census.ops):
        # one event per node of the graph the census read, in the order both ran: by position
        # (a census names a fused node after the file's node it came from)
        for entry, event in zip(placed, times.events, strict=True):
            entry.ms, entry.events = event.ms, [event.name]
        return placed
    if keyed:
        by_name = {op.name: position for position, op in enumerate(census.ops)}
        extra = []
        for event in times.events:
            position = by_name.get(event.op)
            if position is None:
                extra.append(Placed(None, event.name, event.ms, [event.name]))
                continue
            placed[position].ms += event.ms
            placed[position].events.append(event.name)
        return placed + extra
    return _aligned(census, times.events, placed)


def _aligned(census: Census, events: list[Event], placed: list[Placed]) -> list[Placed]:
    ops = [family(op.op) if op.kind == "elementwise" else op.kind for op in census.ops]
    ops = [kind if kind != "elementwise" else "?" for kind in ops]
    kinds = [family(event.name) for event in events]
    n, m = len(ops), len(kinds)
    # longest common subsequence of families (a census op and an event pair up when they do
    # the same kind of work); ties prefer pairing early, which keeps runs of similar ops in order
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if ops[i] == kinds[j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    extra, i, j = [], 0, 0
    while i < n and j < m:
        if ops[i] == kinds[j] and table[i][j] == table[i + 1][j + 1] + 1:
            placed[i].ms += events[j].ms
            placed[i].events.append(events[j].name)
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            extra.append(Placed(None, events[j].name, events[j].ms, [events[j].name]))
            j += 1
    extra += [Placed(None, e.name, e.ms, [e.name]) for e in events[j:]]
    return placed + extra
