"""The parent side of a child process: a child that is gone stays gone for every later read."""

from __future__ import annotations

import subprocess
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


# an atexit step registered before the entry point runs (so it runs after the entry point's own),
# reporting whether the heap was frozen by then
FROZEN_AT_EXIT = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
)


@pytest.mark.parametrize(
    ("entry", "stdin"),
    [
        (["-m", "edgekit.cli", "--help"], ""),
        (["-m", "edgekit.worker.child"], "not a request"),
        (["-m", "edgekit.sources.training"], ""),
    ],
)
def test_edgekits_processes_collect_once_then_freeze_at_exit(tmp_path, entry, stdin):
    """The command line's process and the children's exit without the interpreter walking the
    runtimes' heap again and again (edgekit.common.shutdown); a child that fails exits so too."""
    (tmp_path / "sitecustomize.py").write_text(FROZEN_AT_EXIT)
    done = subprocess.run([sys.executable, *entry], input=stdin, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.stderr.rstrip().endswith("frozen True"), done.stderr[-2000:]


def test_the_exit_step_collects_the_garbage_before_it_freezes(tmp_path):
    """What was garbage at exit is still collected, its finalizer run, before the freeze."""
    script = FROZEN_AT_EXIT + (
        "from edgekit.common.shutdown import collect_once_at_exit\n"
        "collect_once_at_exit()\n"
        "class Cycle:\n"
        "    def __del__(self):\n"
        "        print('finalized', file=sys.stderr)\n"
        "garbage = Cycle()\n"
        "garbage.me = garbage\n"
        "del garbage\n"
        "gc.disable()  # only an explicit collection finds it now\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stderr.split("\n")[:2] == ["finalized", "frozen True"], done.stderr
