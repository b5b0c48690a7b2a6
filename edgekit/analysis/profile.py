"""``edgekit profile``: where the time of each artifact goes, layer by layer, named by the source
model's torch module paths (the names ``quantize-debug`` and ``--keep-float`` use), so that the
three runtimes line up row by row.

Each op's time comes from the runtime's own profiler (``edgekit.targets.profiling``), is
put on the file's op census, and ops are summed per layer: a conv/linear layer of the source
(``block2.dw``) where the op's module path falls inside one, else the module itself (a residual
``add`` of ``block2``), else a group named by what the ops do (``(quantize/dequantize)``,
``(layout and data movement)``). The whole-model p50 comes from the same artifacts timed
interleaved (``edgekit bench``'s protocol), and every profile says how its layer times compare
with it: what the ops do not account for is the runtime's per-invoke overhead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from edgekit.artifacts.artifact import Artifact, as_artifact
from edgekit.errors import EdgekitError
from edgekit.records import ArtifactProfile, LayerTime, Timing
from edgekit.targets import get_target
from edgekit.targets.census import Census
from edgekit.targets.profiling import DATA_GROUP, QUANT_GROUP, OpTimes, Placed, family, place
from edgekit.worker.latency import LatencyProtocol, NoiseGuard

if TYPE_CHECKING:
    from collections.abc import Callable

    from edgekit.common.progress import Progress
    from edgekit.targets.census import CensusOp

TOP_OPS = 5


def profile_artifacts(
    artifacts: list[str | Path | Artifact],
    threads: int = 1,
    runs: int = 50,
    warmup: int = 10,
    *,
    protocol: LatencyProtocol | None = None,
    progress: Progress | None = None,
    timed: dict[str, Timing] | None = None,
) -> list[ArtifactProfile]:
    """Profile every artifact on the host CPU and time them interleaved; explain each against
    the same target's fp32 artifact where one is among them. ``timed`` gives, per artifact
    path, a latency record already measured in one pool (``edgekit run``'s): not re-timed."""
    from edgekit.analysis.explain import explain_all

    say = progress or (lambda message: None)
    loaded = [as_artifact(a) for a in artifacts]
    if timed is None:
        from edgekit.devices import DEFAULT_DEVICE
        from edgekit.measure.bench import bench_artifacts

        say(f"timing {len(loaded)} artifact(s) interleaved")
        measured = bench_artifacts(
            loaded,
            device=DEFAULT_DEVICE,
            threads=threads,
            protocol=protocol or LatencyProtocol(rounds=10, precision=None),
            guard=NoiseGuard(enabled=False),
            baseline=False,
        )
        records = [Timing.of(record) for record in measured]
        # why a file has no whole-model time: edgekit profile names it in its summary line
        untimed = {str(a.path): f"not timed: {r.error}"
                   for a, r in zip(loaded, measured, strict=False) if r.status != "ok"}  # fmt: skip
    else:
        records, untimed = [timed[str(artifact.path)] for artifact in loaded], {}
    profiles, details = [], {}
    layer_names: dict[str, list[str]] = {}
    for artifact, record in zip(loaded, records, strict=False):
        say(f"profiling {artifact.label}")
        census = get_target(artifact.target).census(artifact.path, artifact.manifest)
        try:
            times = get_target(artifact.target).profile(
                artifact.path, artifact.manifest, threads, runs, warmup
            )
        except EdgekitError as exc:  # one file the profiler cannot run: said, the rest go on
            times = OpTimes(method=f"not profiled: {exc}", events=[], runs=0)
        total = record.stats.get("p50_ms") if record.status == "ok" else None
        placed = place(census, times)
        details[str(artifact.path)] = (census, placed)
        # one source model load per model, however many of its artifacts are profiled
        source = artifact.manifest.source
        key = json.dumps({} if source is None else source.to_dict(), sort_keys=True)
        if key not in layer_names:
            layer_names[key] = source_layers(artifact)
        names = layer_names[key]
        layers = layers_of(census, placed, times, names, total)
        top = sorted(placed, key=lambda entry: -entry.ms)[:TOP_OPS] if times.events else []
        top_ops = [
            {
                "op": entry.name,
                "ms": entry.ms,
                "layer": layers_of(census, [entry], times, names, total)[0].name,
            }
            for entry in top
        ]
        profiles.append(
            ArtifactProfile(
                artifact=str(artifact.path),
                label=artifact.label,
                target=artifact.target,
                recipe=artifact.recipe,
                total_ms=total,
                layers=layers,
                method=times.method,
                ops_ms=sum(layer.ms for layer in layers),
                profiler_run_ms=times.run_ms,
                rounds_ms=list(record.rounds_ms),
                round_sessions=list(record.round_sessions),
                noise_band=record.noise_band,
                latency_fit=record.latency_fit,
                notes=[
                    *([untimed[key]] if (key := str(artifact.path)) in untimed else []),
                    *census.notes[:1],
                    *times.notes,
                    *_mapping_notes(census, artifact),
                ],
                top_ops=top_ops,
            )
        )
    from edgekit.common.machine import fingerprint

    explain_all(profiles, details, list(fingerprint().get("isa", [])))
    return profiles


def source_layers(artifact: Artifact) -> list[str]:
    """The conv/linear layers of the artifact's torch source (none for a foreign file or an
    ONNX source: then an op's module path is its layer)."""
    source = artifact.manifest.source
    if source is None or not source.spec or source.framework != "torch":
        return []
    from edgekit.quantize.layers import find_layers
    from edgekit.sources.load import reload_model

    try:
        return [layer.name for layer in find_layers(reload_model(source.to_dict()).module)]
    except Exception:  # a source that no longer loads: the op module paths still name layers
        return []


def layers_of(
    census: Census,
    placed: list[Placed],
    times: OpTimes,
    names: list[str],
    total_ms: float | None,
) -> list[LayerTime]:
    """Ops summed into layers, in the order the runtime ran them."""
    from edgekit.quantize.layers import layer_of

    if not times.events:  # the profiler did not run: no layer times to claim
        return []
    groups: dict[str, list[Placed]] = {}
    for entry in placed:
        op = census.ops[entry.index] if entry.index is not None else None
        groups.setdefault(_group(op, entry, names, layer_of), []).append(entry)
    method = times.method.split(",")[0]
    summed = {name: sum(e.ms for e in entries) for name, entries in groups.items()}
    profiled = sum(summed.values())
    layers = []
    for name, entries in groups.items():
        share = summed[name] / profiled if profiled > 0 else 0.0
        layers.append(
            LayerTime(
                name=name,
                ms=summed[name],
                share=share,
                ops=[e.name for e in entries],
                method=method,
                p50_ms=share * total_ms if total_ms else None,
            )
        )
    return layers


def _group(
    op: CensusOp | None,
    entry: Placed,
    names: list[str],
    layer_of: Callable[[str, list[str]], str | None],
) -> str:
    kind = op.kind if op is not None else family(entry.name)
    if kind == "quant":
        return QUANT_GROUP
    module = op.module if op is not None else None
    if module:
        return layer_of(module, names) or module
    if kind == "data" or "transpose" in entry.name.lower():
        return DATA_GROUP
    return f"({entry.name})"


def _mapping_notes(census: Census, artifact: Artifact) -> list[str]:
    compute = [op for op in census.ops if op.kind == "mac"]
    unnamed = [op for op in compute if not op.module]
    if compute and unnamed:
        return [
            f"{len(unnamed)} of {len(compute)} conv/matmul ops carry no module path in "
            f"{artifact.path.name}: named by their op"
        ]
    return []
