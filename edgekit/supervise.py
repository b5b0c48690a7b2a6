"""The ``edgekit`` command: a small supervisor (standard library only) that runs the real command
line in a child process group, so that Ctrl-C and SIGTERM stop everything edgekit started at
once, wherever it is (a converter inside a long C++ call, a worker, QEMU, adb).

First signal: SIGINT to the whole group; the command's own cleanup runs and it exits 130. If it
has not stopped after ``GRACE_S``, or on a second signal, the group is killed. Either way the
temporary files the command recorded in its journal (``EDGEKIT_TEMP_JOURNAL``) and left behind
are removed; finished artifacts are complete, since every file lands by an atomic rename."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from edgekit.common.fileio import JOURNAL_ENV, read_journal, remove_paths

GRACE_S = 4.0
FULL_BELOW_BYTES = 1 << 20  # a folder with less room than this was the reason, not a crash


def _full_folder(lines: list[str]) -> str | None:
    """The folder of a journaled scratch path whose file system has no room left: a converter
    that meets a full disk may end the process before edgekit can say so (LLVM's fatal error
    handler exits). Looked at before the scratch files are removed and free their space."""
    for path in (line for line in lines if not line.startswith("#")):
        folder = os.path.dirname(path.rstrip("/"))
        with contextlib.suppress(OSError):
            if shutil.disk_usage(folder).free < FULL_BELOW_BYTES:
                return folder
    return None


def main() -> None:
    fd, journal = tempfile.mkstemp(prefix="edgekit-", suffix=".journal")
    os.close(fd)
    # EDGEKIT_ROOT_PID: the noise guard counts this process's whole tree as edgekit's own
    env = dict(os.environ, **{JOURNAL_ENV: journal, "EDGEKIT_ROOT_PID": str(os.getpid())})
    child = subprocess.Popen(
        [sys.executable, "-m", "edgekit.cli", *sys.argv[1:]], env=env, process_group=0
    )
    state = {"signals": 0, "deadline": None}

    def forward(signum: int, _frame: object) -> None:
        state["signals"] += 1
        with contextlib.suppress(ProcessLookupError):
            if state["signals"] == 1:
                os.killpg(child.pid, signal.SIGINT)
                state["deadline"] = time.monotonic() + GRACE_S
            else:
                os.killpg(child.pid, signal.SIGKILL)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    while True:
        try:
            code = child.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            if state["deadline"] is not None and time.monotonic() > state["deadline"]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                state["deadline"] = None
    with contextlib.suppress(ProcessLookupError):  # anything of the group still alive
        os.killpg(child.pid, signal.SIGKILL)
    lines = read_journal(journal)
    full = _full_folder(lines) if code != 0 and "#finished" not in lines else None
    remove_paths(lines)
    with contextlib.suppress(OSError):
        os.unlink(journal)
    if state["signals"]:
        if code not in (0, 130):
            print("edgekit: interrupted", file=sys.stderr)
        sys.exit(130)
    if full is not None:
        print(
            f"edgekit: error: {full}: No space left on device (the disk filled up while a "
            "native library wrote there, and it ended the process)",
            file=sys.stderr,
        )
        sys.exit(2)
    if code != 0 and "#finished" not in lines:  # ended by a library, not by edgekit
        why = f"signal {-code}" if code < 0 else f"exit {code}"
        print(
            f"edgekit: error: the command stopped without a message ({why}): a native library "
            "ended the process (a full disk? a crashing converter?); rerun with --debug",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    main()
