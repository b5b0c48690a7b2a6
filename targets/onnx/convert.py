"""torch -> ONNX: ``torch.onnx.export(dynamo=True, opset 18)``, static batch 1. The legacy
TorchScript exporter is used only when the dynamo exporter fails, the details say so, and a
trace that froze a data-dependent value (a TracerWarning: one branch of an ``if`` on a tensor
kept, the other lost) is refused: such a graph gives wrong answers to inputs that take the
other branch."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.common.fileio import raise_disk_error
from edgekit.common.quiet import quiet_python
from edgekit.errors import UnsupportedExport
from edgekit.errors import cause_line as one_line

if TYPE_CHECKING:
    from edgekit.sources.source import SourceModel

OPSET = 18
INPUT_NAME = "input"
OUTPUT_NAME = "logits"
QUIET = {
    "loggers": ("torch.onnx._internal.exporter._registration",),
    "messages": (".*torch.onnx.*deprecated.*",),
}
# TracerWarnings that mean the trace froze a value computed from the input
FROZEN_VALUE = re.compile(r"Python (boolean|value|index|number)|treated as a constant", re.I)


@contextlib.contextmanager
def without_graph_dumps() -> Iterator[None]:
    """The legacy exporter (torch 2.13) turns its C++ log on whatever ``verbose`` says (it tests
    ``_jit_is_onnx_log_enabled`` without calling it) and dumps whole TorchScript graphs to stderr.
    Discard the process's stdout/stderr for that call; its errors still arrive as exceptions."""
    import torch

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as devnull:
        try:
            os.dup2(devnull.fileno(), 1)
            os.dup2(devnull.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            torch._C._jit_set_onnx_log_enabled(False)  # and it never turns the log off  # noqa: FBT003


def _dynamo_export(source: SourceModel, example: tuple, path: Path, names: dict) -> None:
    import torch

    torch.onnx.export(source.module, example, str(path), dynamo=True, opset_version=OPSET,
                      external_data=False, verbose=False, **names)  # fmt: skip


def export_fp32(source: SourceModel, path: Path) -> dict[str, Any]:
    """Export with the dynamo exporter; fall back to the legacy one only if it fails."""
    import torch

    example = (torch.from_numpy(source.example_input()),)
    names = {"input_names": [INPUT_NAME], "output_names": [OUTPUT_NAME]}
    with quiet_python(**QUIET), torch.no_grad():
        try:
            # torch.export prints the partial graph to stderr when it fails (its _trace
            # wrapper); the failure itself still arrives as the exception
            with contextlib.redirect_stderr(io.StringIO()):
                _dynamo_export(source, example, path, names)
            return {"exporter": f"torch.onnx dynamo (torch {torch.__version__})", "opset": OPSET}
        except Exception as dynamo_error:
            raise_disk_error(dynamo_error, path)
            dynamo_failure = dynamo_error
        try:
            with without_graph_dumps(), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", torch.jit.TracerWarning)
                torch.onnx.export(
                    source.module,
                    example,
                    str(path),
                    dynamo=False,
                    opset_version=OPSET,
                    verbose=False,
                    **names,
                )
        except Exception as legacy_error:
            raise_disk_error(legacy_error, path)
            raise UnsupportedExport(export_failure(source, dynamo_failure, legacy_error)) from None
    tracer = [
        str(w.message).splitlines()[0] for w in caught if w.category is torch.jit.TracerWarning
    ]
    frozen = [line for line in tracer if FROZEN_VALUE.search(line)]
    if frozen:
        path.unlink(missing_ok=True)
        raise UnsupportedExport(
            f"onnx: {source.name} has data-dependent control flow: the dynamo exporter refused it "
            f"({one_line(dynamo_failure)}) and the legacy trace froze a value computed from the "
            f"input ({frozen[0][:160]}), so the graph would keep one branch only"
        )
    return {
        "exporter": f"torch.onnx legacy TorchScript (torch {torch.__version__})",
        "opset": OPSET,
        "fallback_reason": one_line(dynamo_failure),
        "tracer_warnings": list(dict.fromkeys(tracer)),
    }


_OP_PATTERNS = (
    re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)', overload='([^']+)'\)>"),
    re.compile(r"target=torch\.ops\.([\w.]+)\]"),
    re.compile(r"Exporting the operator '?([\w:.]+)'? to ONNX"),
    re.compile(r"unrecognized namespace ([\w:.]+)"),
)


def unsupported_op(error: BaseException | None) -> str | None:
    """The operator an exporter error is about, from its message or its causes."""
    seen = 0
    while error is not None and seen < 8:
        text = str(error)
        for pattern in _OP_PATTERNS:
            match = pattern.search(text)
            if match:
                return ".".join(group for group in match.groups() if group)
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def export_failure(source: SourceModel, dynamo: BaseException, legacy: BaseException) -> str:
    op = unsupported_op(dynamo) or unsupported_op(legacy)
    if op:
        return (
            f"onnx: cannot export {source.name}: operator {op} has no ONNX translation in "
            f"torch.onnx (opset {OPSET}, dynamo and legacy exporters)"
        )
    return (
        f"onnx: cannot export {source.name}: dynamo exporter: {one_line(dynamo)}; "
        f"legacy exporter: {one_line(legacy)}"
    )


def optimise_onnx_source(source: SourceModel, path: Path) -> dict[str, Any]:
    """The user's own graph, onnxruntime's basic (hardware-independent) graph optimisations
    applied and saved: constant folding, redundant nodes removed, Conv+BN/Add/Mul fused. The
    extended and layout levels are left out: they write ORT-only contrib ops (NCHWc, fused
    Gemm+activation) that other ONNX runtimes and the quantizer do not take."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(path)
    options.log_severity_level = 3
    ort.InferenceSession(source.module.model_bytes, options, providers=["CPUExecutionProvider"])
    return {
        "exporter": f"the source ONNX graph, onnxruntime {ort.__version__} basic optimisations",
        "source_notes": list(source.notes),
    }


def check_model(path: Path) -> None:
    import onnx

    onnx.checker.check_model(str(path))
