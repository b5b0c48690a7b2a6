"""The run's per-layer section and hints: the host-CPU artifacts of ``edgekit run`` profiled
(reusing the timings of their interleaved pool, so the run is not timed twice), and one hint on
every int8/fp16 row that is not faster than its target's fp32 row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.artifacts.artifact import Artifact
from edgekit.common.progress import Progress
from edgekit.devices import DEFAULT_DEVICE
from edgekit.errors import EdgekitError
from edgekit.records import Timing
from edgekit.results import Row


def profile_run(
    exported: list[Artifact], rows: list[Row], threads: int, runs: int, say: Progress
) -> list[dict[str, Any]]:
    """Profiles (as dicts for results.json) of the artifacts timed on the host CPU."""
    from edgekit.analysis.profile import profile_artifacts

    by_file = {
        Path(str(row.artifact)).name: row
        for row in rows
        if row.kind == "artifact"
        and row.device == DEFAULT_DEVICE
        and row.threads == threads
        and row.ok
        and row.artifact
    }
    chosen = [a for a in exported if a.path.name in by_file and profiles_itself(a.target)]
    if not chosen:
        return []
    timed = {str(a.path): Timing.of_row(by_file[a.path.name]) for a in chosen}
    try:
        profiles = profile_artifacts(chosen, threads, runs, timed=timed, progress=say)
    except EdgekitError as exc:  # a profiler that fails costs the section, not the run
        say(f"profile skipped: {exc}")
        return []
    # each profile names its file as the rows do, relative to the run directory: the folder it
    # was profiled in is the run's temporary one, renamed when the run ends
    return [
        {**profile.to_dict(), "artifact": str(by_file[Path(profile.artifact).name].artifact)}
        for profile in profiles
    ]


def profiles_itself(target: str) -> bool:
    """The target reads its op census and runs its runtime's profiler (a plugin may not)."""
    from edgekit.targets import get_target

    kind = get_target(target)
    return kind.has_role("profile") and kind.has_role("census")


def hint_rows(rows: list[Row], run_dir: Path) -> None:
    """Row.hints for int8/fp16 rows not faster than fp32 on the same target and pool."""
    from edgekit.analysis.explain import not_faster_hints

    items = [
        {
            "label": row.label,
            "target": row.target,
            "recipe": row.recipe,
            "device": row.device,
            "threads": row.threads,
            "rounds_ms": row.rounds_ms,
            "noise_band": row.noise_band,
            "round_sessions": row.round_sessions,
            "latency_fit": row.latency_fit,
            "path": run_dir / str(row.artifact),
        }
        for row in rows
        if row.kind == "artifact" and row.ok and row.artifact and row.latency_comparable
    ]
    lines = not_faster_hints(items)
    for row in rows:
        if row.label in lines:
            row.hints.append(lines[row.label])
