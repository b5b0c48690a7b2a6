"""``edgekit eval``, ``edgekit bench`` and ``edgekit check``: accuracy, latency and the gates on
them. A command names no device: it passes the device's name and options to the API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from edgekit.cli import views
from edgekit.cli.app import app
from edgekit.cli.console import console
from edgekit.cli.options import (
    TUNED,
    AcrossOption,
    ArtifactsArgument,
    BudgetOption,
    CpuOption,
    DataOption,
    DeviceOption,
    ForeignOptions,
    HistoryOption,
    JsonOption,
    NoiseGuardOption,
    PrecisionOption,
    RoundsOption,
    RuntimeOptionsOption,
    SerialOption,
    SessionGapOption,
    SessionsOption,
    WeightsOption,
    XnnpackOption,
    check_budget,
    parse_precision,
    parse_threads,
    resolve_artifacts,
    resolve_device,
    tuned_thread_count,
    with_foreign_options,
    with_runtime_options,
)
from edgekit.devices import DEFAULT_DEVICE
from edgekit.errors import EdgekitError, GateFailed, UserInputError

if TYPE_CHECKING:
    from edgekit.measure.memory_gates import MemoryBounds


@app.command("eval")
@with_foreign_options
def eval_command(
    artifacts: ArtifactsArgument = None,
    data: DataOption = "digits",
    device: DeviceOption = DEFAULT_DEVICE,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="with no artifact: evaluate this source model"),
    ] = None,
    weights: WeightsOption = None,
    threads: Annotated[int, typer.Option("--threads")] = 1,
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = None,
    serial: SerialOption = None,
    as_json: JsonOption = False,
    foreign: ForeignOptions = None,
) -> None:
    """Accuracy of artifacts against the baseline on the evaluation split (or of a source model).
    A file edgekit did not make is described from itself and the flags (see --layout)."""
    from edgekit.measure.accuracy import evaluate_artifact, evaluate_source

    if artifacts and weights is not None:
        raise UserInputError("--weights applies to a source model (--model), not to artifacts")
    if not artifacts:
        result = evaluate_source(
            model or "digits-mobilenet", data=data, foreign=foreign, weights=weights
        )
        if as_json:
            print(json.dumps(result, indent=2))
            return
        top5 = f", top-5 {100 * result['top5']:.2f} %" if "top5" in result else ""
        console.print(
            f"{result['model']} on {result['dataset']} (evaluation split, "
            f"{result['samples']} images): top-1 {100 * result['top1']:.2f} %{top5}  "
            f"\\[weights {result['digest'][:12]}]"
        )
        return
    from edgekit.cli.outcome import FAILED, UNAVAILABLE, Missing, finish
    from edgekit.errors import DeviceUnavailable

    where = resolve_device(device, serial, cpu, xnnpack)
    loaded = resolve_artifacts(artifacts, foreign)
    records, missing = [], []
    for artifact in loaded:  # one file the device refuses or that crashes: the rest go on
        try:
            records.append(evaluate_artifact(artifact, data=data, device=where, threads=threads))
        except EdgekitError as exc:
            if isinstance(exc, UserInputError):
                raise
            kind = UNAVAILABLE if isinstance(exc, DeviceUnavailable) else FAILED
            item = f"{artifact.path.name} on {where.name}"
            missing.append(Missing(item, str(exc).removeprefix(f"{item}: "), kind, where.name))
    if as_json:
        print(json.dumps([record.to_dict() for record in records], indent=2))
    elif records:
        views.accuracy(records)
    finish("evaluated", missing, asked=len(loaded), done_on={where.name} if records else ())


@app.command()
@with_foreign_options
def bench(
    artifacts: ArtifactsArgument = None,
    device: DeviceOption = DEFAULT_DEVICE,
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = None,
    threads: Annotated[
        str | None,
        typer.Option("--threads", help="thread counts, e.g. 1,2 (default: the tuned count, or 1)"),
    ] = None,
    runtime_options: RuntimeOptionsOption = TUNED,
    serial: SerialOption = None,
    warmup: Annotated[int, typer.Option("--warmup")] = 10,
    min_runs: Annotated[int, typer.Option("--min-runs")] = 50,
    min_seconds: Annotated[float, typer.Option("--min-seconds")] = 1.0,
    rounds: RoundsOption = 9,
    sessions: SessionsOption = 3,
    session_gap: SessionGapOption = 0.0,
    precision: PrecisionOption = "5%",
    budget_s: BudgetOption = 90.0,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="measure the source model too")
    ] = True,
    noise_guard: NoiseGuardOption = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds per measurement")] = 600.0,
    as_json: JsonOption = False,
    foreign: ForeignOptions = None,
) -> None:
    """Latency of artifacts on a device, interleaved with each other and the baseline."""
    from edgekit.measure.bench import bench_artifacts
    from edgekit.worker.latency import LatencyProtocol, NoiseGuard, check_session_gap

    if not artifacts:
        raise UserInputError("bench: give one or more artifacts")
    if sessions < 1:
        raise UserInputError(f"bench: --sessions must be >= 1, got {sessions}")
    check_session_gap(session_gap, sessions)
    protocol = LatencyProtocol(
        warmup=warmup,
        min_runs=min_runs,
        min_seconds=min_seconds,
        rounds=rounds,
        sessions=sessions,
        session_gap_s=session_gap,
        precision=parse_precision(precision),
        budget_s=check_budget(budget_s),
    )
    guard = NoiseGuard(enabled=noise_guard)
    where = resolve_device(device, serial, cpu, xnnpack)
    loaded = with_runtime_options(resolve_artifacts(artifacts, foreign), runtime_options,
                                  where.name)  # fmt: skip
    records = []
    for count in parse_threads(threads or tuned_thread_count(loaded, where.name)):
        records += bench_artifacts(
            loaded,
            device=where,
            threads=count,
            protocol=protocol,
            guard=guard,
            sample=None,
            baseline=baseline,
            timeout_s=timeout,
        )
    hints = _hints(records)
    for record in records:
        if record.label in hints:
            record.hints = [hints[record.label]]
    if as_json:
        print(json.dumps([r.to_dict() for r in records], indent=2))
    else:
        views.latency(records)
    _bench_exit(records)


def _leak_run(bounds: MemoryBounds) -> dict[str, Any]:
    """The memory probe's run: 10,000 invokes (a minute at most) for a leak bound, else 2 s."""
    if bounds.max_leak_kb_per_1k is not None:
        return {"invokes": 10_000, "seconds": 60.0}
    return {"seconds": 2.0}


def _hints(records: list) -> dict[str, str]:
    """Why int8/fp16 is not faster than fp32 on the same target, from each file's census."""
    from edgekit.analysis.explain import not_faster_hints

    items = [
        {"label": r.label, "target": r.target, "recipe": r.recipe, "device": r.device,
         "threads": r.threads, "rounds_ms": r.rounds_ms, "noise_band": r.noise_band,
         "round_sessions": r.round_sessions, "latency_fit": r.latency_fit,
         "path": r.artifact}
        for r in records
        if r.status == "ok" and r.artifact and r.traits.get("latency_comparable", True)
    ]  # fmt: skip
    return not_faster_hints(items)


def _bench_exit(records: list) -> None:
    """2 for a file that does not load or a device the user asked for that measured nothing, 1
    for a measurement that failed or a file the device refused, 0 when every one worked."""
    from edgekit.cli.outcome import BAD_INPUT, FAILED, UNAVAILABLE, Missing, finish

    def kind(record: Any) -> str:
        bad = record.runtime.get("error_type") == "UserInputError"
        return BAD_INPUT if bad else UNAVAILABLE if record.status == "unavailable" else FAILED

    missing = [Missing(f"{r.artifact or r.label} on {r.device}", str(r.error), kind(r), r.device)
               for r in records if r.status != "ok"]  # fmt: skip
    finish("measured", missing, asked=len(records),
           done_on={r.device for r in records if r.status == "ok"})  # fmt: skip


@app.command()
@with_foreign_options
def check(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="artifacts, or one run directory")
    ] = None,
    data: DataOption = "digits",
    device: DeviceOption = DEFAULT_DEVICE,
    max_drop: Annotated[float | None, typer.Option("--max-drop", help="points of top-1")] = None,
    min_agreement: Annotated[float | None, typer.Option("--min-agreement", help="fraction")] = None,
    min_sqnr: Annotated[float | None, typer.Option("--min-sqnr", help="dB")] = None,
    point_estimate: Annotated[
        bool, typer.Option("--point-estimate", help="gate the drop itself, not its CI upper bound")
    ] = False,
    max_class_drop: Annotated[
        float | None,
        typer.Option("--max-class-drop", help="points of any one class's top-1 (CI upper bound)"),
    ] = None,
    max_flips: Annotated[
        str | None,
        typer.Option("--max-flips", help="top-1 predictions changed: a count (5) or a share (2%)"),
    ] = None,
    fail_on_collapse: Annotated[
        bool,
        typer.Option("--fail-on-collapse", help="fail when one class takes most predictions"),
    ] = False,
    collapse_share: Annotated[
        float,
        typer.Option("--collapse-share", help="--fail-on-collapse: the top class's share, 0-1"),
    ] = 0.8,
    max_latency_regression: Annotated[
        float | None, typer.Option("--max-latency-regression", help="percent of p50")
    ] = None,
    max_arm_x86_diff: Annotated[
        float | None, typer.Option("--max-arm-x86-diff", help="arm64-emu: max |ARM - x86| logit")
    ] = None,
    max_peak_mb: Annotated[
        float | None,
        typer.Option("--max-peak-mb", help="the model's own share of the peak, above the runtime"),
    ] = None,
    max_size_kb: Annotated[float | None, typer.Option("--max-size-kb", help="the file")] = None,
    max_leak_kb_per_1k: Annotated[
        float | None,
        typer.Option("--max-leak-kb-per-1k", help="resident growth per 1000 invokes (upper CI)"),
    ] = None,
    max_memory_regression: Annotated[
        float | None,
        typer.Option("--max-memory-regression", help="percent of --against's model share"),
    ] = None,
    against: Annotated[
        str,
        typer.Option("--against", help="a reference artifact, or (run dirs) last or a run id"),
    ] = "last",
    across_machines: AcrossOption = False,
    recorded: Annotated[
        bool, typer.Option("--recorded", help="run dirs: compare recorded p50s, do not re-measure")
    ] = False,
    threads: Annotated[int, typer.Option("--threads")] = 1,
    rounds: RoundsOption = 9,
    precision: PrecisionOption = "5%",
    budget_s: BudgetOption = 90.0,
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = None,
    serial: SerialOption = None,
    history: HistoryOption = None,
    as_json: JsonOption = False,
    foreign: ForeignOptions = None,
) -> None:
    """Exit 1 when accuracy drop, a class's drop, flips, a collapse, agreement, SQNR, latency
    or memory breaks a bound; 2 on bad input."""
    from edgekit.measure.accuracy import evaluate_artifact
    from edgekit.measure.gates import (
        accuracy_gates,
        device_vs_host_gate,
        latency_regression,
        run_accuracy_gates,
        run_latency_gates,
    )
    from edgekit.measure.memory import MemoryRecord, measure_memory
    from edgekit.measure.memory_gates import MemoryBounds, memory_gates, run_memory_gates
    from edgekit.measure.prediction_gates import (
        FlipBound,
        PredictionBounds,
        prediction_gates,
        run_prediction_gates,
    )
    from edgekit.worker.latency import LatencyProtocol

    if not paths:
        raise UserInputError("check: give one or more artifacts, or a run directory")
    predictions = PredictionBounds(
        max_class_drop=max_class_drop,
        max_flips=None if max_flips is None else FlipBound.parse(max_flips),
        fail_on_collapse=fail_on_collapse,
        point_estimate=point_estimate,
        collapse_share=collapse_share,
    )
    memory = MemoryBounds(max_peak_mb, max_size_kb, max_leak_kb_per_1k, max_memory_regression)
    bounds = (max_drop, min_agreement, min_sqnr, max_latency_regression, max_arm_x86_diff,
              max_peak_mb, max_size_kb, max_leak_kb_per_1k, max_memory_regression)  # fmt: skip
    if all(bound is None for bound in bounds) and not predictions.any:
        raise UserInputError(
            "check: give at least one bound (--max-drop, --max-class-drop, --max-flips, "
            "--fail-on-collapse, --min-agreement, --min-sqnr, --max-latency-regression, "
            "--max-arm-x86-diff, --max-peak-mb, --max-size-kb, --max-leak-kb-per-1k, "
            "--max-memory-regression)"
        )
    protocol = LatencyProtocol(rounds=rounds, precision=parse_precision(precision),
                        budget_s=check_budget(budget_s))  # fmt: skip
    results = []
    if len(paths) == 1 and paths[0].is_dir():
        from edgekit.report.history import resolve_run
        from edgekit.results import load_results

        run = load_results(paths[0])
        if memory.max_leak_kb_per_1k is not None or memory.max_memory_regression is not None:
            raise UserInputError(
                "--max-leak-kb-per-1k and --max-memory-regression gate artifacts; a run "
                "directory takes --max-peak-mb and --max-size-kb"
            )
        results += run_memory_gates(run, memory)
        results += run_accuracy_gates(
            run, max_drop, min_agreement, min_sqnr, point_estimate=point_estimate
        )
        results += run_prediction_gates(run, predictions)
        if max_latency_regression is not None:
            earlier = resolve_run(against, history, exclude=run.run["id"])
            results += run_latency_gates(run, paths[0], earlier, max_latency_regression,
                                         history=history, across_machines=across_machines,
                                         remeasure=not recorded, protocol=protocol)  # fmt: skip
    else:
        accuracy_bounds = (max_drop, min_agreement, min_sqnr, max_arm_x86_diff)
        where = resolve_device(device, serial, cpu, xnnpack)
        reference = None
        if max_latency_regression is not None or max_memory_regression is not None:
            if against == "last":
                given = "--max-latency-regression"
                if max_latency_regression is None:
                    given = "--max-memory-regression"
                raise UserInputError(
                    f"{given} on an artifact needs --against REFERENCE (an artifact file), or "
                    "give a run directory"
                )
            (reference,) = resolve_artifacts([against], foreign)  # once, for every candidate
        reference_memory = None
        if max_memory_regression is not None:
            reference_memory = measure_memory(reference, where, threads=threads)
        for artifact in resolve_artifacts(paths, foreign):
            if memory.measured:
                measured = measure_memory(artifact, where, threads=threads, **_leak_run(memory))
                results += memory_gates(measured, artifact.manifest.file.size, memory,
                                        reference_memory)  # fmt: skip
            elif memory.max_size_kb is not None:
                unmeasured = MemoryRecord(artifact.label, where.name, threads)
                results += memory_gates(unmeasured, artifact.manifest.file.size, memory)
            if reference is not None and max_latency_regression is not None:
                results.append(latency_regression(
                    artifact, reference, max_latency_regression, device=where, threads=threads,
                    protocol=protocol, guard=None,
                ))  # fmt: skip
            if all(bound is None for bound in accuracy_bounds) and not predictions.any:
                continue
            record = evaluate_artifact(artifact, data=data, device=where, threads=threads)
            if max_arm_x86_diff is not None:
                results.append(device_vs_host_gate(record, max_arm_x86_diff))
            results += accuracy_gates(
                record, max_drop, min_agreement, min_sqnr, point_estimate=point_estimate
            )
            results += prediction_gates(record, predictions)
    if not results:
        raise UserInputError("check: nothing to gate (no measured rows)")
    failed = [r for r in results if not r.passed]
    if as_json:
        print(json.dumps({"passed": not failed, "gates": [r.to_dict() for r in results]}, indent=2))
    else:
        views.gates(results)
    if failed:
        raise GateFailed(f"{len(failed)} of {len(results)} gate(s) failed")
