"""Exports made once per machine: ``edgekit run`` asks here before converting.

An export is keyed by everything that decides its bytes: the source model's digest, the
target, recipe, I/O type and float islands, the calibration and validation data, the versions
of the converters and runtimes, edgekit's own code, and the CPU (calibration runs ISA-dependent
float code). A hit is copied into the run's folder with its manifest, which says it was reused
and when it was made; a miss exports and stores a copy. Olive caches its passes the same way.

The store lives under ``$EDGEKIT_CACHE/exports`` and keeps its newest entries up to
``MAX_BYTES``. ``edgekit run --no-export-cache`` (``export_cache = false``) converts afresh.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path

from edgekit.artifacts.artifact import Artifact, manifest_path
from edgekit.common.cache import cache_dir
from edgekit.common.fileio import atomic_path, journal, write_json_atomic
from edgekit.common.machine import fingerprint, fingerprint_id
from edgekit.export.pipeline import VALIDATION_SAMPLES, ExportResult, export_artifact
from edgekit.quantize.calibration import DEFAULT_SAMPLES
from edgekit.sources.data import Dataset
from edgekit.sources.source import SourceModel
from edgekit.targets import runtime_versions
from edgekit.targets.manifest import Manifest

MAX_BYTES = 2 << 30  # the store's size after pruning: a few ResNet-50 matrices
ENTRY_FILE = "artifact.txt"  # the artifact's name, written last: an entry without it is partial


def cached_export(
    source: SourceModel,
    dataset: Dataset,
    target: str,
    recipe: str,
    out_dir: Path,
    calibration_samples: int = DEFAULT_SAMPLES,
) -> ExportResult:
    """``export_artifact`` through the store: the same files, made at most once per key."""
    started = time.perf_counter()
    key = export_key(source, dataset, target, recipe, calibration_samples)
    entry = store_dir() / key
    if (entry / ENTRY_FILE).is_file():
        return ExportResult(_copy_out(entry, Path(out_dir), key), time.perf_counter() - started)
    result = export_artifact(
        source, dataset, target, recipe, out_dir=out_dir, calibration_samples=calibration_samples
    )
    _store(result.artifact, entry)
    return result


def export_key(
    source: SourceModel, dataset: Dataset, target: str, recipe: str, calibration_samples: int
) -> str:
    versions = runtime_versions()
    payload = {
        "source": source.digest,
        "preprocessing": source.preprocess.to_dict(),
        "target": target,
        "recipe": recipe,
        "io": "float32",
        "keep_float": [],
        "data": dataset.digest,
        "calibration_samples": calibration_samples,
        "validation_samples": VALIDATION_SAMPLES,
        "versions": versions,
        "code": code_digest(),
        "machine": fingerprint_id(fingerprint(versions=versions)),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


@cache
def code_digest() -> str:
    """sha256 over edgekit's own Python files (the targets and quantizers included): an edit
    to any of them makes every stored export stale."""
    from edgekit.common.layout import source_files

    digest = hashlib.sha256()
    for name, path in source_files().items():
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def store_dir() -> Path:
    return cache_dir() / "exports"


def _copy_out(entry: Path, out_dir: Path, key: str) -> Artifact:
    name = (entry / ENTRY_FILE).read_text().strip()
    stored = Manifest(json.loads(manifest_path(entry / name).read_text()))
    manifest = stored.replace(reused={"export_cache": key, "made": stored.created})
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / name
    with atomic_path(final) as partial:
        shutil.copyfile(entry / name, partial)
    write_json_atomic(manifest_path(final), manifest.to_dict())
    entry.touch()  # recently used: pruned last
    return Artifact(final, manifest)


def _store(artifact: Artifact, entry: Path) -> None:
    """A copy of a fresh export, renamed into place whole (a crash leaves no entry)."""
    store = store_dir()
    store.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=store))
    journal(scratch)  # an interrupted copy is removed like any partial file
    try:
        shutil.copyfile(artifact.path, scratch / artifact.path.name)
        shutil.copyfile(manifest_path(artifact.path), manifest_path(scratch / artifact.path.name))
        (scratch / ENTRY_FILE).write_text(artifact.path.name)
        scratch.rename(entry)
    except OSError:
        return  # another process stored the same key first (its entry is as good), or no space
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    prune(store, MAX_BYTES)


def prune(store: Path, max_bytes: int) -> list[Path]:
    """Remove the least recently used entries until the store holds at most ``max_bytes``."""
    entries = sorted(
        (path for path in store.iterdir() if (path / ENTRY_FILE).is_file()),
        key=lambda path: path.stat().st_mtime,
        reverse=True,
    )
    kept, removed = 0, []
    for path in entries:
        size = sum(item.stat().st_size for item in path.iterdir())
        if kept + size > max_bytes:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        else:
            kept += size
    return removed
