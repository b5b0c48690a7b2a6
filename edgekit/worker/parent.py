"""The parent side of the host worker (``edgekit.worker.child``): a child process per session,
so a runtime that crashes or hangs fails its own row only. ``predict_in_child`` is one request and
one reply; ``WorkerTimer`` keeps a session loaded and times blocks on command, which is what
lets the interleaver alternate several artifacts and the baseline."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.common.fileio import journal, temporary_directory
from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact
    from edgekit.targets.manifest import Manifest

ERROR_TYPES = {"DeviceUnavailable": DeviceUnavailable, "UserInputError": UserInputError}


class ChildFailed(EdgekitError):
    """The child crashed, hung or reported an error; ``kind`` keeps the child's error type."""

    exit_code = 1


def child_env() -> dict[str, str]:
    from edgekit.worker.interference import ROOT_ENV, edgekit_root

    # a worker's noise guard counts everything under the root as edgekit's own
    return dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONWARNINGS="ignore",
        **{ROOT_ENV: str(edgekit_root())},
    )


class WorkerProcess:
    """``python -m edgekit.worker.child`` (or another ``command`` speaking the same protocol, such
    as the emulated guest) exchanging JSON lines."""

    def __init__(
        self,
        request: dict[str, Any],
        timeout_s: float,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self._process = subprocess.Popen(
            command or [sys.executable, "-m", "edgekit.worker.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env or child_env(),
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.send(request)

    def _pump(self) -> None:
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, payload: dict[str, Any]) -> None:
        try:
            self._process.stdin.write(json.dumps(payload) + "\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child is gone: receive() says why

    def receive(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The next reply; a crash, a hang or a reported error raises with the reason."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            line = self._lines.get(timeout=limit)
        except queue.Empty:
            self.kill()
            raise ChildFailed(f"timed out after {limit:.0f} s (killed)") from None
        if line is None:
            self._lines.put(None)  # the stream stays ended: a later receive() must not wait
            raise ChildFailed(self._exit_reason())
        reply = json.loads(line)
        if reply.get("event") == "error":
            kind = ERROR_TYPES.get(reply.get("error_type"), ChildFailed)
            raise kind(reply["error"])
        return reply

    def _exit_reason(self) -> str:
        code = self._process.wait()
        if code < 0:
            return f"the runtime crashed ({signal.Signals(-code).name})"
        if code > 128:  # qemu re-raises a guest's fatal signal; its exit status shows it
            try:
                return f"the runtime crashed ({signal.Signals(code - 128).name})"
            except ValueError:
                pass
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return f"the child exited with {code}: {(lines or ['no output'])[-1][:200]}"

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self._stderr.close()


def predict_in_child(
    artifact: str | Path,
    x: np.ndarray,
    accelerator: str,
    threads: int = 1,
    *,
    session_options: dict[str, Any] | None = None,
    timeout_s: float = 900.0,
    crash_for_test: str | None = None,
    manifest: Manifest | None = None,
    command: list[str] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Logits of ``x`` (NCHW float32) from the artifact, computed in an isolated child
    (``command`` starts it, as for ``WorkerProcess``)."""
    with temporary_directory("edgekit-eval-") as tmp:
        inputs, outputs = tmp / "x.npy", tmp / "y.npy"
        np.save(inputs, np.ascontiguousarray(x, dtype=np.float32))
        request = {
            "mode": "predict",
            "artifact": str(artifact),
            "accelerator": accelerator,
            "threads": threads,
            "session_options": session_options or {},
            "input": str(inputs),
            "output": str(outputs),
            "crash_for_test": crash_for_test,
            "manifest": None if manifest is None else manifest.to_dict(),  # the request is JSON
        }
        worker = WorkerProcess(request, timeout_s, command)
        try:
            reply = worker.receive()
        except ChildFailed as exc:
            raise ChildFailed(f"{Path(artifact).name}: {exc}") from None
        finally:
            worker.close()
        return np.load(outputs), reply.get("runtime", {})


class WorkerTimer(BlockTimer):
    """A session held in a host worker; ``block`` times N invokes there."""

    def __init__(
        self,
        label: str,
        request: dict[str, Any],
        sample: np.ndarray | None = None,
        timeout_s: float = 600.0,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.label = label
        self._how = (request, sample, timeout_s, command, env)  # what reopen starts again
        self._dir = tempfile.TemporaryDirectory(prefix="edgekit-bench-")
        journal(self._dir.name)
        request = dict(request, mode="serve", input=staged_sample(Path(self._dir.name), sample))
        self._worker = self.start_worker(request, timeout_s, command, env)
        try:
            ready = self._worker.receive()
        except BaseException:
            self._worker.close()
            self._dir.cleanup()
            raise
        self.load_ms, self.first_ms = ready["load_ms"], ready["first_ms"]
        self.warm_ms = max(float(ready["warm_ms"]), 1e-4)
        self.runtime = ready["runtime"]
        self.peak_rss_mb = None

    def start_worker(
        self,
        request: dict[str, Any],
        timeout_s: float,
        command: list[str] | None,
        env: dict[str, str] | None,
    ) -> WorkerProcess:
        """The worker holding the session (a board's starts it over SSH)."""
        return WorkerProcess(request, timeout_s, command, env)

    def block(self, runs: int) -> Block:
        self._worker.send({"cmd": "block", "runs": runs})
        reply = self._worker.receive()
        return Block.of(
            reply["samples_ms"],
            reply.get("foreign"),
            reply.get("steal"),
            reply.get("edgekit"),
            conditions=reply.get("conditions"),
        )

    def reopen(self) -> WorkerTimer:
        """A new child process with the same request; this one is closed first, so two
        sessions of one side never run at once."""
        self.close()
        again = self.again()
        again.load_ms, again.first_ms = self.load_ms, self.first_ms  # the first session's
        again.runtime = {**self.runtime, **again.runtime}  # what a device added to the first
        return again

    def reopen_many(self, count: int) -> list[BlockTimer]:
        """``count`` new child processes started at once (their imports overlap where the
        machine has cores to spare); this one is closed first. If one cannot start, none is
        kept open."""
        if count < 2:
            return [self.reopen()]
        self.close()

        def start(_: int) -> WorkerTimer | EdgekitError:
            try:
                return self.again()
            except EdgekitError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=count) as pool:
            started = list(pool.map(start, range(count)))
        failed = [one for one in started if isinstance(one, EdgekitError)]
        if failed:
            for one in started:
                if not isinstance(one, EdgekitError):
                    one.close()
            raise failed[0]
        for one in started:
            one.load_ms, one.first_ms = self.load_ms, self.first_ms
            one.runtime = {**self.runtime, **one.runtime}
        return started

    def again(self) -> WorkerTimer:
        """A new session of the same request (a subclass that holds more makes its own)."""
        return WorkerTimer(self.label, *self._how)

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self._worker.send({"cmd": "close"})
        with contextlib.suppress(EdgekitError):
            closed = self._worker.receive(timeout_s=60)
            self.peak_rss_mb, self.memory = closed.get("peak_rss_mb"), closed.get("memory")
        self._worker.close()
        self._dir.cleanup()


@functools.cache
def trivial_fields(target: str) -> dict[str, Any]:
    """A request's fields naming the target's trivial model, which the child loads first: the
    runtime's memory floor (``edgekit.worker.memory``); None where the target ships none."""
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.targets import get_target

    path = get_target(target).trivial_model()
    if path is None:
        return {"trivial": None, "trivial_manifest": None}
    return {"trivial": str(path), "trivial_manifest": load_artifact(path).manifest.to_dict()}


def artifact_timer(
    artifact: Artifact,
    accelerator: str,
    threads: int,
    sample: np.ndarray | None,
    protocol: LatencyProtocol,
    timeout_s: float,
    *,
    session_options: dict[str, Any] | None = None,
    command: list[str] | None = None,
    synthetic_delay_ms: float | None = None,
) -> WorkerTimer:
    """A ``WorkerTimer`` holding ``artifact`` open on ``accelerator`` (``cpu``/``gpu``),
    warmed up by ``protocol``: what a device that runs artifacts on this machine returns from
    ``timer`` (``command`` starts the child another way, as a plugin device may)."""
    request = {
        "what": "artifact",
        "artifact": str(artifact.path),
        "accelerator": accelerator,
        "threads": threads,
        "warmup": protocol.warmup,
        "session_options": session_options or {},
        "synthetic_delay_ms": synthetic_delay_ms,
        "manifest": artifact.manifest.to_dict(),  # the request is JSON
        **trivial_fields(artifact.target),
    }
    return WorkerTimer(artifact.label, request, sample, timeout_s, command)


def sample_for(artifact: Artifact, sample: np.ndarray | None) -> np.ndarray | None:
    """The input a timer reuses: ``sample``, or for a classifier timed without data a seeded
    random image of its input shape (a remote worker has no dataset to take one from)."""
    if sample is not None or not artifact.classifier:
        return sample
    from edgekit.sources.preprocess import Preprocess

    shape = Preprocess.from_dict(artifact.manifest.preprocessing).input_shape()
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def staged_sample(directory: Path, sample: np.ndarray | None) -> str | None:
    """Write the one input every timed invoke reuses (staged outside the timed region)."""
    if sample is None:
        return None
    path = Path(directory) / "x.npy"
    np.save(path, np.ascontiguousarray(sample[:1], dtype=np.float32))
    return str(path)
