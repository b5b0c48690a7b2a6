"""ExecuTorch's own per-op times: the pip runtime records an ETDump (``enable_etdump``) in
which XNNPACK reports each of its operators and the portable kernels each call; the devtools
Inspector reads it. Named as XNNPACK names its operators, so they are placed on the census by
alignment (``edgekit.targets.profiling.place``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from edgekit.common.fileio import temporary_directory
from edgekit.targets.manifest import Manifest
from edgekit.targets.profiling import Event, OpTimes
from edgekit.targets.session import random_inputs

FRAME_EVENTS = {
    "DELEGATE_CALL",
    "Method::execute",
    "OPERATOR_CALL",
    "Method::init",
    "Program::load_method",
}


def profile(path: Path, manifest: Manifest, threads: int, runs: int, warmup: int) -> OpTimes:
    import torch
    from executorch.devtools import Inspector
    from executorch.extension.pybindings import portable_lib

    from edgekit.targets.executorch.convert import quiet_library_noise
    from edgekit.targets.executorch.session import loading, set_threads

    quiet_library_noise()
    set_threads(threads)
    specs = manifest.inputs
    inputs = [torch.from_numpy(x) for x in random_inputs(specs)]
    with temporary_directory("edgekit-etdump-") as work:
        with loading(path):
            program = portable_lib._load_program(str(path), enable_etdump=True, debug_buffer_size=0)
            method = program.load_method("forward")
        for _ in range(warmup + runs):
            method.call(inputs)
        program.write_etdump_result_to_file(str(work / "run.etdp"), str(work / "debug.bin"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Output Buffer not found": no tensor data asked
            frame = Inspector(etdump_path=str(work / "run.etdp")).to_dataframe()
    rows = frame[frame["event_block_name"] == "Execute"]
    events, whole = [], None
    for _, row in rows.iterrows():
        raw = [float(v) for v in row["raw"]][-runs:]  # the last ``runs`` invokes, in ms
        if row["event_name"] == "Method::execute":
            whole = float(np.median(raw))
        if row["event_name"] in FRAME_EVENTS:
            continue
        events.append(Event(_name(row["event_name"]), sum(raw) / max(len(raw), 1)))
    import executorch

    return OpTimes(
        method=f"ExecuTorch {getattr(executorch, '__version__', '')} ETDump (enable_etdump) "
        f"read by the devtools Inspector, {runs} runs after {warmup} warm-up".replace("  ", " "),
        events=events,
        runs=runs,
        run_ms=whole,
        notes=["XNNPACK reports its operators in microseconds"],
    )


def _name(event: str) -> str:
    """``Convolution (NHWC, QC8) IGEMM #3`` -> the operator without its ordinal."""
    head, _, tail = event.rpartition(" #")
    return head if tail.isdigit() else event
