"""``find_culprit``: the smallest block of a torch model that fails one target and recipe the
way the whole model does, and a repro folder for it. The CLI (``edgekit culprit``, ``export
--culprit``) calls this and writes the same files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.culprit.outcome import Outcome
from edgekit.culprit.search import Search, Tried, search
from edgekit.culprit.worker import BlockWorker, WorkerRequest
from edgekit.errors import UserInputError
from edgekit.sources.source import SourceModel

if TYPE_CHECKING:
    from edgekit.targets.base import Target

RECIPES = ("fp32", "int8")  # the block path converts these; the others are refused by name
TORCH_REPO = "pytorch/pytorch"  # where torch.export's own failures belong, whatever the target
DEFAULT_TIMEOUT_S = 300.0


@dataclass
class CulpritReport:
    model: str
    target: str
    recipe: str
    search: Search
    folder: Path | None = None  # the repro folder (None when nothing failed)
    upstream: str = ""
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.search.whole.failure is not None


def check_request(source: SourceModel, target: str, recipe: str) -> Any:
    """The target plugin, or a one-line refusal of what the block path cannot do."""
    from edgekit.targets import get_target

    plugin = get_target(target)
    if recipe not in RECIPES:
        raise UserInputError(
            f"culprit: --recipe {recipe}: the search converts {', '.join(RECIPES)}"
        )
    if not plugin.has_role("convert_block"):
        raise UserInputError(f"culprit: {target} has no block-by-block conversion")
    if source.framework != "torch":
        raise UserInputError(
            f"{source.spec}: culprit searches torch models' module trees; this is a "
            f"{source.framework} model"
        )
    return plugin


def upstream_of(plugin: Target, outcome: Outcome, recipe: str) -> str:
    """The repository a failure belongs to, by the stage it happened in (a hang or a crash at
    the stage it last announced; a mismatch to the quantizer for int8)."""
    if outcome.failure == "export":
        return TORCH_REPO
    compare = "quantize" if recipe == "int8" else "convert"
    stage = {"run": "load", "compare": compare}.get(outcome.stage, outcome.stage)
    return plugin.upstream.get(stage, TORCH_REPO)


def find_culprit(
    source: SourceModel,
    data: str,
    target: str,
    recipe: str,
    *,
    output: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    checks: int = 8,
    calibration: int = 32,
    on_try: Callable[[Tried], None] = lambda _: None,
) -> CulpritReport:
    """Search ``source``'s module tree for ``target``/``recipe``; where it fails, write the
    repro folder ``output/<model>-<target>-<recipe>``."""
    import importlib

    from edgekit.culprit.repro import readme, script, versions, write_folder
    from edgekit.quantize.recipes import get_recipe

    plugin = check_request(source, target, recipe)
    request = WorkerRequest(source.to_manifest(), data, target, recipe, checks, calibration)
    with BlockWorker(request, timeout_s) as worker:
        found = search(worker, on_try)
        report = CulpritReport(source.name, target, recipe, found)
        if found.culprit is None:
            return report
        culprit = found.culprit
        outcome = culprit.outcome
        klass = outcome.failure or ""
        report.upstream = upstream_of(plugin, outcome, recipe)
        block = next(b for b in worker.blocks if b["path"] == culprit.path)
        report.record = {
            "model": source.spec,
            "target": target,
            "recipe": recipe,
            "culprit": {
                "path": culprit.path,
                "kind": culprit.kind,
                "module": block["module"],
                "input_shape": block["input_shape"],
                "outcome": outcome.to_dict(),
            },
            "chain": found.chain,
            "tried": [{"path": t.path, "kind": t.kind, **t.outcome.to_dict()} for t in found.tried],
            "upstream": report.upstream,
            "versions": versions(plugin.packages),
        }
        weakest = found.weakest
        if weakest is not None:
            report.record["weakest"] = {"path": weakest.path, "kind": weakest.kind,
                                        "sqnr_db": weakest.outcome.verdict["sqnr_db"]}  # fmt: skip
        convert_module = importlib.import_module(f"{type(plugin).__module__}.convert_block")
        expected = f"{klass} at {outcome.stage}: {outcome.message}"
        about = (
            f"Repro: {target}/{recipe} fails ({klass}) in block {culprit.path or '<model>'} "
            f"({culprit.kind}) of {source.spec}.\n\nExpected: {expected}\nRun: python repro.py"
        )
        tolerance = get_recipe(recipe).tolerance
        whole = tolerance.min_agreement if culprit.path == "" else None
        repro = script(
            convert_module, recipe, tolerance.min_sqnr_db, expected, about, min_agreement=whole
        )
        files = {
            "repro.py": repro,
            "README.md": readme(report.record),
            "culprit.json": json.dumps(report.record, indent=2) + "\n",
        }
        final = Path(output) / f"{source.name}-{target}-{recipe}"
        report.folder = write_folder(final, files, lambda d: worker.repro(culprit.path, str(d)))
    return report
