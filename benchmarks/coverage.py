"""The coverage table: every image-classification architecture the pinned transformers ships,
built from a small config with random weights (benchmarks/small_configs.py; nothing is
downloaded), saved as a user's save_pretrained folder, and taken through each target x fp32/int8
as a user runs it (``edgekit export --model FOLDER``). Each cell that fails is searched with
``edgekit culprit``. Writes benchmarks/coverage.json and docs/measurements/coverage.md.

    .venv/bin/python benchmarks/coverage.py [--only vit,swin] [--timeout 900]

About an hour on 2 cores; run it on a quiet machine only for its seconds column."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import HERE, write_json, write_markdown
from coverage_page import DATA, DEGENERATE, RECIPES, TARGETS, page, settled
from small_configs import small_config

from edgekit.export.pipeline import FLAT_LOGITS  # export's own line for a degenerate source
from edgekit.sources.hf_output import Logits

ROOT = HERE.parent
EDGEKIT = str(Path(sys.executable).with_name("edgekit"))
RECORD = HERE / "coverage.json"
PAGE = ROOT / "docs" / "measurements" / "coverage.md"
CLASSES = [f"class_{i}" for i in range(10)]


class Unrunnable(Exception):
    """The model was built and saved, but does not run on an image batch here; ``input`` is the
    shape it was offered."""

    def __init__(self, cause: Exception, shape: list[int]) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.input = shape


def build(model_type: str, folder: Path) -> dict:
    """Save ``model_type``'s small random model in ``folder``; what its logits look like.
    Unrunnable where it is saved but does not run on images (a user may still try it)."""
    import torch
    import transformers
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES as CLASSIFIERS,
    )

    config = small_config(model_type)
    config.id2label = dict(enumerate(CLASSES))
    config.label2id = {name: i for i, name in enumerate(CLASSES)}
    torch.manual_seed(0)
    named = CLASSIFIERS[model_type]  # the first where the mapping offers several heads
    model = getattr(transformers, named if isinstance(named, str) else named[0])(config).eval()
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", 32)  # convolutional configs take any size
    size = size if isinstance(size, int) else size[0]
    channels = getattr(vision, "num_channels", 3)
    images = torch.rand(8, channels, size, size, generator=torch.Generator().manual_seed(0))
    model.save_pretrained(folder)
    try:
        with torch.no_grad():
            out = model(pixel_values=images)
        field = Logits(model, len(CLASSES)).field(out)  # as edgekit takes it (PPLCNet's)
        logits = out if field is None else getattr(out, field)
    except Exception as exc:
        raise Unrunnable(exc, [channels, size, size]) from exc
    spread = float(logits.std(dim=0).max())
    return {
        "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "input": [channels, size, size],
        "max_abs_logit": float(logits.abs().max()),
        "logit_spread": spread,
        "degenerate": spread < FLAT_LOGITS,
    }


def edgekit(args: list[str], timeout_s: float) -> tuple[int | str, dict | None, str]:
    """Exit code (or "timeout"), the JSON it printed, and its last line on stderr."""
    env = {**os.environ, "COLUMNS": "200"}
    try:
        done = subprocess.run([EDGEKIT, *args, "--json"], capture_output=True, text=True,
                              timeout=timeout_s, env=env, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return "timeout", None, f"no result after {timeout_s:g} s"
    try:
        payload = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        payload = None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, payload, lines[-1] if lines else ""


def cells(folder: Path, out: Path, timeout_s: float, source: dict) -> dict:
    """Every target x recipe of one model in one ``edgekit export`` (one model load)."""
    started = time.perf_counter()
    args = ["export", "--model", str(folder), "--target", ",".join(TARGETS),
            "--recipe", ",".join(RECIPES), "--data", DATA, "-o", str(out),
            "--input-shape", shape(source)]  # fmt: skip
    code, payload, last = edgekit(args, timeout_s)
    seconds = round(time.perf_counter() - started, 1)
    made = {(a["target"], a["recipe"]): a for a in (payload or {}).get("artifacts", [])}
    refused = {
        (u["target"], u["recipe"]): u["reason"] for u in (payload or {}).get("unsupported", [])
    }
    found = {}
    for target in TARGETS:
        for recipe in RECIPES:
            key = (target, recipe)
            if key in made:
                validation = made[key]["validation"]
                cell = {"verdict": "exported", "sqnr_db": validation["sqnr_db"],
                        "agreement": validation["top1_agreement"]}  # fmt: skip
            elif key in refused and source["degenerate"] and DEGENERATE.search(refused[key]):
                cell = {"verdict": "degenerate", "why": refused[key]}
            else:
                cell = {"verdict": "failed", "why": refused.get(key) or last, "exit": code}
            found[f"{target}/{recipe}"] = cell
    return {"cells": found, "export_s": seconds, "export_exit": code}


def export_again(folder: Path, column: str, out: Path, timeout_s: float, source: dict) -> dict:
    """One cell exported again on this machine: for a failure the search did not reproduce,
    whether export itself still refuses it here (int8 kernels differ between CPUs)."""
    target, recipe = column.split("/")
    args = ["export", "--model", str(folder), "--target", target, "--recipe", recipe,
            "--data", DATA, "-o", str(out), "--input-shape", shape(source)]  # fmt: skip
    code, payload, last = edgekit(args, timeout_s)
    made = (payload or {}).get("artifacts") or []
    if code == 0 and made:
        validation = made[0]["validation"]
        return {"exit": 0, "sqnr_db": validation["sqnr_db"],
                "agreement": validation["top1_agreement"]}  # fmt: skip
    return {"exit": code, "why": last}


def refusal(folder: Path, out: Path, shape: list[int], timeout_s: float) -> dict:
    """``edgekit export`` of a saved model that does not run on images: its exit code and line
    (one, exit 2, is what a user should get)."""
    args = ["export", "--model", str(folder), "--target", ",".join(TARGETS), "--recipe", "fp32",
            "--data", DATA, "-o", str(out), "--input-shape", ",".join(map(str, shape))]  # fmt: skip
    code, _, last = edgekit(args, timeout_s)
    said = last.removeprefix("edgekit: error: ").replace(f"{folder.parent}/", "")
    return {"exit": code, "said": said}


def shape(source: dict) -> str:
    """--input-shape, as edgekit asks for a folder whose config does not give the size."""
    return ",".join(str(n) for n in source["input"])


def culprit(
    folder: Path, target: str, recipe: str, out: Path, timeout_s: float, source: dict
) -> dict:
    args = ["culprit", "--model", str(folder), "--target", target, "--recipe", recipe,
            "--data", DATA, "-o", str(out), "--timeout", "300",
            "--input-shape", shape(source)]  # fmt: skip
    code, payload, last = edgekit(args, timeout_s)
    if code == 1 and payload and payload.get("culprit"):
        found = payload["culprit"]
        outcome = found["outcome"]
        return {"path": found["path"], "kind": found["kind"], "class": outcome["failure"],
                "op": outcome["op"], "message": outcome["message"],
                "upstream": payload["upstream"], "weakest": payload.get("weakest")}  # fmt: skip
    if code == 0:
        return {"class": None, "message": "the culprit's search did not reproduce the failure "
                "(the whole model and each block pass its checks)"}  # fmt: skip
    return {"class": "search failed", "message": last, "exit": code}


def sweep(model_types: list[str], timeout_s: float, log=print, done=lambda rows: None) -> dict:
    """Each architecture's row; ``done(rows)`` after each, so an interrupted sweep keeps what it
    finished."""
    rows = {}
    with tempfile.TemporaryDirectory(prefix="edgekit-coverage-") as tmp:
        work = Path(tmp)
        for model_type in model_types:
            folder = work / model_type
            try:
                source = build(model_type, folder)
            except Exception as exc:  # the architecture itself: recorded, not raised
                text = str(exc).strip() or (
                    "a package it needs is not installed" if isinstance(exc, ImportError) else ""
                )
                line = text.splitlines()[0][:200]
                rows[model_type] = {"built": False, "why": f"{type(exc).__name__}: {line}"}
                if isinstance(exc, Unrunnable):  # saved: what edgekit says of it, as a user sees
                    rows[model_type]["why"] = line
                    rows[model_type]["edgekit"] = commit()
                    rows[model_type]["edgekit_says"] = refusal(
                        folder, work / "out", exc.input, timeout_s
                    )
                log(f"{model_type}: not built ({rows[model_type]['why']})")
                continue
            row = {"built": True, "source": source, "edgekit": commit(),
                   **cells(folder, work / "out" / model_type, timeout_s, source)}  # fmt: skip
            for column, cell in row["cells"].items():
                if cell["verdict"] == "failed":
                    target, recipe = column.split("/")
                    cell["culprit"] = culprit(
                        folder, target, recipe, work / "culprit", timeout_s, source
                    )
                log(f"{model_type} {column}: {cell['verdict']}")
            # the temporary folder's path means nothing on the page
            rows[model_type] = json.loads(json.dumps(row).replace(f"{work}/", ""))
            done(rows)
    return rows


def commit() -> str:
    """The edgekit commit that makes a row, "+changes" where its code differs from it: a
    sweep takes hours, and the rules it exercises may change between its rows."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=False)  # fmt: skip
        return done.stdout.strip()

    # the code only: the sweep's own record and page change as it goes
    code = ("edgekit", "targets", "quantize", "benchmarks/*.py")
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *code)
    return (git("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else "")


def search_again(record: dict, model_types: list[str], timeout_s: float) -> None:
    """The searches of the failed cells where the last one named no block, once more, on
    sources built again (the export verdicts stay): for when edgekit culprit changed and the
    exports did not. Each search records when and on which machine it ran, since the export
    verdicts beside it may be older."""
    from datetime import UTC, datetime

    from common import machine

    from edgekit.common.machine import describe

    facts = machine()
    with tempfile.TemporaryDirectory(prefix="edgekit-coverage-") as tmp:
        work = Path(tmp)
        for model_type in model_types:
            row = record["rows"][model_type]
            judged = settled(json.loads(json.dumps(row)))  # a copy: the record keeps its verdicts
            failed = [c for c, cell in judged.get("cells", {}).items() if cell["verdict"] == "failed"
                      and (cell.get("culprit") or {}).get("path") is None]  # fmt: skip
            if not failed:
                continue
            source = build(model_type, work / model_type)
            for column in failed:
                target, recipe = column.split("/")
                found = culprit(work / model_type, target, recipe, work / "culprit", timeout_s,
                                source)  # fmt: skip
                found["searched"] = {
                    "written": datetime.now(UTC).isoformat(timespec="minutes"),
                    "machine": describe(facts),
                    "fingerprint": facts.get("id"),
                }
                if found.get("class") is None:  # not reproduced: does export still refuse it?
                    found["export_here"] = export_again(
                        work / model_type, column, work / "again", timeout_s, source
                    )
                row["cells"][column]["culprit"] = json.loads(
                    json.dumps(found).replace(f"{work}/", "")
                )
                print(f"{model_type} {column}: {found.get('class')}", flush=True)


def main() -> None:
    import transformers
    from common import machine
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES as CLASSIFIERS,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model types")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per edgekit call")
    parser.add_argument("--page-only", action="store_true", help="rewrite the page from the JSON")
    parser.add_argument("--search-again", action="store_true",
                        help="only the culprit searches of the failed cells (of --only) that "
                        "named no block, the exports' verdicts kept")  # fmt: skip
    args = parser.parse_args()
    if args.page_only:  # and the record names the architectures it lacks
        record = json.loads(RECORD.read_text())
        record["not_swept"] = sorted(set(CLASSIFIERS) - set(record["rows"]))
        write_json(RECORD, record)
        write_markdown(PAGE, page(record))
        return
    if args.search_again:
        record = json.loads(RECORD.read_text())
        chosen = args.only.split(",") if args.only else sorted(record["rows"])
        search_again(record, chosen, args.timeout)
        write_json(RECORD, record)
        write_markdown(PAGE, page(record))
        return
    chosen = args.only.split(",") if args.only else sorted(CLASSIFIERS)
    from datetime import UTC, datetime

    # --only updates the rows it made and keeps the others; each row is saved as it is made
    kept = json.loads(RECORD.read_text())["rows"] if args.only and RECORD.is_file() else {}

    def save(rows: dict) -> None:
        swept = dict(sorted({**kept, **rows}.items()))
        record = {"written": datetime.now(UTC).isoformat(timespec="minutes"),
                  "machine": machine(), "transformers": transformers.__version__,
                  "rows": swept, "not_swept": sorted(set(CLASSIFIERS) - set(swept))}  # fmt: skip
        write_json(RECORD, record)
        write_markdown(PAGE, page(record))

    save(sweep(chosen, args.timeout, log=lambda line: print(line, flush=True), done=save))


if __name__ == "__main__":
    main()
