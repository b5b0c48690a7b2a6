"""``edgekit bench``: the latency of artifacts on a device, each session in its own child, all of
them and the baseline interleaved in rounds (``edgekit.measure.interleave``), so that every ratio
(speed-up over the baseline, one artifact over another) comes from the same machine state and
carries a 95 % interval from the paired rounds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, as_artifact
from edgekit.artifacts.runtime_options import tuned_p50
from edgekit.common.machine import fingerprint
from edgekit.common.stats import band_of, latency_summary
from edgekit.devices import DEFAULT_DEVICE, as_device, get_device
from edgekit.errors import EdgekitError
from edgekit.measure.interleave import Interleaved, interleave
from edgekit.targets import runtime_versions
from edgekit.worker.latency import BlockTimer, LatencyRecord, NoiseGuard, Protocol
from edgekit.worker.parent import WorkerTimer

BASELINE_LABEL = "baseline/fp32"
BASELINE_SESSIONS = 2


def baseline_timer(
    source: dict[str, Any],
    threads: int,
    sample: np.ndarray | None,
    protocol: Protocol,
    timeout_s: float = 600.0,
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


def session_memory(record: LatencyRecord, figures: dict[str, Any] | None) -> dict[str, Any]:
    """The artifact's memory in parts, from its (last) timing session's figures; a leak is a
    warning of the record's."""
    from edgekit.devices.android_memory import SOURCE as DUMPSYS
    from edgekit.measure.memory import cannot_tell, dumpsys_record, memory_record

    if figures is not None and figures.get("source") == DUMPSYS:  # a phone's runner, read aside
        return dumpsys_record(record.label, record.device, record.threads, figures,
                              record.artifact, record.target).to_dict()  # fmt: skip
    if figures is None or "invoke_peak_kb" not in figures:
        return cannot_tell(record.label, record.device, record.threads).to_dict()
    memory = memory_record(record.label, record.device, record.threads, figures,
                           record.artifact, record.target, timing_session=True)  # fmt: skip
    if memory.leak:
        low, high = memory.leak_interval
        record.warnings.append(
            f"memory grew {memory.leak_kb_per_1k:.1f} kB per 1000 invokes [{low:.1f}, "
            f"{high:.1f}] over {memory.invokes} invokes: a leak, if it goes on"
        )
    return memory.to_dict()


def baseline_record(timer: BlockTimer | None, threads: int, model: str | None) -> LatencyRecord:
    record = LatencyRecord(BASELINE_LABEL, "baseline", threads, "failed", model=model)
    if timer is not None:
        where = str(timer.runtime.get("device", ""))
        record.device = "cuda" if where.startswith("CUDA") else DEFAULT_DEVICE
    return record


def measure(
    timers: list[BlockTimer],
    records: list[LatencyRecord],
    protocol: Protocol,
    guard: NoiseGuard,
    progress: Callable[[str], None] | None = None,
    decided: Callable[[Interleaved], bool] | None = None,
    max_rounds: int = 0,
) -> Interleaved:
    """Interleave ``timers`` and fill the matching ``records`` (statistics, facts, warnings);
    ``decided`` and ``max_rounds`` as in ``edgekit.measure.interleave.interleave``."""
    result = interleave(timers, protocol, guard, progress, decided, max_rounds)
    versions = runtime_versions()
    for side, (timer, record) in enumerate(zip(timers, records, strict=True)):
        timer.close()
        record.load_ms, record.first_ms = timer.load_ms, timer.first_ms
        record.runtime = dict(timer.runtime)
        record.peak_rss_mb = timer.peak_rss_mb
        record.fingerprint = fingerprint(record.threads, versions)
        record.interleaved_with = [label for i, label in enumerate(result.labels) if i != side]
        record.block_runs = result.block_runs[side]
        record.attempts = len(result.disturbed)
        if side in result.failed:
            record.status, record.error = "failed", result.failed[side]
            continue
        record.fill(result.blocks[side], result.rounds_used)
        if record.artifact and record.target:
            record.memory = session_memory(record, timer.memory)
        record.round_sessions = result.sessions_used
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
    return result


def bench_artifacts(
    artifacts: list[str | Path | Artifact],
    *,
    device: str | Any = DEFAULT_DEVICE,
    threads: int = 1,
    protocol: Protocol | None = None,
    guard: NoiseGuard | None = None,
    sample: np.ndarray | None = None,
    baseline: bool = True,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> list[LatencyRecord]:
    """Latency of ``artifacts`` on ``device`` and, where the device is the host's own, of each
    artifact's baseline, interleaved: every artifact's ``speedup`` is over its baseline, with
    ``speedup_ci``. Returns the artifacts' records, then the baselines'."""
    protocol, guard = protocol or Protocol(), guard or NoiseGuard()
    where = as_device(device)
    loaded = [as_artifact(a) for a in artifacts]
    records = [LatencyRecord.for_artifact(a, where.name, threads) for a in loaded]
    timers, timed = [], []
    probe: tuple[Artifact, LatencyRecord] | None = None
    try:
        for artifact, record in zip(loaded, records, strict=True):
            reason = where.unavailable_reason(artifact)
            if reason:
                record.status, record.error = "unavailable", reason
                continue
            try:
                timers.append(where.timer(artifact, threads, sample, protocol, timeout_s))
            except EdgekitError as exc:
                record.error = str(exc)
                record.runtime["error_type"] = type(exc).__name__
                continue
            timed.append(record)
            if probe is None:
                probe = (artifact, LatencyRecord.for_artifact(artifact, where.name, threads))
        baselines = _baselines(loaded, where, threads, sample, protocol, timeout_s, baseline)
        for sessions in baselines.values():
            for timer, record in sessions.timed():
                timers.append(timer)
                timed.append(record)
        if probe is not None and len(timers) > 1:  # a second session of the first artifact
            again = where.timer(probe[0], threads, sample, protocol, timeout_s)
            again.label = probe[1].label = f"{probe[0].label} (second session)"
            timers.append(again)
            timed.append(probe[1])
        if timers:
            result = measure(timers, timed, protocol, guard, progress)
            band = _noise_band(result, timed, probe)
            for record in timed:
                record.noise_band = band
            _speedups(result, timed, baselines, loaded, records)
    finally:
        for timer in timers:
            timer.close()
    traits_of = where.traits
    for artifact, record in zip(loaded, records, strict=True):
        record.traits = traits_of(record.runtime).to_dict()
        if record.status == "ok":
            record.tuned_p50 = tuned_p50(artifact.manifest, where.name, threads,
                                         record.stats["p50_ms"])  # fmt: skip
    extra = [sessions.record for sessions in baselines.values()]
    for record in extra:
        record.traits = get_device(DEFAULT_DEVICE).traits(record.runtime).to_dict()
    return records + extra


@dataclass
class BaselineSessions:
    """The baseline of one source model in two sessions (two child processes): a framework's
    session can run several percent off another's of the same model (where its kernels and
    buffers land), which rounds cannot see, so the speed-ups divide by both, per round."""

    timers: list[BlockTimer]
    record: LatencyRecord  # what the report shows: both sessions' samples, pooled
    second: LatencyRecord | None = None

    def timed(self) -> list[tuple[BlockTimer, LatencyRecord]]:
        records = [self.record, self.second][: len(self.timers)]
        return list(zip(self.timers, records, strict=True))


def _source_key(artifact: Artifact) -> str | None:
    """Which source model an artifact came from (its baseline); None: none to time."""
    source = artifact.manifest.source
    return None if source is None or not source.spec else f"{source.spec}|{source.digest}"


def _baselines(
    loaded: list[Artifact],
    where: Any,
    threads: int,
    sample: np.ndarray | None,
    protocol: Protocol,
    timeout_s: float,
    wanted: bool,
) -> dict[str, BaselineSessions]:
    """One baseline per distinct source model, interleaved with the artifacts when the device
    is the baseline's own machine."""
    # a server pool interleaves the baseline too: torch on the same node's CUDA GPU
    if (
        not wanted
        or where.traits().where not in ("host", "server")
        or not where.traits().latency_comparable
    ):
        return {}
    baselines: dict[str, BaselineSessions] = {}
    for artifact in loaded:
        key = _source_key(artifact)
        if key in baselines or key is None:
            continue
        source = artifact.manifest.source.to_dict()
        timers: list[BlockTimer] = []
        try:
            for _ in range(BASELINE_SESSIONS):
                timers.append(baseline_timer(source, threads, sample, protocol, timeout_s))
            record = baseline_record(timers[0], threads, source.get("name"))
        except EdgekitError as exc:
            for timer in timers:
                timer.close()
            timers, record = [], baseline_record(None, threads, source.get("name"))
            record.error = str(exc)
        second = None
        if len(timers) > 1:
            second = baseline_record(timers[1], threads, source.get("name"))
            second.label = timers[1].label = f"{BASELINE_LABEL} (second session)"
        baselines[key] = BaselineSessions(timers, record, second)
    return baselines


def _noise_band(
    result: Interleaved, timed: list[LatencyRecord], probe: tuple | None
) -> float | None:
    """How far the second session of the first artifact is from the first, in this pool."""
    if probe is None or probe[1] not in timed or len(timed) < 2:
        return None
    again, first = (
        timed.index(probe[1]),
        next(
            i for i, r in enumerate(timed) if r.artifact == probe[1].artifact and r is not probe[1]
        ),
    )
    if again == first or timed[again].status != "ok" or timed[first].status != "ok":
        return None
    return band_of(result.ratio(again, first)[1])


def _speedups(
    result: Interleaved,
    timed: list[LatencyRecord],
    baselines: dict[str, BaselineSessions],
    loaded: list[Artifact],
    records: list[LatencyRecord],
) -> None:
    side_of = {id(record): side for side, record in enumerate(timed)}
    bands = {key: _pool_sessions(result, sessions, side_of) for key, sessions in baselines.items()}
    for artifact, record in zip(loaded, records, strict=True):
        key = _source_key(artifact)
        entry = baselines.get(key)
        if entry is None or record.status != "ok" or entry.record.status != "ok":
            continue
        sessions = [side_of[id(r)] for r in (entry.record, entry.second) if r and r.status == "ok"]
        band = max(record.noise_band or 0.0, bands[key] or 0.0) or None
        ratio, interval = result.ratio(sessions, side_of[id(record)], band)
        record.speedup, record.speedup_ci = ratio, list(interval)


def _pool_sessions(
    result: Interleaved, sessions: BaselineSessions, side_of: dict[int, int]
) -> float | None:
    first, second = sessions.record, sessions.second
    if second is None or first.status != "ok" or second.status != "ok":
        return None
    return pool_sessions(result, side_of[id(first)], side_of[id(second)], first, second)


def pool_sessions(
    result: Interleaved,
    first_side: int,
    second_side: int,
    first: LatencyRecord,
    second: LatencyRecord,
) -> float:
    """Fold a second session into ``first`` (per-round geometric means, pooled samples);
    returns how far the two sessions differ (their noise band)."""  # fmt: skip
    sides = [first_side, second_side]
    first.rounds_ms = [round(value, 5) for value in result.rounds_ms(sides)]
    first.samples_ms = first.samples_ms + second.samples_ms
    first.stats = latency_summary(np.asarray(first.samples_ms))
    first.warnings = sorted(set(first.warnings + second.warnings))
    first.runtime["sessions"] = len(sides)
    return band_of(result.ratio(second_side, first_side)[1])


def bench_artifact(
    artifact: str | Path | Artifact,
    *,
    device: str | Any = DEFAULT_DEVICE,
    threads: int = 1,
    protocol: Protocol | None = None,
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
