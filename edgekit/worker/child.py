"""The child process every host measurement runs in, so a runtime or delegate that crashes or
hangs becomes a failed row instead of a dead report.

One JSON request on stdin. Mode ``predict`` writes logits for an .npy of inputs to an .npy and
exits; mode ``memory`` measures a session's memory phase by phase (``edgekit.worker.memory``).
Mode ``serve`` loads a session (an artifact, or the ``baseline``: the source model in its
own framework), warms it up, then answers commands line by line: ``{"cmd": "block", "runs": N}``
times N single invokes (the reply carries the block's conditions: frequency, temperature,
throttling, ``edgekit.worker.conditions``); ``{"cmd": "close"}`` ends it. Replies are JSON
lines on the original stdout; the libraries' own prints go to stderr."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from edgekit.worker.loop import crash_for_test, first_invoke_ms, timed_block, warm_up


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


class Runnable:
    """What serve times: ``invoke(staged)`` plus an optional device ``sync``."""

    def __init__(
        self,
        invoke: Callable[[Any], Any],
        staged: object,
        runtime: dict,
        sync: Callable[[], object] | None = None,
        close: Callable[[], object] | None = None,
    ):
        self.invoke, self.staged, self.runtime, self.sync = invoke, staged, runtime, sync
        self._close = close

    def close(self) -> None:
        if self._close:
            self._close()


def _artifact_runnable(request: dict[str, Any]) -> Runnable:
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.common.quiet import quiet_native
    from edgekit.targets import get_target
    from edgekit.targets.session import Accelerator

    artifact = load_artifact(
        request["artifact"], verify_digest=False, manifest=request.get("manifest")
    )
    target = get_target(artifact.target)
    with quiet_native():
        session = target.open(
            artifact.path,
            artifact.manifest,
            Accelerator(request["accelerator"]),
            request["threads"],
            **request.get("session_options", {}),
        )
    if not artifact.classifier:  # no image input: random tensors of the file's own specs
        from edgekit.targets.session import random_inputs

        staged = session.stage_raw(random_inputs(artifact.manifest.inputs))
        return Runnable(session.invoke, staged, dict(session.info), close=session.close)
    sample = np.load(request["input"]) if request.get("input") else None
    if sample is None:
        from edgekit.sources.preprocess import Preprocess

        pre = Preprocess.from_dict(artifact.manifest.preprocessing)
        sample = np.random.default_rng(0).standard_normal(pre.input_shape()).astype(np.float32)
    return Runnable(session.invoke, session.stage(sample), dict(session.info), close=session.close)


def _baseline_runnable(request: dict[str, Any]) -> Runnable:
    import torch

    from edgekit.sources.load import reload_model

    torch.set_num_threads(request["threads"])
    source = reload_model(request["source"])
    use_cuda = source.framework == "torch" and torch.cuda.is_available() and request["cuda"]
    sample = np.load(request["input"]) if request.get("input") else source.example_input()
    if source.framework != "torch":
        staged = sample.transpose(0, 2, 3, 1) if source.preprocess.layout == "NHWC" else sample
        name = "keras" if source.framework == "keras" else f"{source.framework} (its runtime)"
        invoke = (
            (lambda x: source.module(x, training=False))
            if source.framework == "keras"
            else source.module
        )
        return Runnable(invoke, staged, {"runtime": name, "device": "host CPU"})
    device = torch.device("cuda" if use_cuda else "cpu")
    module = source.module.to(device)

    def invoke(x: torch.Tensor) -> Any:
        with torch.no_grad():
            return module(x)

    where = f"CUDA ({torch.cuda.get_device_name(0)})" if use_cuda else "host CPU"
    runtime = {"runtime": f"torch {torch.__version__} eager", "device": where}
    sync = torch.cuda.synchronize if use_cuda else None
    return Runnable(invoke, torch.from_numpy(sample).to(device), runtime, sync)


def _with_delay(runnable: Runnable, delay_ms: float) -> Runnable:
    """A candidate of known extra cost: a busy wait of ``delay_ms`` after each invoke (the
    benchmarks measure how well a latency gate catches it)."""
    inner = runnable.invoke

    def slower(x: object) -> Any:
        result = inner(x)
        until = time.perf_counter() + delay_ms / 1e3
        while time.perf_counter() < until:
            pass
        return result

    runnable.invoke = slower
    runnable.runtime["synthetic_delay_ms"] = delay_ms
    return runnable


def serve(request: dict[str, Any], reply: Callable[[dict[str, Any]], None]) -> None:
    from edgekit.worker.conditions import block_conditions, read_conditions
    from edgekit.worker.interference import ForeignCpu
    from edgekit.worker.memory import Phases, keep_everything

    phases = Phases(request, _artifact_runnable)  # the runtime's floor first, where it tells
    started = time.perf_counter()
    maker = _baseline_runnable if request["what"] == "baseline" else _artifact_runnable
    runnable = maker(request)
    phases.loaded()
    if os.environ.get("EDGEKIT_TEST_LEAK"):
        keep_everything(runnable)
    if request.get("synthetic_delay_ms"):
        runnable = _with_delay(runnable, float(request["synthetic_delay_ms"]))
    load_ms = (time.perf_counter() - started) * 1e3
    first_ms = first_invoke_ms(runnable.invoke, runnable.staged, runnable.sync)
    warm_ms = warm_up(runnable.invoke, runnable.staged, request["warmup"], runnable.sync)
    runtime = dict(runnable.runtime, threads=request["threads"])
    reply(
        {
            "event": "ready",
            "load_ms": load_ms,
            "first_ms": first_ms,
            "warm_ms": warm_ms,
            "runtime": runtime,
        }
    )
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "close":
            break
        crash_for_test(
            request.get("crash_for_test") or os.environ.get("EDGEKIT_TEST_CRASH"), "block"
        )
        before = read_conditions()  # outside the guard's window and the timed block
        guard = ForeignCpu()
        guard.start()
        samples = timed_block(runnable.invoke, runnable.staged, command["runs"], runnable.sync)
        reading = guard.stop()
        after = read_conditions()
        phases.ran(command["runs"])  # outside the timed block
        reply(
            {
                "event": "block",
                "samples_ms": samples,
                "foreign": None if reading is None else reading.foreign,
                "steal": None if reading is None else reading.steal,
                "edgekit": None if reading is None else reading.edgekit,
                "conditions": block_conditions(before, after),
            }
        )
    phases.before_release()
    runnable.close()
    del runnable
    memory = phases.released()
    # VmHWM (since exec) where known: ru_maxrss keeps the parent's size from before the exec
    peak = peak_rss_mb() if memory["process_peak_kb"] is None else memory["process_peak_kb"] / 1024
    reply({"event": "closed", "peak_rss_mb": peak, "memory": memory})


def predict(request: dict[str, Any]) -> dict[str, Any]:
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.common.quiet import quiet_native
    from edgekit.targets import get_target
    from edgekit.targets.session import Accelerator

    artifact = load_artifact(
        request["artifact"], verify_digest=False, manifest=request.get("manifest")
    )
    with quiet_native():
        session = get_target(artifact.target).open(
            artifact.path,
            artifact.manifest,
            Accelerator(request["accelerator"]),
            request["threads"],
            **request.get("session_options", {}),
        )
    outputs = session.predict(np.load(request["input"]))
    np.save(request["output"], outputs)
    info = dict(session.info)
    session.close()
    return {"event": "done", "runtime": info, "shape": list(outputs.shape)}


def main() -> None:
    warnings.filterwarnings("ignore")
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the replies

    def reply(payload: dict[str, Any]) -> None:
        protocol.write(json.dumps(payload) + "\n")
        protocol.flush()

    request = json.loads(sys.stdin.readline())
    crash_for_test(request.get("crash_for_test") or os.environ.get("EDGEKIT_TEST_CRASH"), "start")
    try:
        if request["mode"] == "serve":
            serve(request, reply)
        elif request["mode"] == "memory":
            from edgekit.worker.memory import probe

            probe(request, _artifact_runnable, reply)
        else:
            reply(predict(request))
    except Exception as exc:  # reported as a failed row by the parent
        from edgekit.errors import EdgekitError, first_line

        message = first_line(exc, 300)
        error = message if isinstance(exc, EdgekitError) else f"{type(exc).__name__}: {message}"
        reply({"event": "error", "error": error, "error_type": type(exc).__name__})


if __name__ == "__main__":
    from edgekit.common.shutdown import collect_once_at_exit

    collect_once_at_exit()  # before the runtime's import (edgekit.common.shutdown)
    main()
