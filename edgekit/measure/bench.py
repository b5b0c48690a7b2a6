"""``edgekit bench``: the latency of artifacts on a device, each session in its own child, all of
them and the baseline interleaved in rounds (``edgekit.measure.interleave``), so that every ratio
(speed-up over the baseline, one artifact over another) comes from the same machine state and
carries a 95 % interval from the two levels of the design: rounds within sessions, sessions within
sides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, as_artifact
from edgekit.artifacts.runtime_options import tuned_p50
from edgekit.common.machine import fingerprint
from edgekit.devices import DEFAULT_DEVICE, as_device, get_device
from edgekit.errors import EdgekitError, renamed
from edgekit.measure.interleave import interleave
from edgekit.measure.interleaved import Interleaved
from edgekit.targets import runtime_versions
from edgekit.worker.latency import BlockTimer, LatencyProtocol, LatencyRecord, NoiseGuard
from edgekit.worker.parent import WorkerTimer

if TYPE_CHECKING:
    from edgekit.devices.base import Device
    from edgekit.records import MemoryRecord

BASELINE_LABEL = "baseline/fp32"


def baseline_timer(
    source: dict[str, Any],
    threads: int,
    sample: np.ndarray | None,
    protocol: LatencyProtocol,
    timeout_s: float = 600.0,
    *,
    cuda: bool = True,
) -> BlockTimer:
    """The source model in its own framework, fp32: on CUDA when present (``cuda``), else CPU.
    ``source`` is a manifest's source entry (spec and load options)."""
    request = {
        "what": "baseline",
        "source": source,
        "threads": threads,
        "warmup": protocol.warmup,
        "cuda": cuda,
    }
    return WorkerTimer(BASELINE_LABEL, request, sample, timeout_s)


def session_memory(record: LatencyRecord, figures: dict[str, Any] | None) -> MemoryRecord:
    """The artifact's memory in parts, from its (last) timing session's figures; a leak is a
    warning of the record's."""
    from edgekit.devices.android_memory import SOURCE as DUMPSYS
    from edgekit.measure.memory import cannot_tell, dumpsys_record, memory_record

    if figures is not None and figures.get("source") == DUMPSYS:  # a phone's runner, read aside
        return dumpsys_record(
            record.label, record.device, record.threads, figures, record.artifact, record.target
        )
    if figures is None or "invoke_peak_kb" not in figures:
        return cannot_tell(record.label, record.device, record.threads)
    memory = memory_record(
        record.label,
        record.device,
        record.threads,
        figures,
        path=record.artifact,
        target=record.target,
        timing_session=True,
    )
    if memory.leak:
        low, high = memory.leak_interval
        record.warnings.append(
            f"memory grew {memory.leak_kb_per_1k:.1f} kB per 1000 invokes [{low:.1f}, "
            f"{high:.1f}] over {memory.invokes} invokes: a leak, if it goes on"
        )
    return memory


def baseline_record(timer: BlockTimer | None, threads: int, model: str | None) -> LatencyRecord:
    record = LatencyRecord(BASELINE_LABEL, "baseline", threads, "failed", model=model)
    if timer is not None:
        runtime_device = str(timer.runtime.get("device", ""))
        record.device = "cuda" if runtime_device.startswith("CUDA") else DEFAULT_DEVICE
    return record


def measure_interleaved(
    timers: list[BlockTimer],
    records: list[LatencyRecord],
    protocol: LatencyProtocol,
    guard: NoiseGuard,
    *,
    progress: Callable[[str], None] | None = None,
    decided: Callable[[Interleaved], bool] | None = None,
    pairs: list[tuple[int, int]] | None = None,
) -> Interleaved:
    """Interleave ``timers`` and fill the matching ``records`` (statistics, facts, warnings,
    each side's level in the two-level fit and how the pool's measuring went); ``decided`` and
    ``pairs`` as in ``edgekit.measure.interleave.interleave``."""
    result = interleave(timers, protocol, guard, progress=progress, decided=decided, pairs=pairs)
    versions = runtime_versions()
    pool = result.summary()
    for side, (timer, record) in enumerate(zip(timers, records, strict=True)):
        timer.close()
        record.load_ms, record.first_ms = timer.load_ms, timer.first_ms
        record.runtime = dict(timer.runtime)
        record.peak_rss_mb = timer.peak_rss_mb
        record.fingerprint = fingerprint(record.threads, versions)
        record.interleaved_with = [label for i, label in enumerate(result.labels) if i != side]
        record.block_runs = result.block_runs[side]
        record.attempts = len(result.disturbed)
        record.pool = dict(pool)
        if side in result.failed:
            record.status, record.error = "failed", result.failed[side]
            continue
        record.fill(result.blocks[side], result.rounds_used)
        record.latency_fit = result.level(side)
        if record.artifact and record.target:
            record.memory = session_memory(record, timer.memory)
        record.round_sessions = result.sessions_of(side)
        record.rounds_disturbed = sum(result.disturbed)
        record.disturbed = record.rounds_disturbed > 0 and len(result.rounds_used) == len(
            result.disturbed
        )
        if record.disturbed:
            record.warnings.append(
                f"DISTURBED: other processes used {record.foreign_cpu:.2f} cores during the "
                f"timed blocks in {record.rounds_disturbed} of {len(result.disturbed)} rounds; "
                "treat the absolute figure as unreliable (ratios are paired per round)"
            )
        mark_throttled(record, result)
    return result


def throttled_rounds(result: Interleaved) -> list[str | None]:
    """Per round, why some side's block in it ran throttled (None: none did): like a
    disturbance, the machine's state is the round's, whichever side saw it."""
    reasons = []
    for index in range(len(result.disturbed)):
        blocks = [side[index] for side in result.blocks if index < len(side)]
        reasons.append(next((block.throttled for block in blocks if block.throttled), None))
    return reasons


def mark_throttled(record: LatencyRecord, result: Interleaved) -> None:
    """THROTTLED, by DISTURBED's rule: a round in which the machine slowed itself is in the
    statistics. (The interleaver does not yet leave such rounds out, so any is.)"""
    reasons = throttled_rounds(result)
    used = [reasons[index] for index in result.rounds_used if reasons[index]]
    record.rounds_throttled = sum(1 for reason in reasons if reason)
    record.throttled = bool(used)
    if record.throttled:
        record.warnings.append(
            f"THROTTLED: {used[0]} (in {len(used)} of the {len(result.rounds_used)} rounds "
            "used); the machine slowed itself while timing, so treat the absolute figure as "
            "unreliable (ratios are paired per round)"
        )


def bench_artifacts(
    artifacts: list[str | Path | Artifact],
    *,
    device: str | Any = DEFAULT_DEVICE,
    threads: int = 1,
    protocol: LatencyProtocol | None = None,
    guard: NoiseGuard | None = None,
    sample: np.ndarray | None = None,
    baseline: bool = True,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> list[LatencyRecord]:
    """Latency of ``artifacts`` on ``device`` and, where the device is the host's own, of each
    artifact's baseline, interleaved in rounds and sessions: every artifact's ``speedup`` is
    over its baseline, with ``speedup_ci``, and every record carries its level in the pool's
    two-level fit (``latency_fit``), from which any two of them compare. Returns the artifacts'
    records, then the baselines'."""
    protocol, guard = protocol or LatencyProtocol(), guard or NoiseGuard()
    device = as_device(device)
    loaded = [as_artifact(a) for a in artifacts]
    records = [LatencyRecord.for_artifact(a, device.name, threads) for a in loaded]
    timers, timed = [], []
    try:
        for artifact, record in zip(loaded, records, strict=True):
            reason = device.why_unavailable(artifact)
            if reason:
                record.status, record.error = "unavailable", reason
                continue
            try:
                timers.append(device.timer(artifact, threads, sample, protocol, timeout_s))
            except EdgekitError as exc:
                record.error = str(exc)
                record.runtime["error_type"] = type(exc).__name__
                continue
            timed.append(record)
        baselines = _baselines(loaded, device, threads, sample=sample, protocol=protocol,
                               timeout_s=timeout_s, wanted=baseline)  # fmt: skip
        for timer, record in baselines.values():
            if timer is not None:
                timers.append(timer)
                timed.append(record)
        if timers:
            result = measure_interleaved(
                timers, timed, protocol, guard, progress=progress, pairs=decision_pairs(timed)
            )
            _speedups(result, timed, baselines, loaded, records)
    finally:
        for timer in timers:
            timer.close()
    traits_of = device.traits
    for artifact, record in zip(loaded, records, strict=True):
        record.traits = traits_of(record.runtime).to_dict()
        if record.status == "ok":
            record.tuned_p50 = tuned_p50(
                artifact.manifest, device.name, threads, record.stats["p50_ms"]
            )
    extra = [record for _, record in baselines.values()]
    for record in extra:
        record.traits = get_device(DEFAULT_DEVICE).traits(record.runtime).to_dict()
    return records + extra


def decision_pairs(timed: list[LatencyRecord]) -> list[tuple[int, int]]:
    """The ratios the decision needs, by side: artifact against artifact (the speed groups),
    and each artifact's speed-up over the baseline of its model (the figure a report leads
    with)."""
    artifacts = [side for side, record in enumerate(timed) if record.artifact]
    pairs = [(a, b) for a in artifacts for b in artifacts if a < b]
    for side, record in enumerate(timed):
        if not record.artifact:
            pairs += [(a, side) for a in artifacts if timed[a].model == record.model]
    return pairs


def _source_key(artifact: Artifact) -> str | None:
    """Which source model an artifact came from (its baseline); None: none to time."""
    source = artifact.manifest.source
    return None if source is None or not source.spec else f"{source.spec}|{source.digest}"


def _baselines(
    loaded: list[Artifact],
    device: Device,
    threads: int,
    *,
    sample: np.ndarray | None,
    protocol: LatencyProtocol,
    timeout_s: float,
    wanted: bool,
) -> dict[str, tuple[BlockTimer | None, LatencyRecord]]:
    """One baseline per distinct source model, interleaved with the artifacts when the device
    is the baseline's own machine (a timer of None: it could not start, its record says why)."""
    # a server pool interleaves the baseline too: torch on the same node's CUDA GPU
    if (
        not wanted
        or device.traits().where not in ("host", "server")
        or not device.traits().latency_comparable
    ):
        return {}
    baselines: dict[str, tuple[BlockTimer | None, LatencyRecord]] = {}
    for artifact in loaded:
        key = _source_key(artifact)
        if key in baselines or key is None:
            continue
        source = artifact.manifest.source.to_dict()
        try:
            timer = baseline_timer(source, threads, sample, protocol, timeout_s)
            baselines[key] = (timer, baseline_record(timer, threads, source.get("name")))
        except EdgekitError as exc:
            record = baseline_record(None, threads, source.get("name"))
            record.error = str(exc)
            baselines[key] = (None, record)
    return baselines


def _speedups(
    result: Interleaved,
    timed: list[LatencyRecord],
    baselines: dict[str, tuple[BlockTimer | None, LatencyRecord]],
    loaded: list[Artifact],
    records: list[LatencyRecord],
) -> None:
    """Each artifact's speed-up over its own baseline: the baseline's time over its time."""
    side_of = {id(record): side for side, record in enumerate(timed)}
    for artifact, record in zip(loaded, records, strict=True):
        entry = baselines.get(_source_key(artifact))
        if entry is None or record.status != "ok" or entry[1].status != "ok":
            continue
        ratio, interval = result.ratio(side_of[id(entry[1])], side_of[id(record)])
        record.speedup, record.speedup_ci = ratio, list(interval)


def bench_artifact(
    artifact: str | Path | Artifact,
    *,
    device: str | Any = DEFAULT_DEVICE,
    threads: int = 1,
    protocol: LatencyProtocol | None = None,
    guard: NoiseGuard | None = None,
    sample: np.ndarray | None = None,
    timeout_s: float = 600.0,
) -> LatencyRecord:
    """One artifact alone (no baseline): its latency record."""
    return bench_artifacts(
        [artifact],
        device=device,
        threads=threads,
        protocol=protocol,
        guard=guard,
        sample=sample,
        baseline=False,
        timeout_s=timeout_s,
    )[0]


# the old name, for one release (``measure`` read as another thing of the same name)
__getattr__ = renamed(__name__, {"measure": "measure_interleaved"})
