"""What of a .pte runs on the fast path, from its census (the instruction list of the execution
plan, and the XNNPACK subgraph stored in each delegate payload, decoded here with the ``flatc``
that executorch ships). Anything outside the delegate runs on ExecuTorch's portable kernels,
which are about 100x slower. The counts are ``edgekit.targets.census.coverage_of``'s; this
module gives the format's words."""

from __future__ import annotations

import json
import re
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

from edgekit.common.fileio import temporary_directory
from edgekit.targets.base import Coverage
from edgekit.targets.census import Census, CensusOp, counted, coverage_of
from edgekit.targets.manifest import Manifest

XNNPACK_BACKEND = "XnnpackBackend"
PORTABLE = "portable kernels"  # where the census places an op outside every delegate

# XNNPACK value types of an int8 activation: static (qint8/quint8) or dynamic (qdint8/qpint8)
XNN_INT8_ACTIVATIONS = {
    "xnn_datatype_qint8",
    "xnn_datatype_quint8",
    "xnn_datatype_qdint8",
    "xnn_datatype_qpint8",
}


def coverage(path: Path, manifest: Manifest, census: Census) -> Coverage:
    """What runs inside XNNPACK and what on the portable kernels, from the file's census."""
    found = census

    def words(census: Census, quantized: bool) -> list[str]:  # noqa: FBT001 (coverage_of calls it positionally)
        return summary(census) + _details_note(manifest, quantized=quantized)

    return coverage_of(
        found,
        manifest,
        words,
        # a transpose outside the delegate (XNNPACK's own, at its layout boundary, is fast)
        transpose=lambda op: op.where == PORTABLE and _base(op) == "aten::permute_copy",
        fallback=_base,
    )


def _base(op: CensusOp) -> str:
    """A portable kernel's operator name without its overload (``aten::add``)."""
    return op.op.partition(".")[0]


def delegate_payload(program: Any, delegate: Any) -> bytes | None:
    from executorch.exir.schema import DataLocation

    reference = delegate.processed
    if reference.location == DataLocation.INLINE:
        return bytes(program.backend_delegate_data[reference.index].data)
    return None  # deserialize_pte_binary moves segments inline; anything else is unexpected


def xnnpack_graph(payload: bytes | None) -> dict[str, Any] | None:
    """The XNNPACK subgraph (XNNGraph flatbuffer) of a delegate payload, as JSON via flatc."""
    if not payload:
        return None
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader
    from executorch.exir._serialize._flatbuffer import _get_flatc_path

    flatbuffer = payload
    if payload[4:8] == XNNHeader.EXPECTED_MAGIC:  # header + flatbuffer + constant data
        header = XNNHeader.from_bytes(payload[: XNNHeader.EXPECTED_LENGTH])
        start = header.flatbuffer_offset
        flatbuffer = payload[start : start + header.flatbuffer_size]
    schema = (
        resources.files("executorch.backends.xnnpack.serialization")
        .joinpath("schema.fbs")
        .read_bytes()
    )
    with temporary_directory("edgekit-xnngraph-") as folder:
        tmp = str(folder)
        (folder / "schema.fbs").write_bytes(schema)
        (folder / "graph.bin").write_bytes(flatbuffer)
        command = [_get_flatc_path(), "--json", "--strict-json", "--defaults-json"]
        command += ["--raw-binary", "-o", tmp, str(folder / "schema.fbs"), "--"]
        command.append(str(folder / "graph.bin"))
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=60)
            return json.loads(_strict((folder / "graph.json").read_text()))
        except (OSError, subprocess.SubprocessError, ValueError):
            return None


def _strict(text: str) -> str:
    """flatc writes a fused ReLU's unbounded clamp as a bare ``inf`` (and ``nan``), which
    strict JSON lacks: spell them as Python's json reads them."""
    text = re.sub(r"(?<=[:\[,\s])(-?)inf\b", r"\1Infinity", text)
    return re.sub(r"(?<=[:\[,\s])-?nan\b", "NaN", text)


def summary(census: Census) -> list[str]:
    inside = [op.op.removeprefix("XNN") for op in census.ops if op.where == "XNNPACK"]
    kernels = [_base(op) for op in census.ops if op.where == PORTABLE]
    inside_text = counted(inside, most_common=True, times=" ")
    kernel_text = counted(kernels, most_common=True)
    calls = census.facts.get("delegate_calls", 0)
    lines = [
        f"{calls} delegate call(s) holding {len(inside)} XNNPACK node(s)"
        + (f" ({inside_text})" if inside_text else ""),
        f"{len(kernels)} portable kernel call(s) outside the delegate"
        + (f": {kernel_text}" if kernel_text else ""),
    ]
    transposes = inside.count("StaticTranspose")
    if transposes:
        lines.append(f"{transposes} NCHW/NHWC transpose(s) inside XNNPACK (its layout boundary)")
    sources = sorted(set(census.facts.get("delegate_sources", [])))
    lines.append("read from the .pte: " + ("; ".join(sources) or "no delegates"))
    return lines


def _details_note(manifest: Manifest, *, quantized: bool) -> list[str]:
    """Export-time counts from the manifest (the file does not keep the torch graph)."""
    details = manifest.details
    if "delegated_nodes" not in details:
        return []
    note = f"export-time (manifest details): {details['delegated_nodes']} edge nodes delegated"
    if quantized and "conv_linear_nodes" in details:
        note += (
            f", {details['quantized_conv_linear_nodes']}/{details['conv_linear_nodes']} "
            "conv/linear with int8 weights"
        )
    return [note]
