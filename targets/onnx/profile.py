"""onnxruntime's own per-node times: session profiling (``enable_profiling``) over timed runs,
each node's ``_kernel_time`` events averaged, named as the optimised graph names them (the
census reads the same graph)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from edgekit.common.fileio import temporary_directory
from edgekit.targets.manifest import Manifest
from edgekit.targets.onnx.session import CPU_PROVIDER, create_session, session_options
from edgekit.targets.profiling import Event, OpTimes
from edgekit.targets.session import random_inputs


def profile(path: Path, manifest: Manifest, threads: int, runs: int, warmup: int) -> OpTimes:
    import onnxruntime as ort

    with temporary_directory("edgekit-onnx-profile-") as work:
        options = session_options(threads)
        options.enable_profiling = True
        options.profile_file_prefix = str(work / "profile")
        # the census reads the graph a session saves; saving changes which optimisations run
        # (and node names), so the profiled session saves it too
        options.optimized_model_filepath = str(work / "optimized.onnx")
        options.log_severity_level = 3
        session = create_session(Path(path), options, [CPU_PROVIDER])
        specs = [
            {
                "shape": [1 if not isinstance(d, int) else d for d in arg.shape],
                "dtype": _dtype(arg.type),
            }
            for arg in session.get_inputs()
        ]
        feed = {
            arg.name: x for arg, x in zip(session.get_inputs(), random_inputs(specs), strict=True)
        }
        for _ in range(warmup + runs):
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    cutoff = starts[warmup] if len(starts) > warmup else 0  # the warm-up runs are not counted
    per_node: dict[str, list[float]] = {}
    order: list[str] = []
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        if event["ts"] < cutoff:
            continue
        node = event["name"].removesuffix("_kernel_time")
        if node not in per_node:
            order.append(node)
        per_node.setdefault(node, []).append(event["dur"] / 1000.0)
    totals = [
        e["dur"] / 1000.0 for e in events if e.get("name") == "model_run" and e["ts"] >= cutoff
    ]
    return OpTimes(
        method=f"onnxruntime {ort.__version__} session profiling (enable_profiling), "
        f"{runs} runs after {warmup} warm-up",
        events=[Event(node, sum(per_node[node]) / runs, op=node) for node in order],
        runs=runs,
        run_ms=float(np.median(totals)) if totals else None,
        notes=["node times in microseconds, as onnxruntime's profiler records them"],
    )


def _dtype(ort_type: str) -> str:
    return {
        "tensor(float16)": "float16",
        "tensor(uint8)": "uint8",
        "tensor(int8)": "int8",
        "tensor(int64)": "int64",
        "tensor(int32)": "int32",
    }.get(ort_type, "float32")
