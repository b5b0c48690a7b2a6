"""The parent side of a child process: a child that is gone stays gone for every later read."""

from __future__ import annotations

import sys

import pytest

from edgekit.worker.parent import ChildFailed, WorkerProcess


def test_a_child_that_ended_answers_every_later_read_at_once_with_why():
    """bench reads once more when it closes a session; after a crash that read must not wait
    out its timeout (it once waited 60 s) or say "timed out"."""
    child = WorkerProcess({}, 600.0, [sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(ChildFailed, match="exited with 3"):
        child.receive(timeout_s=600.0)
    with pytest.raises(ChildFailed, match="exited with 3"):  # not "timed out after 1 s"
        child.receive(timeout_s=1.0)
    child.close()
