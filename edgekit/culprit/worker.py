"""The parent's side of the culprit's worker process: start it, ask it for one block at a time
under a deadline, and turn its death into "crash" and its silence into "hang". A worker that
crashed or hung is killed and the next request starts a fresh one."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from edgekit.common.children import child_environment, last_words
from edgekit.common.fileio import journal
from edgekit.culprit.outcome import Outcome
from edgekit.errors import UnsupportedExport

STARTUP_S = 600.0  # loading the model and recording its blocks, before any conversion


@dataclass
class WorkerRequest:
    source: dict[str, Any]  # spec and load options (SourceModel.to_manifest)
    data: str
    target: str
    recipe: str
    checks: int = 8
    calibration: int = 32


class BlockWorker:
    """One worker process at a time; ``attempt`` never raises for what the block does."""

    def __init__(self, request: WorkerRequest, timeout_s: float) -> None:
        self.request = request
        self.timeout_s = timeout_s
        self.process: subprocess.Popen | None = None
        self.reader: Any = None
        self.buffer = b""
        self.blocks: list[dict[str, Any]] = []
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        # the child's TMPDIR: a worker killed mid-conversion (a hang, a crash) leaves its
        # converters' scratch here, and close() removes it (the supervisor does, after Ctrl-C)
        self.scratch = tempfile.mkdtemp(prefix="edgekit-culprit-")
        journal(self.scratch)

    def __enter__(self) -> BlockWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> list[dict[str, Any]]:
        read_fd, write_fd = os.pipe()
        message = {**self.request.__dict__, "answer_fd": write_fd}
        env = child_environment(TMPDIR=self.scratch)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "edgekit.culprit.child", json.dumps(message)],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=self.log,
            pass_fds=(write_fd,),
            env=env,
        )
        os.close(write_fd)
        self.reader = os.fdopen(read_fd, "rb", buffering=0)
        self.buffer = b""
        ready = self._next(STARTUP_S, lambda _: None)
        if ready is None or "ready" not in ready:
            words = self._last_words()
            self.stop()
            raise UnsupportedExport(
                f"culprit: the worker could not load {self.request.source['spec']}: {words}"
            )
        self.blocks = ready["ready"]
        return self.blocks

    def attempt(self, path: str) -> Outcome:
        if self.process is None:
            self.start()
        assert self.process is not None and self.process.stdin is not None
        started = time.perf_counter()
        stage = ["export"]
        logged_from = self.log.seek(0, os.SEEK_END)
        self.process.stdin.write((json.dumps({"attempt": path}) + "\n").encode())
        self.process.stdin.flush()
        answer = self._next(self.timeout_s, lambda name: stage.__setitem__(0, name))
        seconds = round(time.perf_counter() - started, 2)
        if answer is not None:
            return self._with_logged_cause(Outcome.from_dict(answer["outcome"]), logged_from)
        if self.process.poll() is None:  # alive and silent past the deadline
            self.stop()
            message = f"no answer after {self.timeout_s:g} s"
            return Outcome("hang", stage[0], message, seconds=seconds)
        code = self.process.returncode
        words = self._last_words()
        self.stop()
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return Outcome("crash", stage[0], f"the process died ({how}): {words}", seconds=seconds)

    def _with_logged_cause(self, outcome: Outcome, logged_from: int) -> Outcome:
        """A failure whose exception names no op, with the op and the line the runtime logged
        during this attempt (XNNPACK's "Failed to create StaticConstantPad node ...")."""
        if outcome.failure not in ("convert", "load") or outcome.op is not None:
            return outcome
        from edgekit.targets import get_target

        target = get_target(self.request.target)
        if not target.has_role("logged_cause"):
            return outcome
        self.log.seek(logged_from)
        cause = target.logged_cause(self.log.read().decode(errors="replace"))
        if cause:
            outcome.message, outcome.op = f"{outcome.message}; {cause[0]}", cause[1]
        return outcome

    def repro(self, path: str, folder: str) -> None:
        if self.process is None:
            self.start()
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write((json.dumps({"repro": path, "folder": folder}) + "\n").encode())
        self.process.stdin.flush()
        if self._next(STARTUP_S, lambda _: None) is None:
            words = self._last_words()
            raise UnsupportedExport(f"culprit: could not save the block {path}: {words}")

    def _next(self, limit_s: float, on_stage: Any) -> dict[str, Any] | None:
        """The next answer other than a stage line, or None when the worker died or the limit
        passed."""
        deadline = time.monotonic() + limit_s
        with selectors.DefaultSelector() as selector:
            selector.register(self.reader, selectors.EVENT_READ)
            while True:
                while b"\n" in self.buffer:
                    line, self.buffer = self.buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if "stage" in message:
                        on_stage(message["stage"])
                    else:
                        return message
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if not selector.select(timeout=left):
                    continue
                chunk = self.reader.read(65536)
                if not chunk:
                    return None  # the worker is gone
                self.buffer += chunk

    def _last_words(self) -> str:
        self.log.seek(0)
        return last_words(self.log.read())

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
        if self.reader is not None:
            self.reader.close()
        self.process, self.reader = None, None
        self.log.seek(0)
        self.log.truncate()

    def close(self) -> None:
        self.stop()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
