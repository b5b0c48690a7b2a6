"""``edgekit run``, ``report``, ``history`` and ``compare``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from edgekit.cli.app import app
from edgekit.cli.console import console, err_console
from edgekit.cli.options import (
    DATA_HELP,
    MODEL_HELP,
    WEIGHTS_HELP,
    AcrossOption,
    ForeignOptions,
    HistoryOption,
    JsonOption,
    check_budget,
    parse_precision,
    parse_threads,
    renamed,
    with_foreign_options,
)
from edgekit.errors import EdgekitError, UserInputError

if TYPE_CHECKING:
    from collections.abc import Callable

    from edgekit.artifacts.foreign import ForeignOptions as ForeignFlags
    from edgekit.run.config import RunConfig
    from edgekit.run.executor import Executor
    from edgekit.run.matrix import RunResult


@app.command()
@with_foreign_options
def run(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help=MODEL_HELP + "; or a list")
    ] = None,
    data: Annotated[str | None, typer.Option("--data", "-d", help=DATA_HELP)] = None,
    weights: Annotated[
        Path | None, typer.Option("--weights", help=WEIGHTS_HELP + " (one model)")
    ] = None,
    targets: Annotated[str | None, typer.Option("--target", "-t", help="all or a list")] = None,
    recipes: Annotated[str | None, typer.Option("--recipe", "-r", help="all or a list")] = None,
    devices: Annotated[str | None, typer.Option("--device", help="a list, e.g. cpu,gpu")] = None,
    old_targets: Annotated[str | None, typer.Option("--targets", hidden=True)] = None,
    old_recipes: Annotated[str | None, typer.Option("--recipes", hidden=True)] = None,
    old_devices: Annotated[str | None, typer.Option("--devices", hidden=True)] = None,
    threads: Annotated[str | None, typer.Option("--threads", help="e.g. 1,2")] = None,
    max_drop: Annotated[float | None, typer.Option("--max-drop", help="budget in points")] = None,
    name: Annotated[str | None, typer.Option("--name")] = None,
    runs_dir: Annotated[str | None, typer.Option("--runs-dir")] = None,
    serial: Annotated[str | None, typer.Option("--serial")] = None,
    min_runs: Annotated[int | None, typer.Option("--min-runs")] = None,
    min_seconds: Annotated[float | None, typer.Option("--min-seconds")] = None,
    rounds: Annotated[int | None, typer.Option("--rounds", help="interleaved rounds")] = None,
    sessions: Annotated[
        int | None,
        typer.Option("--sessions", help="sessions the rounds are split into (intervals' units)"),
    ] = None,
    session_gap: Annotated[
        float | None,
        typer.Option("--session-gap", help="seconds before each new session (needs --sessions)"),
    ] = None,
    precision: Annotated[
        str | None,
        typer.Option("--precision", help="measure until every interval is within this, e.g. 5%"),
    ] = None,
    budget_s: Annotated[
        float | None, typer.Option("--budget-s", help="seconds of measuring per device pool")
    ] = None,
    accuracy_aware: Annotated[
        bool | None,
        typer.Option(
            "--accuracy-aware/--plain-int8",
            help="int8 keeps harmful layers float to fit --max-drop",
        ),
    ] = None,
    point_estimate: Annotated[
        bool | None, typer.Option("--point-estimate", help="decide on the drop, not its bound")
    ] = None,
    profile: Annotated[
        bool | None,
        typer.Option("--profile/--no-profile", help="the report's per-layer section (host CPU)"),
    ] = None,
    export_cache: Annotated[
        bool | None,
        typer.Option(
            "--export-cache/--no-export-cache",
            help="reuse this machine's earlier exports of the same inputs (edgekit's cache)",
        ),
    ] = None,
    tune: Annotated[
        bool | None,
        typer.Option(
            "--tune/--no-tune",
            help="search each artifact's fastest runtime options "
            "first (edgekit tune); the report shows default against tuned",
        ),
    ] = None,
    tune_budget_s: Annotated[
        float | None,
        typer.Option("--tune-budget-s", help="--tune: seconds for all the searches together"),
    ] = None,
    golden: Annotated[
        bool | None,
        typer.Option(
            "--golden/--no-golden",
            help="write a golden bundle (edgekit golden) of each recommended artifact; the "
            "report links it",
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="edgekit.toml")] = None,
    cluster: Annotated[
        str | None,
        typer.Option("--cluster", help="Ray head HOST:PORT, or local: cells run as Ray tasks"),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="a run directory: run only its failed/missing rows"),
    ] = None,
    shared_dir: Annotated[
        Path | None,
        typer.Option("--shared-dir", help="--cluster: a folder every node sees, for artifacts"),
    ] = None,
    write_config: Annotated[
        Path | None,
        typer.Option("--write-config", help="write these options to a TOML file and stop"),
    ] = None,
    history: HistoryOption = None,
    as_json: JsonOption = False,
    foreign: ForeignOptions = None,
) -> None:
    """Export, validate, evaluate and benchmark the whole matrix; write a run directory + report.
    --model may be an .onnx (a source model) or a .tflite/.pte measured as it is."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from edgekit.devices import parse_devices
    from edgekit.quantize.recipes import parse_recipes
    from edgekit.report.recommend import decision_lines
    from edgekit.report.tuning import tuning_line
    from edgekit.run.config import RunConfig, options_named
    from edgekit.run.matrix import matrix_summary
    from edgekit.targets import parse_targets

    # run's plural spellings, from before every command spelled them alike
    targets = renamed(targets, old_targets, "--targets", "--target")
    recipes = renamed(recipes, old_recipes, "--recipes", "--recipe")
    devices = renamed(devices, old_devices, "--devices", "--device")
    base = RunConfig.from_toml(config) if config else RunConfig()
    given = {
        "model": model,
        "data": data,
        "weights": None if weights is None else str(weights),
        "name": name,
        "runs_dir": runs_dir,
        "serial": serial,
        "max_drop": max_drop,
        "accuracy_aware": accuracy_aware,
        "point_estimate": point_estimate,
        "profile": profile,
        "export_cache": export_cache,
        "tune": tune,
        "tune_budget_s": tune_budget_s,
        "golden": golden,
        "min_runs": min_runs,
        "min_seconds": min_seconds,
        "rounds": rounds,
        "sessions": sessions,
        "session_gap": session_gap,
        "bench_budget_s": None if budget_s is None else check_budget(budget_s),
        "targets": None if targets is None else parse_targets(targets),
        "recipes": None if recipes is None else [r.name for r in parse_recipes(recipes)],
        "devices": None if devices is None else parse_devices(devices),
        "threads": None if threads is None else parse_threads(threads),
    }
    settings = replace(base, **{key: value for key, value in given.items() if value is not None})
    if precision is not None:  # "off" is None: the planned sessions only
        settings = replace(settings, precision=parse_precision(precision))
    settings.validate()
    if write_config is not None:
        from edgekit.common.fileio import write_bytes_atomic

        write_bytes_atomic(write_config, settings.to_toml().encode())
        console.print(f"wrote {write_config}")
        return
    # devices named on the command line or in the config file are asked for; defaults are not
    named = devices is not None or (config is not None and "devices" in options_named(config))
    asked = set(settings.devices) if named else set()
    if settings.tune and cluster is not None:
        raise UserInputError("--tune searches on this machine's CPU; leave out --cluster")
    if cluster is None:
        _refuse_absent(settings.devices, asked)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False, disable=as_json) as progress:
        task = progress.add_task("starting", total=None)

        def say(message: str) -> None:
            progress.update(task, description=message)
            if not message.startswith("round "):
                progress.console.log(message)

        result = _run(settings, say, history, foreign, cluster, shared_dir, resume)
    summary = matrix_summary(result)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        for model, advice in result.recommendations.items():
            named = f" ({model})" if len(result.recommendations) > 1 else ""
            console.print(f"[bold]recommendation{named}:[/] {advice.summary}", soft_wrap=True)
            for line in decision_lines(advice):
                console.print(f"  {line}", soft_wrap=True, highlight=False)
        for record in result.results.run.get("tuning", []):
            console.print(tuning_line(record), soft_wrap=True)
        if result.failed:
            console.print(f"{len(result.failed)} row(s) failed (reasons in the report); the run "
                          "went on past them")  # fmt: skip
        if result.unavailable:
            console.print(f"{len(result.unavailable)} row(s) need a device this machine lacks "
                          "(listed in the report)")  # fmt: skip
        for device, absent in result.results.run.get("absent_devices", {}).items():
            if device not in asked:  # a default device: skipped, named, and how to add it
                console.print(f"skipped device {device} ({absent['reason']}); to add it: "
                              f"{absent['how_to_add']}", soft_wrap=True)  # fmt: skip
        for model, made in result.results.run.get("golden", {}).items():  # run --golden
            where = result.run_dir / made["bundle"] if "bundle" in made else f"none ({made['why']})"
            console.print(f"golden vectors of {model}: {where}", soft_wrap=True, highlight=False)
        console.print(f"report: {result.report['md']}  and  {result.report['html']}")
    _run_exit(result, asked)


def _run(settings: RunConfig, say: Callable[[str], None], history: Path | None,
         foreign: ForeignFlags | None, cluster: str | None, shared_dir: Path | None,
         resume: Path | None) -> Any:  # fmt: skip
    """The run, here or on a cluster; a resumed one runs only what its directory lacks."""
    from edgekit.run.matrix import run_matrix
    from edgekit.run.resume import resume_run

    def go(executor: Executor | None) -> RunResult:
        if resume is not None:
            return resume_run(resume, say, history, executor)
        return run_matrix(
            settings, progress=say, history=history, foreign=foreign, executor=executor
        )

    if cluster is None:
        if shared_dir is not None:
            raise UserInputError("--shared-dir applies to --cluster runs")
        return go(None)
    from edgekit.cluster.connect import connected
    from edgekit.cluster.executor import ClusterExecutor

    with connected(cluster) as ray:
        return go(ClusterExecutor(ray, shared_dir, cluster))


def _refuse_absent(devices: list[str], asked: set[str]) -> None:
    """A device asked for by name that this machine lacks altogether: one line, exit 2, before
    any work (a default device is skipped instead, and named after the run)."""
    from edgekit.devices import device_class
    from edgekit.errors import DeviceUnavailable
    from edgekit.run.executor import LocalExecutor

    for name, why in LocalExecutor().absent_devices([d for d in devices if d in asked]).items():
        raise DeviceUnavailable(
            f"--device {name}: {why}; to add it: {device_class(name).how_to_add}"
        )


def _run_exit(result: object, asked: set[str]) -> None:
    from edgekit.errors import DeviceUnavailable

    # a device the user asked for is missing when nothing at all could run on it
    missing = [
        row
        for row in result.unavailable
        if row.device in asked
        and all(r.status == "unavailable" for r in result.results.rows if r.device == row.device)
    ]
    if missing:
        raise DeviceUnavailable(
            f"{result.run_dir}: device {missing[0].device} was asked for and is not available "
            f"here ({missing[0].error})"
        )
    if result.failed:
        first = result.failed[0]
        error = EdgekitError(
            f"{result.run_dir}: {len(result.failed)} row(s) failed "
            f"(first: {first.label}: {first.error})"
        )
        error.exit_code = 1
        raise error


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a run directory")],
    open_page: Annotated[
        bool, typer.Option("--open", help="then open report.html in the web browser ($BROWSER)")
    ] = False,
) -> None:
    """Rebuild report.md, report.html, report.json and plots from results.json alone."""
    from edgekit.report import build_report

    paths = build_report(run_dir)
    console.print(f"report: {paths['md']}  and  {paths['html']}")
    if open_page:
        import webbrowser

        # the standard library's choice: $BROWSER first, then the desktop's browsers
        if not webbrowser.open(paths["html"].resolve().as_uri()):
            err_console.print(
                f"report: no web browser found here (set BROWSER); open {paths['html']}"
            )


@app.command("history")
def history_command(
    history: HistoryOption = None,
    limit: Annotated[int, typer.Option("--limit")] = 20,
    as_json: JsonOption = False,
) -> None:
    """List the runs in the history database, newest first, with the machine of each."""
    from edgekit.report.history import list_runs

    runs = list_runs(history, limit)
    if as_json:
        print(json.dumps(runs, indent=2))
        return
    table = Table("run", "created", "model", "data", "commit", "rows ok", "machine")
    for entry in runs:
        machine = entry["machine"] or {}
        table.add_row(
            entry["id"],
            entry["created"],
            entry["model"],
            entry["data"],
            entry["git_commit"] or "",
            f"{entry['ok']}/{entry['rows']}",
            f"{machine.get('cpu_model', '?')} [{entry['fingerprint_id'] or '?'}]",
        )
    console.print(table)


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="run id, run directory, or last")],
    run_b: Annotated[str, typer.Argument(help="run id or run directory")],
    history: HistoryOption = None,
    across_machines: AcrossOption = False,
    as_json: JsonOption = False,
) -> None:
    """Deltas of every row between two runs (B against A), refused across machines."""
    from edgekit.report.history import compare_runs, resolve_run

    second = resolve_run(run_b, history)
    first = resolve_run(run_a, history, exclude=second)
    deltas = compare_runs(first, second, history, across_machines=across_machines)
    if as_json:
        print(json.dumps({"a": first, "b": second, "rows": deltas}, indent=2))
        return
    table = Table(
        "row", "p50 A ms", "p50 B ms", "p50 change", "top-1 A", "top-1 B", "top-1 change",
        "model MB A", "model MB B", "memory change",
        title=f"{second} against {first} (recorded figures, two moments: no interval)",
    )  # fmt: skip
    for entry in deltas:
        a, b = entry["a"] or {}, entry["b"] or {}
        change = entry.get("p50_change_pct")
        label = "" if change is None else f"{change:+.1f} %"
        if entry.get("across_machines"):
            label += " ACROSS MACHINES"
        top1 = entry.get("top1_change_points")
        table.add_row(
            entry["key"],
            _num(a.get("p50_ms"), "{:.3f}"),
            _num(b.get("p50_ms"), "{:.3f}"),
            label,
            _num(a.get("top1") and 100 * a["top1"], "{:.2f}"),
            _num(b.get("top1") and 100 * b["top1"], "{:.2f}"),
            "" if top1 is None else f"{top1:+.2f}",
            _num(a.get("model_mb"), "{:.2f}"),
            _num(b.get("model_mb"), "{:.2f}"),
            _num(entry.get("model_mb_change_pct"), "{:+.1f} %"),
        )
    console.print(table)


def _num(value: float | None, pattern: str) -> str:
    return "" if value is None else pattern.format(value)
