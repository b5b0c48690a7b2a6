"""The other records of an artifact's measurement: its fast-path coverage (``Coverage``), its
memory (``MemoryRecord``), the accuracy-aware loop (``AwareLoop`` of ``Step``), its per-layer
profile (``ArtifactProfile`` of ``LayerTime``, with the ``Timing`` it scales by) and a run's link
to its golden bundle (``GoldenLink``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from edgekit.records.keyed import ReadByKey


@dataclass
class Coverage(ReadByKey):
    """How much of the graph runs on the fast path (delegate / accelerated kernels / int8)."""

    total_ops: int
    fast_ops: int  # ops inside the delegate or on the accelerated path
    fallback_ops: list[str]  # op types that run outside it (the slow path)
    transposes: int  # NCHW<->NHWC transposes left in the graph
    int8_ops: int | None = None  # compute ops that run in int8 (quantized recipes)
    compute_ops: int | None = None  # denominator for int8_ops
    summary: str = ""

    @property
    def fast_fraction(self) -> float:
        return self.fast_ops / self.total_ops if self.total_ops else 1.0

    @property
    def int8_fraction(self) -> float | None:
        if self.int8_ops is None or not self.compute_ops:
            return None
        return self.int8_ops / self.compute_ops

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["fast_fraction"] = self.fast_fraction
        payload["int8_fraction"] = self.int8_fraction
        return payload


@dataclass
class GoldenLink:
    """A model's golden bundle in a run: its folder (relative to the run directory) and
    tolerance, or why none was made."""

    artifact: str | None = None
    bundle: str | None = None
    atol: float | None = None
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Only what is known: a bundle's folder and tolerance, or why there is none."""
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class MemoryRecord(ReadByKey):
    """One artifact's memory on one device (MB unless named otherwise)."""

    label: str
    device: str
    threads: int
    status: str = "ok"  # ok, failed, or unavailable (a device that cannot tell)
    error: str | None = None
    process_peak_mb: float | None = None  # the whole process at its peak: imports, load, invokes
    floor_mb: float | None = None  # the process with the runtime and its trivial model loaded
    model_mb: float | None = None  # the model's own share: process_peak - floor
    file_mb: float | None = None
    planned_mb: float | None = None  # the runtime's plan for activations, where it tells
    planned_source: str = ""  # where planned_mb comes from, or why there is none
    residual_mb: float | None = None  # model_mb - file_mb - planned_mb: what no part names
    residual_is: str = ""  # what the residual holds, as far as edgekit knows
    load_mb: float | None = None  # resident growth while the session loads
    invoke_mb: float | None = None  # the peak while invoking, over the loaded session
    retained_mb: float | None = None  # above the floor after the session is released
    leak_kb_per_1k: float | None = None  # resident growth per 1000 invokes (Theil-Sen slope)
    leak_interval: list[float] | None = None  # its 95 % interval
    leak: bool = False  # the interval lies above leak_floor
    leak_floor: float | None = None  # kB per 1000 invokes a leak must surely exceed
    invokes: int = 0
    samples: list[list[int]] = field(default_factory=list)  # [invokes so far, resident kB]
    notes: list[str] = field(default_factory=list)
    pss_mb: float | None = None  # the proportional set size, where the device tells (Android)
    # what the runner printed about its own memory, apart from the parts (LiteRT#9899: its
    # figures and dumpsys's can differ by far): peak_rss_mb, init_delta_mb, overall_delta_mb
    runner_mb: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Step:
    """One export of the loop: what was kept float and what it measured."""

    step: int
    keep_float: list[str]
    top1: float  # on the selection slice
    baseline_top1: float
    drop_points: float
    drop_ci: list[float]
    sqnr_db: float
    agreement: float
    int8_fraction: float | None
    p50_ms: float | None
    validation_passed: bool
    latency_status: str = "not measured"
    ratio_to_first: float | None = None  # latency over step 0's, interleaved
    ratio_ci: list[float] | None = None
    added: list[str] = field(default_factory=list)  # the float island this step added


@dataclass
class AwareEvaluation:
    """The accuracy-aware loop's chosen step on the evaluation half: the figures a user is told."""

    drop_points: float | None = None
    drop_ci: tuple[float, float] | None = None
    samples: int | None = None
    top1: float | None = None
    agreement: float | None = None
    split: str = "evaluation"


@dataclass
class AwareLoop(ReadByKey):
    """The accuracy-aware loop as an artifact's manifest and its results row keep it."""

    max_drop_points: float
    within_budget: bool
    chosen_step: int
    steps: list[Step]
    evaluation: AwareEvaluation | None = None
    rule: str = ""
    selection_split: str = ""


# How a layer's part of the whole-model p50 is obtained. A runtime's profiler adds its own cost
# to every op it times (onnxruntime's summed to 229 % of the p50 on a small model), and leaves
# the runtime's per-invoke work outside every op (ExecuTorch's came to 66 %): the raw op times
# do not add up to the p50 either way, their proportions are what the profiler measures.
SCALING = (
    "each layer's share of the profiler's summed op time, scaled to the whole-model p50 timed "
    "interleaved (the profiler's own per-op cost and the runtime's per-invoke work are spread "
    "in proportion)"
)


@dataclass
class Timing:
    """An artifact's interleaved latency as a per-layer profile reads it: its figures, rounds
    and level in the pool's two-level fit. A LatencyRecord (``Timing.of(record)``) and a results
    row (``Timing.of_row(row)``, run's profile reuses the pool's timing) both give one."""

    status: str
    stats: dict[str, Any]  # p50_ms and the rest (latency_summary)
    rounds_ms: list[float] = field(default_factory=list)
    round_sessions: list[int] = field(default_factory=list)
    noise_band: float | None = None  # recorded before the two-level fit
    latency_fit: dict[str, Any] | None = None  # as the profile's JSON keeps it

    @classmethod
    def of(cls, record: Any) -> Timing:
        """A LatencyRecord's timing."""
        return cls(
            record.status,
            dict(record.stats or {}),
            list(record.rounds_ms),
            list(record.round_sessions),
            record.noise_band,
            None if record.latency_fit is None else record.latency_fit.to_dict(),
        )

    @classmethod
    def of_row(cls, row: Any) -> Timing:
        """A results row's timing (its ``latency`` is the record's ``stats``)."""
        return cls(
            "ok" if row.ok else row.status,
            dict(row.latency or {}),
            list(row.rounds_ms),
            list(row.round_sessions),
            row.noise_band,
            None if row.latency_fit is None else row.latency_fit.to_dict(),
        )


@dataclass
class LayerTime:
    name: str
    ms: float  # the runtime profiler's own figure
    share: float  # of the layers' summed profiled time: an artifact's shares add up to 1
    ops: list[str]
    method: str  # how this layer's time was obtained
    p50_ms: float | None = None  # share x the whole-model p50 (SCALING); None without one


@dataclass
class ArtifactProfile:
    artifact: str
    label: str
    target: str
    recipe: str
    total_ms: float | None  # the whole-model p50, timed interleaved with the others
    layers: list[LayerTime]
    method: str
    ops_ms: float  # the layers' sum
    profiler_run_ms: float | None  # the runtime's own whole-invoke time while profiling
    rounds_ms: list[float] = field(default_factory=list)
    round_sessions: list[int] = field(default_factory=list)
    noise_band: float | None = None  # recorded before the two-level fit
    latency_fit: dict[str, Any] | None = None  # its level in the pool's fit
    notes: list[str] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)
    speedup_vs_fp32: dict[str, Any] | None = None
    # the runtime profiler's most expensive single ops, each with the layer it counts in
    top_ops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def coverage(self) -> float | None:
        """The profiler's summed op time over the whole-model p50 (before SCALING)."""
        return self.ops_ms / self.total_ms if self.total_ms else None

    @property
    def scaling(self) -> str | None:
        """How the layers' p50s were obtained, where there are any (SCALING)."""
        return SCALING if self.total_ms and self.layers else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "coverage": self.coverage, "scaling": self.scaling}
