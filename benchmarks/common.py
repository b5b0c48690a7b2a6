"""What the benchmark scripts share: the exported artifacts (cached between scripts, so three
runs of one measurement time the same files), the machine header every table carries, and the
markers that let ``figures.py`` put a script's table into the README."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from edgekit import __version__
from edgekit.artifacts.artifact import Artifact, load_artifact
from edgekit.common.fileio import write_bytes_atomic
from edgekit.common.machine import describe, fingerprint
from edgekit.errors import EdgekitError
from edgekit.export.pipeline import artifact_name, export_artifact
from edgekit.sources.data import load_dataset
from edgekit.sources.load import load_model
from edgekit.targets import runtime_versions, target_names

HERE = Path(__file__).parent
ARTIFACTS = HERE / ".artifacts"  # ignored by git: rebuilt by any script that needs them
DATA = {"digits-mobilenet": "digits", "mobilenet_v2": "synthetic:64", "resnet50": "synthetic:64"}
RECIPES = ("fp32", "fp16", "int8", "int8-dynamic")


def machine() -> dict:
    return fingerprint(versions=runtime_versions())


def header(
    title: str,
    command: str,
    extra: list[str] | None = None,
    *,
    facts: dict | None = None,
    written: str | None = None,
) -> list[str]:
    """The first lines of every table: what made it, when, and on whose machine (``facts`` and
    ``written``: a recorded run's, for a page rewritten from its JSON)."""
    facts = facts or machine()
    written = written or datetime.now(UTC).isoformat(timespec="minutes")
    lines = [
        f"# {title}",
        "",
        f"Written by `{command}` on {written}; nothing here was written by hand.",
        "",
        f"- machine: {describe(facts)}; fingerprint `{facts['id']}`. These are this machine's "
        "figures: run the command on yours for your own (`make figures` reruns all of them).",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(facts["versions"].items())),
    ]
    return lines + (extra or []) + [""]


def artifacts(model: str, log=print) -> tuple[list[Artifact], object, object]:
    """Every target x recipe of ``model``, exported once into benchmarks/.artifacts/<model>/ and
    reused while the source model's digest is the same."""
    source = load_model(model, quiet=True)
    dataset = load_dataset(DATA[model], source.preprocess)
    directory = ARTIFACTS / model
    made = []
    for target in target_names():
        for recipe in RECIPES:
            path = directory / artifact_name(source, target, recipe)
            try:
                found = load_artifact(path) if path.is_file() else None
                if (
                    found is None
                    or getattr(found.manifest.source, "digest", None) != source.digest
                    or found.manifest.tool_versions.get("edgekit") != __version__
                ):
                    log(f"export {model} {target}/{recipe}")
                    found = export_artifact(
                        source,
                        dataset,
                        target,
                        recipe,
                        out_dir=directory,
                        calibration_samples=32,
                        validation_samples=16,
                    ).artifact
                made.append(found)
            except EdgekitError as exc:
                log(f"{model} {target}/{recipe}: not exported: {exc}")
    return made, source, dataset


def write_json(path: Path, payload: dict) -> None:
    write_bytes_atomic(path, (json.dumps(payload, indent=1, default=str) + "\n").encode())


def write_markdown(path: Path, lines: list[str]) -> None:
    """A benchmark's page, whole or not at all (an interrupted script leaves the last one)."""
    write_bytes_atomic(path, ("\n".join(lines) + "\n").encode())


def busy_core(core: int = 0):
    """A process that keeps one core busy (pinned to it where the OS allows)."""
    import subprocess
    import sys

    code = "import os\ntry:\n os.sched_setaffinity(0, {%d})\nexcept OSError:\n pass\nwhile 1: pass"
    return subprocess.Popen([sys.executable, "-c", code % core], env=dict(os.environ))
