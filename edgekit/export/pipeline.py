"""``edgekit export``: source -> (calibrate) -> target.export -> validate -> artifact + manifest.

Every file lands atomically: the target writes a temporary name, validation runs on it, and only
then is it renamed into place (or to ``<name>.rejected`` when validation fails)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, manifest_path
from edgekit.common.fileio import ensure_writable_dir, journal, sha256_file, write_json_atomic
from edgekit.common.machine import fingerprint
from edgekit.common.metrics import compare_outputs
from edgekit.common.quiet import quiet_native
from edgekit.common.versions import tool_versions
from edgekit.errors import (
    EdgekitError,
    ExportRejected,
    UnsupportedExport,
    UserInputError,
    converter_failed,
    first_line,
)
from edgekit.export.convertible import exportable
from edgekit.quantize.calibration import DEFAULT_SAMPLES, CalibrationSet, sample_calibration
from edgekit.quantize.recipes import get_recipe
from edgekit.results import io_suffix, parse_io
from edgekit.sources.data import Dataset
from edgekit.sources.source import SourceModel
from edgekit.targets import get_target, runtime_versions, suffix_of
from edgekit.targets.base import Accelerator, ExportRequest, Target
from edgekit.targets.manifest import SCHEMA_VERSION, Manifest

VALIDATION_SAMPLES = 200
# a source whose logits spread less than this across the validation images is degenerate
FLAT_LOGITS = 1e-6
DEFAULT_OUTPUT_DIR = Path("edgekit-artifacts")


@dataclass
class ExportResult:
    artifact: Artifact
    seconds: float
    warnings: list[str] = field(default_factory=list)


def artifact_name(source: SourceModel, target: str, recipe: str, io_dtype: str = "float32") -> str:
    return f"{source.name}-{recipe}{io_suffix(io_dtype)}{suffix_of(target)}"


def export_artifact(
    source: SourceModel,
    dataset: Dataset,
    target: str,
    recipe: str,
    *,
    out_dir: Path = DEFAULT_OUTPUT_DIR,
    calibration_samples: int = DEFAULT_SAMPLES,
    io_dtype: str = "float32",
    keep_float: tuple[str, ...] = (),
    validation_samples: int = VALIDATION_SAMPLES,
    timeout_s: float | None = None,
) -> ExportResult:
    """Export ``source`` for ``target`` with ``recipe`` into ``out_dir``, validated. With
    ``timeout_s`` the conversion runs in a child process ended after that many seconds
    (edgekit.export.bounded): a converter that hangs or crashes is refused in one line."""
    started = time.perf_counter()
    plugin = get_target(target)
    spec = get_recipe(recipe)
    io_dtype = parse_io(io_dtype, "--io")
    if io_dtype != "float32" and (io_dtype not in plugin.io_dtypes or recipe != "int8"):
        raise UserInputError(
            f"--io {io_dtype} applies to --recipe int8 on a target with integer I/O, not "
            f"{target}/{recipe}"
        )
    exported_from = exportable(source, target)
    reason = plugin.unsupported_reason(recipe, exported_from, io_dtype)
    if reason:
        raise UnsupportedExport(f"{target}/{recipe}: not supported for {source.name}: {reason}")
    if dataset.num_classes != source.preprocess.num_classes:
        raise UserInputError(
            f"{dataset.name}: dataset has {dataset.num_classes} classes, the model "
            f"{source.name} has {source.preprocess.num_classes}"
        )
    if dataset.evaluation.x.shape[1:] != source.preprocess.input_shape()[1:]:
        raise UserInputError(
            f"{dataset.name}: images are {dataset.evaluation.x.shape[1:]}, the model wants "
            f"{source.preprocess.input_shape()[1:]}"
        )
    calibration = (
        sample_calibration(dataset, calibration_samples) if spec.needs_calibration else None
    )
    out_dir = ensure_writable_dir(Path(out_dir))
    final = out_dir / artifact_name(source, target, recipe, io_dtype)
    partial = out_dir / f".{final.name}.partial"
    journal(partial)
    request = ExportRequest(
        source=exported_from,
        recipe=recipe,
        output=partial,
        calibration=None if calibration is None else calibration.x,
        io_dtype=io_dtype,
        keep_float=keep_float,
    )
    check_space(out_dir, source)
    try:
        try:
            if timeout_s is None:
                info = plugin.export(request)
            else:
                from edgekit.export.bounded import export_in_child

                info = export_in_child(target, source, request, timeout_s)
        except (EdgekitError, OSError, MemoryError):  # a full disk is said by its own handler
            raise
        except Exception as exc:  # the converter's own failure: its words, not "a bug in edgekit"
            label = f"{target}/{recipe}: not supported for {source.name}"
            raise converter_failed(label, type(exc).__name__, first_line(exc)) from exc
        if not partial.is_file():
            raise UnsupportedExport(f"{target}/{recipe}: the exporter wrote no file")
        manifest = _manifest(source, target, recipe, calibration, info, partial)
        if exported_from is not source:
            converted = exported_from.notes[len(source.notes) :]
            manifest = manifest.replace(details={**info.details, "converted_from_onnx": converted})
        manifest = manifest.replace(keep_float=list(keep_float))
        validation_x = dataset.evaluation.x[:validation_samples]
        validation = _validate(plugin, partial, manifest, source, validation_x, spec)
        manifest = manifest.replace(validation=validation)
        # one read of the file for its census, coverage and audit (a plugin without a census
        # reads its own coverage)
        census = _census_of(plugin, partial, manifest)
        if census is not None and "coverage" in plugin.roles:
            coverage = plugin.coverage(partial, manifest, census)
        else:
            coverage = plugin.coverage(partial, manifest)
        manifest = manifest.replace(coverage=coverage.to_dict(), transposes=coverage.transposes)
        warnings = list(info.warnings) + _fallback_warnings(target, coverage)
        spread = validation.get("source_spread")
        if validation["passed"] and spread is not None and spread < FLAT_LOGITS:
            warnings.append(
                f"the source {source.name} is degenerate: its logits do not move with the input "
                f"(largest spread {spread:.2g}), so this validation compared nothing"
            )
        audit, audit_warnings = _audit(final, census, recipe, io_dtype, keep_float)
        warnings += audit_warnings
        passed = validation["passed"]
        destination = final if passed else final.with_name(final.name + ".rejected")
        file_entry = {**manifest.to_dict()["file"], "name": destination.name}
        manifest = manifest.replace(audit=audit, warnings=warnings, file=file_entry)
        os.replace(partial, destination)
        write_json_atomic(manifest_path(destination), manifest.to_dict())
    finally:
        partial.unlink(missing_ok=True)
    if not passed:
        figures = validation
        spread = figures.get("source_spread")
        if spread is not None and spread < FLAT_LOGITS:
            raise ExportRejected(
                f"{destination}: the source {source.name} is degenerate: its logits do not move "
                f"with the input (largest spread {spread:.2g} across {len(validation_x)} images), "
                "so no comparison can pass; kept under the .rejected name"
            )
        raise ExportRejected(
            f"{destination}: validation failed against {source.name}: "
            f"{_coarse_output(figures)}SQNR {figures['sqnr_db']:.1f} dB "
            f"(min {spec.tolerance.min_sqnr_db}), top-1 agreement "
            f"{figures['top1_agreement']:.3f} (min {spec.tolerance.min_agreement}), max abs diff "
            f"{figures['max_abs_diff']:.3g}; kept under the .rejected name"
        )
    return ExportResult(Artifact(final, manifest), time.perf_counter() - started, warnings)


def _output_step(outputs: np.ndarray) -> float | None:
    """The smallest gap between two values the file's logits took: an int8 output's scale,
    where its values reach neighbouring levels (None: one value only)."""
    values = np.unique(np.asarray(outputs, dtype=np.float64))
    gaps = np.diff(values)
    return float(gaps.min()) if len(gaps) else None


# logits that span fewer of the file's output steps than this are too small for its output
COARSE_STEPS = 16


def _coarse_output(figures: dict) -> str:
    """Said first where the source's logits span only a few of the file's output steps: then
    rounding, not an op, makes most of the error (SwiftFormer's random init: largest |logit|
    2.5e-05, against int8's 2.4e-04 at PT2E's smallest scale)."""
    step, largest = figures.get("output_step"), figures.get("source_max_abs")
    if largest is None:
        return ""
    if step is None:  # one value for every image and class: the source's are not (not flat)
        return (
            f"the file's logits are one value for every image and class; the source's largest "
            f"|logit| is {largest:.2g}; "
        )
    if largest >= COARSE_STEPS * step:
        return ""
    return (
        f"the source's largest |logit|, {largest:.2g}, is {largest / step:.1f} steps of this "
        f"file's output ({step:.2g} each), too few for rounding to keep; "
    )


def check_space(out_dir: Path, source: SourceModel) -> None:
    """Refuse before converting when the folder cannot hold the artifact and its scratch files:
    a converter that runs out of space may end the whole process (LLVM's fatal error handler
    exits), so the check comes first."""
    need = max(16 << 20, 4 * source.weight_bytes())
    free = shutil.disk_usage(out_dir).free
    if free < need:
        raise UserInputError(
            f"{out_dir}: {free / 2**20:.1f} MB free, the export needs about {need / 2**20:.0f} MB "
            "(the artifact and the converter's scratch files)"
        )


def _manifest(
    source: SourceModel,
    target: str,
    recipe: str,
    calibration: CalibrationSet | None,
    info: Any,
    path: Path,
) -> Manifest:
    return Manifest(
        {
            "schema_version": SCHEMA_VERSION,
            "target": target,
            "recipe": recipe,
            "file": {"name": path.name, "size": path.stat().st_size, "sha256": sha256_file(path)},
            "input": info.input.to_dict(),
            "output": info.output.to_dict(),
            "preprocessing": source.preprocess.to_dict(),
            "class_names": list(source.preprocess.class_names),
            "source": source.to_manifest(),
            "calibration": None
            if calibration is None
            else {
                "dataset": calibration.dataset,
                "digest": calibration.digest,
                "size": calibration.size,
            },
            "details": info.details,
            "tool_versions": tool_versions(runtime_versions()),
            "fingerprint": fingerprint(versions=runtime_versions()),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )


def _validate(
    plugin: Target, path: Path, manifest: Manifest, source: SourceModel, x: np.ndarray, spec: Any
) -> dict[str, Any]:
    try:
        with quiet_native():  # the runtimes log their CPU probing and threadpool size on fd 2
            session = plugin.open(path, manifest, Accelerator.CPU, threads=1)
    except Exception as exc:  # the runtime refuses what its own converter wrote: not bad input
        target, recipe = manifest.target, manifest.recipe
        raise UnsupportedExport(
            f"{target}/{recipe}: not supported for {source.name}: the exported file does not "
            f"load in its runtime ({type(exc).__name__}: {first_line(exc)})"
        ) from None
    try:
        with quiet_native() as captured:  # a runtime that refuses the file logs why on fd 2
            try:
                outputs = session.predict(x)
            except Exception:
                captured.echo = False  # the one line below says it
                raise
    except EdgekitError:
        raise
    except Exception as exc:  # the runtime cannot run what its own converter wrote
        target, recipe = manifest.target, manifest.recipe
        raise UnsupportedExport(
            f"{target}/{recipe}: not supported for {source.name}: the exported file does not run "
            f"in its runtime ({type(exc).__name__}: {first_line(exc)})"
        ) from None
    finally:
        session.close()
    reference = source.predict(x)
    figures = compare_outputs(reference, outputs)
    # logits that do not move with the input (a random init's near-zero head) carry nothing to
    # validate against: said as the source's state, not as the converter's error
    figures["source_spread"] = float(reference.std(axis=0).max()) if len(reference) > 1 else None
    figures["source_max_abs"] = float(np.abs(reference).max())
    figures["output_step"] = _output_step(outputs)
    tolerance = spec.tolerance
    figures["tolerance"] = {
        "min_sqnr_db": tolerance.min_sqnr_db,
        "min_agreement": tolerance.min_agreement,
    }
    figures["passed"] = bool(
        figures["sqnr_db"] >= tolerance.min_sqnr_db
        and figures["top1_agreement"] >= tolerance.min_agreement
    )
    figures["split"] = "evaluation"
    return figures


def _census_of(plugin: Target, path: Path, manifest: Manifest) -> Any:
    try:
        return plugin.census(path, manifest)  # the manifest gives a .pte its module paths
    except NotImplementedError:
        return None


def _audit(
    path: Path, census: Any, recipe: str, io_dtype: str, keep_float: tuple[str, ...]
) -> tuple[dict[str, Any] | None, list[str]]:
    """``edgekit audit --expect RECIPE`` on the file just written: its summary for the manifest
    and one warning per way the file is not what the recipe promises."""
    from edgekit.artifacts.audit import audit_file

    if census is None:  # a plugin target without an op census: nothing to audit
        return None, []
    io = "int8" if io_dtype == "int8" else "float"
    report = audit_file(path, recipe, io, census=census, kept_float=keep_float)
    summary = report.summary()
    reasons = [reason for check in report.checks if not check.passed for reason in check.reasons]
    return summary, [f"audit --expect {recipe}: {reason}" for reason in reasons]


def _fallback_warnings(target: str, coverage: Any) -> list[str]:
    warnings = []
    if coverage.fast_ops < coverage.total_ops:
        slow = coverage.total_ops - coverage.fast_ops
        ops = ", ".join(sorted(set(coverage.fallback_ops))[:8]) or "unnamed ops"
        warnings.append(
            f"FALLBACK: {slow} of {coverage.total_ops} ops in the {target} artifact run outside "
            f"the fast path ({ops})"
        )
    return warnings
