"""Runs one artifact inside the emulated aarch64 CPython, where only numpy and the runtimes'
aarch64 wheels exist: no torch, no edgekit. It imports the target's own session module from a
throwaway tree of the installed files (``emulator.guest_tree``), so staging, quantization and
dequantization are the host's code, not a copy. It speaks the host worker's protocol: one JSON
request on stdin, then (``serve``) ``block`` commands, replies as JSON lines on stdout."""

import importlib
import json
import os
import platform
import resource
import sys
import time
from types import ModuleType

import numpy as np

from edgekit.targets.manifest import Manifest
from edgekit.targets.session import Accelerator, random_inputs
from edgekit.worker.conditions import block_conditions, read_conditions
from edgekit.worker.loop import crash_for_test, first_invoke_ms, timed_block, warm_up


def cpu_facts() -> dict:
    """What the (emulated) /proc/cpuinfo says: QEMU >= 10 synthesises it from QEMU_CPU (the
    part number is the core's MIDR part: 0xd0b Cortex-A76, 0xd03 A53, 0xd0c Neoverse N1...)."""
    facts = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("CPU part", "Features") and key not in facts:
                    facts[key] = value.strip()
    except OSError:
        pass
    return {"cpu_part": facts.get("CPU part", "?"), "cpu_features": facts.get("Features", "?")}


# what /proc/self/status shows in QEMU's user mode: the emulator's process, the guest inside it
QEMU_NOTE = (
    "measured in QEMU's user-mode process: the guest's memory and QEMU's own (its "
    "translated code), whose share the floor's trivial model mostly takes out"
)


class _Opened:
    """The target's trivial model open in the guest, as ``edgekit.worker.memory`` opens one."""

    def __init__(self, module: ModuleType, request: dict) -> None:
        manifest = Manifest(request["manifest"])
        self.session = module.open_session(
            request["artifact"], manifest, Accelerator(request["accelerator"]), 1
        )
        self.staged = self.session.stage_raw(random_inputs(manifest.inputs))
        self.invoke = self.session.invoke

    def close(self) -> None:
        self.session.close()


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(payload: dict) -> None:
        replies.write(json.dumps(payload) + "\n")
        replies.flush()

    request = json.loads(sys.stdin.readline())
    crash_for_test(os.environ.get("EDGEKIT_TEST_CRASH"), "start")  # the tests prove isolation
    try:
        module = importlib.import_module(request["session_module"])
        phases = None
        if request["mode"] != "predict":  # the runtime's floor first, as the host's worker does
            from edgekit.worker.memory import Phases

            phases = Phases(request, lambda trivial: _Opened(module, trivial))
        started = time.perf_counter()
        manifest = Manifest(request["manifest"])
        session = module.open_session(
            request["artifact"],
            manifest,
            Accelerator(request["accelerator"]),
            request["threads"],
            **request.get("session_options", {}),
        )
        load_ms = (time.perf_counter() - started) * 1e3
        if phases is not None:
            phases.loaded()
        runtime = dict(
            session.info,
            machine=platform.machine(),
            **cpu_facts(),
            python=sys.version.split()[0],
            numpy=np.__version__,
        )
        if request["mode"] == "predict":
            outputs = session.predict(np.load(request["input"]))
            np.save(request["output"], outputs)
            reply({"event": "done", "runtime": runtime, "shape": list(outputs.shape)})
            return
        if not manifest.classifier:
            staged = session.stage_raw(random_inputs(manifest.inputs))
        else:
            staged = session.stage(np.load(request["input"]))
        first_ms = first_invoke_ms(session.invoke, staged)
        warm_ms = warm_up(session.invoke, staged, request["warmup"])
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
            crash_for_test(os.environ.get("EDGEKIT_TEST_CRASH"), "block")
            before = read_conditions()  # under QEMU user mode, /sys is the host's
            samples = timed_block(session.invoke, staged, command["runs"])
            after = read_conditions()
            phases.ran(command["runs"])
            reply(
                {
                    "event": "block",
                    "samples_ms": samples,
                    "foreign": None,
                    "steal": None,
                    "conditions": block_conditions(before, after),
                }
            )
        phases.before_release()
        session.close()
        del session
        memory = dict(phases.released(), note=QEMU_NOTE)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        if memory["process_peak_kb"] is not None:
            rss = memory["process_peak_kb"] / 1024.0
        reply({"event": "closed", "peak_rss_mb": rss, "memory": memory})
    except Exception as exc:  # a failed row with the reason, not a traceback
        message = str(exc).splitlines()[0] if str(exc) else ""
        reply({"event": "error", "error": f"{type(exc).__name__}: {message}"})


if __name__ == "__main__":
    from edgekit.common.shutdown import collect_once_at_exit

    collect_once_at_exit()  # under emulation the exit's collections cost more still
    main()
