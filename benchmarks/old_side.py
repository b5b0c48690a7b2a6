"""The "before" side of ``before_after.py``: runs inside an older edgekit tree (put first on
PYTHONPATH by that script) and uses only what that tree offered (``load_model``,
``load_dataset``, ``export_artifact``, ``get_target(name).open(path, manifest, "cpu", threads)``
with ``stage``/``invoke``), so one file serves any commit since the worker had sessions.

    python old_side.py export MODEL DATASET OUT_DIR      # every target x recipe, one JSON line
    python old_side.py                                   # serve: edgekit.worker's line protocol

Serve speaks the protocol of today's host worker (one request line, a ``ready`` reply, then
``block``/``close`` commands), so today's interleaver alternates it with today's sessions. The
timed loop is the same single-invoke loop as ``edgekit.loop.timed_block``, written out here
because the old tree has no such module."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

RECIPES = ("fp32", "fp16", "int8", "int8-dynamic")


def export(model: str, dataset_spec: str, out_dir: str) -> None:
    from edgekit.data import load_dataset
    from edgekit.errors import EdgekitError
    from edgekit.export import export_artifact
    from edgekit.models import load_model
    from edgekit.targets import TARGET_MODULES

    source = load_model(model, quiet=True)
    dataset = load_dataset(dataset_spec, source.preprocess)
    made = {}
    for target in TARGET_MODULES:
        for recipe in RECIPES:
            try:
                result = export_artifact(
                    source, dataset, target, recipe, out_dir,
                    calibration_samples=32, validation_samples=16,
                )  # fmt: skip
                made[f"{target}/{recipe}"] = str(result.artifact.path)
            except EdgekitError as exc:
                print(f"{target}/{recipe}: {exc}", file=sys.stderr)
    print(json.dumps(made))


def timed_block(invoke, staged, runs: int) -> list[float]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        begin = clock()
        invoke(staged)
        samples.append((clock() - begin) / 1e6)
    return samples


def serve(reply) -> None:
    import edgekit
    from edgekit.artifact import load_artifact
    from edgekit.targets import get_target

    request = json.loads(sys.stdin.readline())
    started = time.perf_counter()
    artifact = load_artifact(request["artifact"], verify_digest=False)
    session = get_target(artifact.target).open(
        artifact.path, artifact.manifest, "cpu", request["threads"]
    )
    staged = session.stage(np.load(request["input"]))
    load_ms = (time.perf_counter() - started) * 1e3
    first_ms = timed_block(session.invoke, staged, 1)[0]
    begin = time.perf_counter()
    for _ in range(max(request["warmup"], 1)):
        session.invoke(staged)
    warm_ms = (time.perf_counter() - begin) * 1e3 / max(request["warmup"], 1)
    runtime = dict(session.info, threads=request["threads"], edgekit_tree=edgekit.__file__)
    reply({"event": "ready", "load_ms": load_ms, "first_ms": first_ms, "warm_ms": warm_ms,
           "runtime": runtime})  # fmt: skip
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "close":
            break
        samples = timed_block(session.invoke, staged, command["runs"])
        reply({"event": "block", "samples_ms": samples, "foreign": None, "steal": None})
    session.close()
    reply({"event": "closed", "peak_rss_mb": None})


def main() -> None:
    warnings.filterwarnings("ignore")
    if len(sys.argv) > 1 and sys.argv[1] == "export":
        export(*sys.argv[2:5])
        return
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what a runtime prints goes to stderr, not into the replies

    def reply(payload: dict) -> None:
        protocol.write(json.dumps(payload) + "\n")
        protocol.flush()

    try:
        serve(reply)
    except Exception as exc:  # the parent turns it into a failed side
        reply({"event": "error", "error": f"{type(exc).__name__}: {exc}"[:300]})


if __name__ == "__main__":
    main()
