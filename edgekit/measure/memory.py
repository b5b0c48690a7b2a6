"""What an artifact needs in memory at run time, in parts that add up: the process's peak while
it invokes, the runtime's floor (the same runtime with the target's trivial model loaded), the
model's own share above that floor, and in it the file, what the runtime plans for activations
(where its API or file format tells) and the residual, named; what stays after the session is
released; and the resident set over many invokes as a slope with an interval (a leak).

Measured in a child of its own (``edgekit.worker.memory``), apart from the timing sessions."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.artifacts.artifact import Artifact
from edgekit.errors import EdgekitError, first_line
from edgekit.records import MemoryRecord
from edgekit.targets import get_target
from edgekit.worker.parent import WorkerProcess, trivial_fields

if TYPE_CHECKING:
    from edgekit.devices.base import Device

MB = 1024.0  # the probe reports kB


PAGE_KB = 4.0
LEAK_FLOOR_KB_PER_1K = PAGE_KB  # one page per 1000 invokes: see leak_slope
# the first quarter of the samples is left out: a session's allocators settle over its first
# blocks (a timing session of the default model grew 24-36 kB over its first three, then
# nothing), and that is no leak
SETTLING = 4
MIN_SAMPLES = 5  # fewer settled samples than this: no verdict


def leak_slope(samples: list[list[int]]) -> tuple[float, list[float]] | None:
    """kB per 1000 invokes and its 95 % interval (Theil-Sen: a one-off step, an allocator
    taking a page once, moves it far less than steady growth). A leak is a slope whose interval
    lies above ``LEAK_FLOOR_KB_PER_1K``: the resident set moves in whole pages, and a real
    onnxruntime session of the default model grew 0.7 kB per 1000 invokes [0.5, 0.9] over
    10,000 invokes (allocator arenas settling; an Intel Xeon VM), which no user calls a leak."""
    settled = samples[max(1, len(samples) // SETTLING) :]
    if len(settled) < MIN_SAMPLES:
        return None
    from scipy.stats import theilslopes

    invokes = [float(index) for index, _ in settled]
    resident = [float(kb) for _, kb in settled]
    slope, _, low, high = theilslopes(resident, invokes, alpha=0.95)
    return 1000.0 * float(slope), [1000.0 * float(low), 1000.0 * float(high)]


def measure_memory(
    artifact: Artifact,
    device: Device,
    *,
    threads: int = 1,
    seconds: float = 2.0,
    invokes: int = 10_000,
    points: int = 40,
    warmup: int = 10,
    timeout_s: float = 600.0,
) -> MemoryRecord:
    """``artifact``'s memory on ``device`` (a Device) in a child of its own: its parts, and the
    resident set over as many invokes as fit in ``seconds`` (at most ``invokes``, sampled at
    ``points`` moments). ``bench`` gets the same parts from its timing sessions."""
    if not device.tells_memory:
        return cannot_tell(
            artifact.label,
            device.name,
            threads,
            device.no_memory_probe
            or f"{device.name}: edgekit's memory probe runs "
            "on the host's devices (bench reports what a device's own sessions "
            "tell)",
        )
    request = {
        "mode": "memory",
        "what": "artifact",
        "artifact": str(artifact.path),
        "manifest": artifact.manifest.to_dict(),
        "accelerator": device.accelerator.value,
        "threads": threads,
        "session_options": device.session_options(artifact),
        "input": None,
        "warmup": warmup,
        "seconds": seconds,
        "invokes": invokes,
        "points": points,
        **trivial_fields(artifact.target),
    }
    worker = WorkerProcess(request, timeout_s)
    try:
        figures = worker.receive()
    except EdgekitError as exc:
        record = MemoryRecord(artifact.label, device.name, threads, "failed")
        record.error = f"{Path(artifact.path).name}: {first_line(exc)}"
        return record
    finally:
        worker.close()
    return memory_record(
        artifact.label, device.name, threads, figures, path=artifact.path, target=artifact.target
    )


def cannot_tell(label: str, device: str, threads: int, why: str | None = None) -> MemoryRecord:
    why = why or f"{device} cannot tell memory in this edgekit (the host CPU can)"
    return MemoryRecord(label, device, threads, "unavailable", why)


@functools.cache
def _planned(path: str, target: str, size: int, mtime: float) -> tuple[int | None, str]:
    """What the runtime plans for the file: from the manifest beside it where the export
    recorded it, else from the file (cached per file and version of it)."""
    import json

    from edgekit.artifacts.artifact import manifest_path

    details = None
    with contextlib.suppress(OSError, ValueError):
        details = json.loads(manifest_path(Path(path)).read_text()).get("details")
    planned = get_target(target).planned_memory(Path(path), details)
    return planned.bytes, planned.source


def leak_floor(samples: list[list[int]], *, timing_session: bool) -> float:
    """The growth (kB per 1000 invokes) a slope must surely exceed to be called a leak. A timing
    session replies after every block, and that harness may take a page per block while its
    allocators settle (ExecuTorch's session of the default model grew exactly 4 kB per block
    for seven blocks on an Intel Xeon VM, then stopped): there, more than one page per block."""
    if not timing_session or len(samples) < 2:
        return LEAK_FLOOR_KB_PER_1K
    per_sample = (samples[-1][0] - samples[0][0]) / (len(samples) - 1)
    return max(LEAK_FLOOR_KB_PER_1K, 2 * PAGE_KB * 1000.0 / max(per_sample, 1.0))


def memory_record(
    label: str,
    device: str,
    threads: int,
    figures: dict[str, Any],
    *,
    path: str | Path,
    target: str,
    timing_session: bool = False,
) -> MemoryRecord:
    """The parts from a session's figures (kB, from ``edgekit.worker.memory``) and the file's
    own facts: its size, and what its runtime plans for activations."""
    record = MemoryRecord(label, device, threads)
    size, planned, source = _file_facts(path, target)
    _parts(record, figures, size, planned, source, timing_session=timing_session)
    if figures.get("note"):  # where the figures come from, when not a plain process
        record.notes.append(str(figures["note"]))
    if figures.get("floor_kb") is None:
        record.notes.append(
            f"no trivial {target} model loaded here (none shipped, or it "
            "failed): the floor is the process before the file loaded"
        )
    return record


def _file_facts(path: str | Path, target: str) -> tuple[int, int | None, str]:
    """The file's size (bytes), what its runtime plans for activations and where that says so."""
    stat = Path(path).stat()
    planned, source = _planned(str(path), target, stat.st_size, stat.st_mtime)
    return stat.st_size, planned, source


def dumpsys_record(
    label: str, device: str, threads: int, figures: dict[str, Any], path: str | Path, target: str
) -> MemoryRecord:
    """A phone's runner as ``dumpsys meminfo`` read its process while it ran (figures in kB,
    from ``edgekit.devices.android_memory``): its TOTAL RSS is the process's peak as sampled,
    its TOTAL PSS beside it, and the file's own facts. No trivial model runs
    there, so the floor, the model's share and its residual stay unmeasured (None)."""
    where = f"dumpsys meminfo of the runner's process on {figures['serial']} ({figures['process']})"
    if not figures.get("readings"):
        why = figures.get("failure") or "every run ended before it could be read"
        return cannot_tell(label, device, threads, f"{device}: {where} read nothing: {why}")
    record = MemoryRecord(label, device, threads)
    record.pss_mb = figures["pss_kb"] / MB
    if figures.get("rss_kb") is not None:
        record.process_peak_mb = figures["rss_kb"] / MB
    size, planned, record.planned_source = _file_facts(path, target)
    record.file_mb = size / 2**20
    record.planned_mb = None if planned is None else planned / 2**20
    record.runner_mb = dict(figures.get("runner_mb") or {})
    record.notes.append(
        f"{where}: TOTAL RSS and TOTAL PSS read once, during the runner's "
        "untimed first run; no trivial model runs there, so the runtime's floor, "
        "the model's share and its residual are not measured"
    )
    return record


def _parts(
    record: MemoryRecord,
    figures: dict[str, Any],
    file_bytes: int,
    planned_bytes: int | None,
    planned_source: str,
    *,
    timing_session: bool = False,
) -> None:
    """The parts from the probe's figures (kB) and the file's own facts (bytes)."""
    floor_kb = figures["floor_kb"] if figures["floor_kb"] is not None else figures["before_load_kb"]
    record.process_peak_mb = (figures.get("process_peak_kb") or figures["invoke_peak_kb"]) / MB
    record.floor_mb = floor_kb / MB
    record.model_mb = (figures["invoke_peak_kb"] - floor_kb) / MB
    record.file_mb = file_bytes / 2**20
    record.planned_mb = None if planned_bytes is None else planned_bytes / 2**20
    record.planned_source = planned_source
    record.residual_mb = record.model_mb - record.file_mb - (record.planned_mb or 0.0)
    record.residual_is = (
        "the activations (their plan is not readable here), the runtime's repacked weights "
        "(XNNPACK packs them into its own layout) and the session's own structures"
        if planned_bytes is None
        else "what the plan leaves out (a delegate's own workspace), the runtime's repacked "
        "weights and the session's own structures"
    )
    if record.residual_mb < 0:  # a part larger than the whole: the file was not all read
        record.residual_is = (
            "below zero: part of the file never became resident (the runtime "
            "maps it and reads only the pages it needs)"
        )
    record.load_mb = (figures["loaded_kb"] - figures["before_load_kb"]) / MB
    record.invoke_mb = (figures["invoke_peak_kb"] - figures["loaded_kb"]) / MB
    record.retained_mb = (figures["released_kb"] - floor_kb) / MB
    samples = figures["samples"]
    record.samples = samples
    record.invokes = samples[-1][0] if samples else 0
    slope = leak_slope(samples)
    if slope is not None:
        record.leak_kb_per_1k, record.leak_interval = slope
        record.leak_floor = leak_floor(samples, timing_session=timing_session)
        record.leak = slope[1][0] > record.leak_floor
    if not figures.get("peak_resettable", True):
        record.notes.append(
            "the kernel refused to reset the peak (/proc/self/clear_refs): "
            "each peak is the process's since it started"
        )
