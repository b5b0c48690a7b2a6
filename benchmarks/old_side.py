"""The "before" side of ``before_after.py``: runs inside an older edgekit tree (put first on
PYTHONPATH by that script) and uses only what that tree offered (``load_model``,
``load_dataset``, ``export_artifact``, ``get_target(name).open(path, manifest, "cpu", threads)``
with ``stage``/``invoke``), so one file serves any commit since the worker had sessions. Its imports are the old module
paths, which a tree after the move (one folder per stage) still serves, under a warning.

    python old_side.py export MODEL DATASET OUT_DIR      # every target x recipe, one JSON line
    python old_side.py                                   # serve: edgekit.worker's line protocol

Serve speaks the protocol of today's host worker (one request line, a ``ready`` reply, then
``block``/``close`` commands), so today's interleaver alternates it with today's sessions. It
times with today's ``edgekit/worker/loop.py`` (numpy and time only), loaded by path because the old
tree's ``edgekit`` comes first on the path: both sides run the very same timed loop."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import warnings
from pathlib import Path

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


def today_loop():
    """This checkout's edgekit/worker/loop.py, not the old tree's (which has none)."""
    path = Path(__file__).resolve().parent.parent / "edgekit" / "worker" / "loop.py"
    spec = importlib.util.spec_from_file_location("edgekit_today_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    loop = today_loop()
    first_ms = loop.first_invoke_ms(session.invoke, staged)
    warm_ms = loop.warm_up(session.invoke, staged, request["warmup"])
    runtime = dict(session.info, threads=request["threads"], edgekit_tree=edgekit.__file__)
    reply({"event": "ready", "load_ms": load_ms, "first_ms": first_ms, "warm_ms": warm_ms,
           "runtime": runtime})  # fmt: skip
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "close":
            break
        samples = loop.timed_block(session.invoke, staged, command["runs"])
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
