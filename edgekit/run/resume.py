"""``edgekit run --resume RUN_DIR``: run only what a finished run is missing (its failed and
unavailable rows: a node that died, a device that was unplugged), and write the run directory
again, complete. Rows that were measured are kept as they are; a device pool that runs again
times only the artifacts it lacks, with its own baseline (the report then compares rows of two
pools by their p50s, and says so, as it does for any two pools).

The new directory is built beside the old one and swapped in, so an interrupted resume leaves
the old run as it was."""

from __future__ import annotations

import shutil
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.artifacts.artifact import Artifact, load_artifact
from edgekit.common.fileio import journal, write_json_atomic
from edgekit.common.progress import Progress
from edgekit.errors import UserInputError
from edgekit.report import render_report
from edgekit.results import Results, Row, load_results
from edgekit.run.cells import PoolResult
from edgekit.run.config import RunConfig
from edgekit.run.executor import Executor, Exported, ExportJob, LocalExecutor
from edgekit.run.subject import Subject, subjects

if TYPE_CHECKING:
    from edgekit.run.matrix import RunResult


def resume_run(
    run_dir: Path,
    progress: Progress | None = None,
    history: Path | None = None,
    executor: Executor | None = None,
) -> RunResult:
    from edgekit.run.matrix import finish, measure_models

    run_dir = Path(run_dir)
    old = load_results(run_dir)
    known = {f.name for f in fields(RunConfig)}
    config = RunConfig(**{k: v for k, v in old.run["config"].items() if k in known})
    say = progress or (lambda message: None)
    missing = [row for row in old.rows if row.status != "ok"]
    if not missing:
        raise UserInputError(f"{run_dir}: nothing to resume (every row was measured)")
    kept = [row for row in old.rows if row.status == "ok"]
    partial = run_dir.with_name(f".{run_dir.name}.resume")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(run_dir / "artifacts", partial / "artifacts")
    journal(partial)
    try:
        models = subjects(config)
        for model in models:
            if model.given is not None:
                model.given = load_artifact(partial / "artifacts" / model.given.path.name)
        redo = _Redo(missing, partial / "artifacts", executor or LocalExecutor())
        results = measure_models(
            config,
            models,
            partial,
            run_id=old.run["id"],
            created=datetime.now(UTC),
            say=say,
            executor=redo,
            keep=kept,
        )
        results.run["created"] = old.run["created"]
        results.run["resumed"] = [*old.run.get("resumed", []), datetime.now(UTC).isoformat()]
        results.run["profiles"] = old.run.get("profiles") or results.run["profiles"]
        # run --tune: the searches of the files kept, then those of the files made again
        fresh = {(r["label"], r["device"]) for r in results.run.get("tuning", [])}
        results.run["tuning"] = [
            r for r in old.run.get("tuning", []) if (r["label"], r["device"]) not in fresh
        ] + results.run.get("tuning", [])
        _keep_baselines(results, kept)
        write_json_atomic(partial / "results.json", results.to_dict())
        advice = render_report(results, partial).recommendations
        if config.golden:  # made again: the recommendation may have changed
            from edgekit.run.golden import add_golden

            advice = add_golden(results, partial, models, config, advice, say)
        backup = run_dir.with_name(f".{run_dir.name}.old")
        run_dir.rename(backup)
        partial.rename(run_dir)
        shutil.rmtree(backup, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return finish(results, run_dir, history, advice)


class _Redo:
    """An executor that runs only the missing cells: the exports that failed, and on each
    device the artifacts whose rows there did not come back."""

    def __init__(self, missing: list[Row], folder: Path, inner: Executor) -> None:
        self.missing, self.folder, self.inner = missing, folder, inner
        self.fresh: set[str] = set()  # the files made again, measured on every device

    @property
    def tunes_here(self) -> bool:
        return self.inner.tunes_here

    @property
    def timings(self) -> list[dict[str, Any]]:
        return self.inner.timings

    def absent_devices(self, devices: list[str]) -> dict[str, str]:
        return self.inner.absent_devices(devices)

    def export_many(self, jobs: list[ExportJob], out_dir: Path, say: Progress) -> list[Exported]:
        cells = sorted({(r.target, r.recipe) for r in self.missing if r.stage == "export"})
        made = []
        for config, subject in jobs:
            again = [
                (replace(config, targets=[target], recipes=[recipe]), subject)
                for target, recipe in cells
            ]
            exported, rows = [], []
            for artifacts, failed in self.inner.export_many(again, out_dir, say) if again else []:
                exported += artifacts
                rows += failed
            self.fresh |= {a.path.name for a in exported}
            existing = [
                load_artifact(p)
                for p in sorted(self.folder.glob("*"))
                if not p.name.endswith(".json") and p.name not in self.fresh
            ]
            made.append((exported + existing, rows))
        self.missing = [r for r in self.missing if r.stage != "export"]
        return made

    def device_pools(
        self, config: RunConfig, subject: Subject, exported: list[Artifact], say: Progress
    ) -> list[PoolResult]:
        pools = []
        # by thread count too: a pool that failed at 2 threads only is not measured again at 1
        # (its rows at 1 are kept; measuring them again gave each a second row)
        for device in config.devices:
            for threads in config.threads:
                wanted = {
                    Path(str(r.artifact)).name
                    for r in self.missing
                    if r.device == device and r.threads in (threads, None)
                }
                chosen = [a for a in exported if a.path.name in wanted or a.path.name in self.fresh]
                if not chosen:
                    continue
                say(f"resume: {len(chosen)} artifact(s) on {device}, {threads} thread(s)")
                again = replace(config, devices=[device], threads=[threads])
                pools += self.inner.device_pools(again, subject, chosen, say)
        return pools


def _keep_baselines(results: Results, kept: list[Row]) -> None:
    """A baseline the old run measured stays; the resumed pools' own are dropped for it."""
    seen = {(r.model, r.device, r.threads) for r in kept if r.kind == "baseline"}
    first: set = set()
    rows = []
    for row in results.rows:
        key = (row.model, row.device, row.threads)
        if row.kind == "baseline" and row not in kept and (key in seen or key in first):
            continue
        if row.kind == "baseline":
            first.add(key)
        rows.append(row)
    results.rows[:] = rows
