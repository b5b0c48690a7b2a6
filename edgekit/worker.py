"""The child process every cpu/gpu measurement runs in, so a runtime or delegate that crashes
or hangs becomes a failed row instead of a dead report.

Reads one JSON request on stdin, writes one JSON result on stdout (after a marker line, since
runtimes print to stdout too). Modes: ``bench`` (latency protocol), ``predict`` (logits for an
.npy of inputs, written to an .npy), ``baseline`` (the source model in its own framework)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import warnings
from typing import Any

import numpy as np

RESULT_MARKER = "@@edgekit-result@@"


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def timed_loop(
    invoke: Any, staged: Any, protocol: dict[str, Any], sync: Any = None
) -> dict[str, Any]:
    """Warm-up, then time single invokes until both the minimum count and time are reached."""
    from edgekit.noise import ForeignCpu

    for _ in range(protocol["warmup"]):
        invoke(staged)
    if sync:
        sync()
    samples: list[float] = []
    guard = ForeignCpu()
    guard.start()
    started = time.perf_counter()
    clock = time.perf_counter_ns
    while True:
        begin = clock()
        invoke(staged)
        if sync:
            sync()
        samples.append((clock() - begin) / 1e6)
        elapsed = time.perf_counter() - started
        enough = len(samples) >= protocol["min_runs"] and elapsed >= protocol["min_seconds"]
        if enough or elapsed >= protocol["max_seconds"] or len(samples) >= protocol["max_runs"]:
            break
    return {"samples_ms": samples, "foreign_cpu": guard.stop(), "loop_seconds": elapsed}


def _bench_artifact(request: dict[str, Any]) -> dict[str, Any]:
    from edgekit.artifact import load_artifact
    from edgekit.targets import get_target

    artifact = load_artifact(request["artifact"], verify_digest=False)
    target = get_target(artifact.target)
    started = time.perf_counter()
    session = target.open(artifact.path, artifact.manifest, request["device"], request["threads"])
    load_ms = (time.perf_counter() - started) * 1e3
    sample = np.load(request["input"]) if request.get("input") else None
    if sample is None:
        from edgekit.preprocess import Preprocess

        pre = Preprocess.from_dict(artifact.manifest["preprocessing"])
        sample = np.random.default_rng(0).standard_normal(pre.input_shape()).astype(np.float32)
    staged = session.stage(sample)
    begin = time.perf_counter()
    session.invoke(staged)
    first_ms = (time.perf_counter() - begin) * 1e3
    result = timed_loop(session.invoke, staged, request["protocol"])
    result.update(load_ms=load_ms, first_ms=first_ms, runtime=dict(session.info))
    session.close()
    return result


def _predict_artifact(request: dict[str, Any]) -> dict[str, Any]:
    from edgekit.artifact import load_artifact
    from edgekit.targets import get_target

    artifact = load_artifact(request["artifact"], verify_digest=False)
    session = get_target(artifact.target).open(
        artifact.path, artifact.manifest, request["device"], request["threads"]
    )
    outputs = session.predict(np.load(request["input"]))
    np.save(request["output"], outputs)
    info = dict(session.info)
    session.close()
    return {"runtime": info, "shape": list(outputs.shape)}


def _bench_baseline(request: dict[str, Any]) -> dict[str, Any]:
    import torch

    from edgekit.models import load_model

    torch.set_num_threads(request["threads"])
    started = time.perf_counter()
    source = load_model(request["model"], quiet=True)
    use_cuda = (
        source.framework == "torch" and torch.cuda.is_available() and request["device"] != "cpu"
    )
    sample = np.load(request["input"]) if request.get("input") else source.example_input()
    sync = None
    if source.framework == "torch":
        device = torch.device("cuda" if use_cuda else "cpu")
        module = source.module.to(device)
        staged = torch.from_numpy(sample).to(device)
        if use_cuda:
            sync = torch.cuda.synchronize

        def invoke(x: Any) -> Any:
            with torch.no_grad():
                return module(x)

        where = f"CUDA ({torch.cuda.get_device_name(0)})" if use_cuda else "host CPU"
        runtime = {"runtime": f"torch {torch.__version__} eager", "device": where}
    else:
        staged = sample.transpose(0, 2, 3, 1) if source.preprocess.layout == "NHWC" else sample

        def invoke(x: Any) -> Any:
            return source.module(x, training=False)

        runtime = {"runtime": "keras", "device": "host CPU"}
    load_ms = (time.perf_counter() - started) * 1e3
    begin = time.perf_counter()
    invoke(staged)
    if sync:
        sync()
    first_ms = (time.perf_counter() - begin) * 1e3
    result = timed_loop(invoke, staged, request["protocol"], sync)
    runtime["threads"] = request["threads"]
    result.update(load_ms=load_ms, first_ms=first_ms, runtime=runtime)
    return result


MODES = {"bench": _bench_artifact, "predict": _predict_artifact, "baseline": _bench_baseline}


def main() -> None:
    warnings.filterwarnings("ignore")
    request = json.loads(sys.stdin.read())
    if request.get("crash_for_test") == "segfault":  # lets the tests prove isolation
        import ctypes

        ctypes.string_at(0)
    if request.get("crash_for_test") == "hang":
        time.sleep(3600)
    try:
        result = MODES[request["mode"]](request)
        result["status"] = "ok"
    except Exception as exc:  # reported as a failed row by the parent
        from edgekit.errors import EdgekitError

        first = str(exc).splitlines()[0] if str(exc) else ""
        error = first if isinstance(exc, EdgekitError) else f"{type(exc).__name__}: {first}"
        result = {"status": "failed", "error": error, "error_type": type(exc).__name__}
    result["peak_rss_mb"] = _peak_rss_mb()
    sys.stdout.flush()
    os.write(1, (f"\n{RESULT_MARKER}\n" + json.dumps(result) + "\n").encode())


if __name__ == "__main__":
    main()
