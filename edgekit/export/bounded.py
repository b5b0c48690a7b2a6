"""A conversion under a deadline (``edgekit export --timeout``): the converter runs in a child
process, so one that hangs ends as a hang after the deadline and one that crashes as a crash,
named in one line, instead of stopping the command or taking it down. The child loads the
source again from its spec, as the culprit's worker does, and writes the file where the parent
asked; everything after the conversion (validation, census, audit) stays in the parent.

The child is in the command's process group, so Ctrl-C reaches it with the command; the parent
kills it on the way out whatever happened."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.children import child_environment, last_words
from edgekit.common.fileio import JOURNAL_ENV, read_journal, remove_paths, temporary_directory
from edgekit.errors import EdgekitError, UnsupportedExport, converter_failed, first_line
from edgekit.sources.source import SourceModel
from edgekit.targets.base import ExportInfo, ExportRequest
from edgekit.targets.session import TensorSpec


def export_in_child(
    target: str, source: SourceModel, request: ExportRequest, timeout_s: float
) -> ExportInfo:
    """``get_target(target).export(request)`` in a child process, ended after ``timeout_s``;
    ``source`` is the one the user gave (``request.source`` may be converted from it)."""
    label = f"{target}/{request.recipe}: not supported for {source.name}"
    with temporary_directory(prefix="edgekit-convert-") as folder:
        calibration = None
        if request.calibration is not None:
            calibration = str(folder / "calibration.npy")
            np.save(calibration, request.calibration)
        answer = folder / "answer.json"
        message = {
            "source": source.to_manifest(),
            "target": target,
            "recipe": request.recipe,
            "output": str(request.output),
            "calibration": calibration,
            "io_dtype": request.io_dtype,
            "keep_float": list(request.keep_float),
            "answer": str(answer),
        }
        # the child's scratch files go to a journal of its own: what a killed or crashed child
        # left (a converter's work folder beside the artifact) is removed here
        child_journal = folder / "journal"
        env = child_environment(**{JOURNAL_ENV: str(child_journal)})
        with open(folder / "log", "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "edgekit.export.bounded", json.dumps(message)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
            )
            try:
                code = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise UnsupportedExport(
                    f"{label}: the converter hung: no file after {timeout_s:g} s (--timeout); "
                    "`edgekit culprit` names the block where it hangs"
                ) from None
            finally:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
                remove_paths(read_journal(child_journal))
        said = json.loads(answer.read_text()) if answer.is_file() else None
        if said is None:
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            words = last_words((folder / "log").read_bytes())
            raise UnsupportedExport(f"{label}: the converter crashed ({how}): {words}")
    if "error" in said:
        raise _error(said["error"], said["message"], label)
    return ExportInfo(
        input=TensorSpec.from_dict(said["input"]),
        output=TensorSpec.from_dict(said["output"]),
        details=said["details"],
        warnings=said["warnings"],
    )


def _error(kind: str, message: str, label: str) -> Exception:
    """The child's failure as the parent raises it in process: edgekit's own errors by their
    class, a disk or memory error as itself, a converter's exception in its words."""
    import builtins

    import edgekit.errors as errors

    known = getattr(errors, kind, None)
    if isinstance(known, type) and issubclass(known, EdgekitError):
        return known(message)
    builtin = getattr(builtins, kind, None)
    if isinstance(builtin, type) and issubclass(builtin, (OSError, MemoryError)):
        return builtin(message)
    return converter_failed(label, kind, message)


def _convert(message: dict[str, Any]) -> dict[str, Any]:
    from edgekit.export.convertible import exportable
    from edgekit.sources.load import reload_model
    from edgekit.targets import get_target

    source = exportable(reload_model(message["source"]), message["target"])
    calibration = message["calibration"]
    request = ExportRequest(
        source=source,
        recipe=message["recipe"],
        output=Path(message["output"]),
        calibration=None if calibration is None else np.load(calibration),
        io_dtype=message["io_dtype"],
        keep_float=tuple(message["keep_float"]),
    )
    info = get_target(message["target"]).export(request)
    return {
        "input": info.input.to_dict(),
        "output": info.output.to_dict(),
        "details": info.details,
        "warnings": list(info.warnings),
    }


def main() -> None:
    from edgekit.common.fileio import write_json_atomic

    message = json.loads(sys.argv[1])
    try:
        said = _convert(message)
    except (EdgekitError, OSError, MemoryError) as exc:
        said = {"error": type(exc).__name__, "message": str(exc)}
    except Exception as exc:  # the converter's own failure, said by the parent in its words
        said = {"error": type(exc).__name__, "message": first_line(exc)}
    write_json_atomic(Path(message["answer"]), said)


if __name__ == "__main__":
    main()
