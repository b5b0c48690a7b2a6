"""``edgekit run``: the whole matrix (targets x recipes x devices x threads) plus the baseline,
measured in one run, into a run directory with results.json, the report files and a history
record. ``run_matrix`` called from Python produces exactly what ``edgekit run`` produces.

A failed row (an export error, a crash, a timeout, a device that is not available) is recorded
with its reason and the run goes on. The run directory is built under a hidden temporary name
and renamed into place at the end, so an interrupted run leaves no partial directory."""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.artifacts.artifact import Artifact
from edgekit.common.fileio import journal, write_json_atomic
from edgekit.common.machine import fingerprint
from edgekit.common.progress import Progress
from edgekit.errors import EdgekitError, UserInputError, renamed
from edgekit.measure.peak import MachinePeaks, arithmetic_of, shares_of
from edgekit.report import render_report
from edgekit.report.history import record_run
from edgekit.report.recommend import Recommendation
from edgekit.report.tables import device_reason
from edgekit.results import RESULTS_SCHEMA_VERSION, Results, Row
from edgekit.run.config import RunConfig
from edgekit.run.executor import Executor, Exported, LocalExecutor
from edgekit.run.subject import Subject, subjects
from edgekit.sources.source import SourceModel
from edgekit.targets import runtime_versions

if TYPE_CHECKING:
    from edgekit.artifacts.foreign import ForeignOptions


@dataclass
class RunResult:
    run_dir: Path
    results: Results
    report: dict[str, Path]
    recommendations: dict[str, Recommendation]  # model -> its recommendation, in run order

    @property
    def recommendation(self) -> Recommendation:
        """The first model's (the only one, in a single-model run)."""
        return next(iter(self.recommendations.values()))

    @property
    def failed(self) -> list[Row]:
        return [row for row in self.results.rows if row.status == "failed"]

    @property
    def unavailable(self) -> list[Row]:
        return [row for row in self.results.rows if row.status == "unavailable"]


def run_matrix(
    config: RunConfig,
    *,
    progress: Progress | None = None,
    history: Path | None = None,
    foreign: ForeignOptions | None = None,
    executor: Executor | None = None,
) -> RunResult:
    """Export, validate, evaluate and benchmark every combination; write the run directory,
    its report and its history record; return them with the recommendation.

    ``config.model`` names one model or several (``a,b,c``: one report, a section per model);
    a model may be a file another tool made: an ``.onnx`` is a source model (exported to every
    target); a ``.tflite`` or ``.pte`` is measured as it is on every device (copied into the
    run directory; ``foreign`` says what the file cannot). ``executor`` runs the cells: this
    process (None), or a cluster (``edgekit.cluster.executor.ClusterExecutor``)."""
    config.validate()
    say = progress or (lambda message: None)
    models = subjects(config, foreign)
    created = datetime.now(UTC)
    name = config.name or "+".join(model.name for model in models)[:60]
    final = Path(config.runs_dir) / f"{created.strftime('%Y%m%d-%H%M%S')}-{name}"
    if final.exists():
        raise EdgekitError(f"{final}: a run directory of that name exists already")
    partial = final.with_name(f".{final.name}.partial")
    (partial / "artifacts").mkdir(parents=True)
    journal(partial)
    try:
        for model in models:
            if model.given is not None:
                copy = partial / "artifacts" / model.given.path.name
                shutil.copy2(model.given.path, copy)
                model.given = Artifact(copy, model.given.manifest)
        results = measure_models(
            config, models, partial, run_id=final.name, created=created, say=say, executor=executor
        )
        write_json_atomic(partial / "results.json", results.to_dict())
        say("report")
        advice = render_report(results, partial).recommendations
        if config.golden:  # bundles of the recommended files, then the report that links them
            from edgekit.run.golden import add_golden

            advice = add_golden(results, partial, models, config, advice, say)
        partial.rename(final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return finish(results, final, history, advice)


def finish(
    results: Results, run_dir: Path, history: Path | None, advice: dict[str, Recommendation]
) -> RunResult:
    """The run recorded in its history; ``advice``: the recommendations its report holds."""
    record_run(results, run_dir, history)
    report = {key: run_dir / f"report.{key}" for key in ("md", "html", "json")}
    return RunResult(run_dir, results, report, advice)


def measure_models(
    config: RunConfig,
    models: list[Subject],
    run_dir: Path,
    *,
    run_id: str,
    created: datetime,
    say: Progress,
    executor: Executor | None = None,
    keep: list[Row] | None = None,
) -> Results:
    """Every model's cells (``keep``: rows a resumed run already has), merged into one
    results file: one row per artifact x device x threads, one baseline per model and pool."""
    from edgekit.run.profile import hint_rows

    executor = executor or LocalExecutor()
    skipped = executor.absent_devices(config.devices)
    for name, why in skipped.items():
        say(f"skipping device {name}: {why}")
    present = [name for name in config.devices if name not in skipped]
    peaks = MachinePeaks.load(config.threads, say)  # cached per machine and thread count
    rows, profiles, infos = list(keep or []), [], []
    started = time.perf_counter()
    made = _export_phase(config, models, run_dir / "artifacts", say, executor)
    phases: dict[str, Any] = {"export_s": time.perf_counter() - started}
    tuning = []
    if config.tune:
        from edgekit.run.tuning import tune_phase

        if not executor.tunes_here:
            raise UserInputError("tune: tuning runs on this machine's CPU, not across a cluster")
        started = time.perf_counter()
        tuning = tune_phase(config, made, present, say)
        phases["tune_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for model in models:
        settings = replace(config, model=model.spec, data=model.data, devices=present)
        exported, failed = made[model.spec]
        mine = list(failed)
        for pool in executor.device_pools(settings, model, exported, say):
            profiles += pool.profiles
            for row in pool.rows:
                # each device pool interleaves its own baseline; the report keeps the first one
                if row.kind == "baseline" and any(
                    r.kind == "baseline" and r.threads == row.threads for r in mine
                ):
                    continue
                mine.append(row)
        macs = _macs(model.source, model.given)
        for row in mine:
            row.model = row.model or model.name
            _derive(row, peaks, macs)
        rows += mine
        infos.append((model.info(macs), model.data_info()))
    phases["devices_s"] = time.perf_counter() - started
    phases["exports"] = list(executor.timings)
    hint_rows(rows, run_dir)
    run = {
        "id": run_id,
        "name": config.name or "+".join(info["name"] for info, _ in infos),
        "created": created.isoformat(timespec="seconds"),
        "model": infos[0][0],
        "data": infos[0][1],
        "models": [{**info, "data": data} for info, data in infos],
        "config": asdict(config),
        "machine": fingerprint(versions=runtime_versions()),
        "peaks": peaks.figures(),  # as raised by this run's rows
        "peak_kernels": peaks.kernels(),  # what gave each peak: a kernel, or a row
        "absent_devices": absent_devices(config.devices, rows, skipped),
        "profiles": profiles,
        "phases": phases,  # where the run's wall time went: exports, then the device pools
        "flips_across": flips_across(rows),
        "tuning": tuning,  # run --tune: each artifact's search, default against tuned
    }
    return Results(run, rows, RESULTS_SCHEMA_VERSION)


def absent_devices(
    devices: list[str], rows: list[Row], skipped: dict[str, str]
) -> dict[str, dict[str, str]]:
    """The devices of the run on which no row could run here (``skipped``: those the machine
    lacks altogether, measured not at all): why, and how to add one."""
    from edgekit.devices import device_class

    absent = {}
    for name in devices:
        mine = [row for row in rows if row.device == name and row.kind == "artifact"]
        if name in skipped:
            absent[name] = {"reason": skipped[name], "how_to_add": device_class(name).how_to_add}
        elif mine and all(row.status == "unavailable" for row in mine):
            absent[name] = {
                "reason": device_reason(mine[0]),
                "how_to_add": device_class(name).how_to_add,
            }
    return absent


def _export_phase(
    config: RunConfig, models: list[Subject], out_dir: Path, say: Progress, executor: Executor
) -> dict[str, Exported]:
    """Every model's exports, by model spec, all handed to the executor at once (a cluster
    spreads them over its nodes); a file given as it is has none."""
    wanted = [m for m in models if m.given is None]
    jobs = [(replace(config, model=m.spec, data=m.data), m) for m in wanted]
    made = dict(
        zip([m.spec for m in wanted], executor.export_many(jobs, out_dir, say), strict=True)
    )
    made.update({m.spec: ([m.given], []) for m in models if m.given is not None})
    return made


def _derive(row: Row, peaks: MachinePeaks, macs: int | None) -> None:
    """Achieved GFLOP/s (GOP/s) and the share of the machine's peak of the arithmetic that runs:
    int8 where most compute ops run in int8, fp16 where most MACs compute in float16, fp32
    otherwise. A row faster than the peak raises it (``MachinePeaks.place``)."""
    p50 = row.p50
    if p50 is None or not macs:
        return
    row.gflops = 2 * macs / (p50 / 1e3) / 1e9
    row.peak_kind = arithmetic_of(row.recipe, *shares_of(row.audit))
    if row.traits.get("where") == "host" and row.latency_comparable:
        peaks.place(row)


def _macs(source: SourceModel | None, given: Artifact | None = None) -> int | None:
    """Multiply-accumulates of one inference: counted on the torch module, else read from the
    file's op census (an ONNX source, a file given as it is)."""
    if source is None or source.framework != "torch":
        from edgekit.targets import get_target, target_for_suffix

        path = given.path if source is None else Path(source.spec)
        name = target_for_suffix(path.suffix)
        if name is None:  # a Keras source: no census of a .keras file
            return None
        return sum(op.macs for op in get_target(name).census(path).ops) or None
    import torch

    from edgekit.sources.architectures import count_macs

    return count_macs(source.module, torch.from_numpy(source.example_input()))


def matrix_summary(result: RunResult) -> dict[str, Any]:
    """What the CLI prints after a run (and ``--json`` gives)."""
    return {
        "run_dir": str(result.run_dir),
        "recommendation": result.recommendation.summary
        if len(result.recommendations) == 1
        else "one per model: see recommendations",
        "recommendations": {model: r.summary for model, r in result.recommendations.items()},
        "failed": [row.label for row in result.failed],
        "unavailable": [row.label for row in result.unavailable],
        "report": {key: str(path) for key, path in result.report.items()},
    }


def flips_across(rows: list[Row]) -> dict[str, Any]:
    """Per model: do the same images flip on every runtime and device that flips any? (Each
    model's indices are into its own evaluation split.)"""
    from edgekit.measure.flips import shared_flips

    by_model: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        flips = None if row.accuracy is None else row.accuracy.flips
        if row.kind == "artifact" and flips and flips["indices"]:  # what flipped nothing is out
            # one entry per artifact and device: its thread counts share one evaluation
            by_model.setdefault(str(row.model), {})[row.label.rsplit(" x", 1)[0]] = flips["indices"]
    return {model: shared_flips(flipped) for model, flipped in by_model.items()}


# the old name, for one release (``measure`` read as another thing of the same name)
__getattr__ = renamed(__name__, {"measure": "measure_models"})
