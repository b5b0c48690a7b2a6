"""A quicker exit for edgekit's own processes: the command line's, the measuring children's,
the training child's and the emulated ARM64 guest's.

At shutdown CPython runs its cyclic garbage collector over the whole heap more than once, and a
process that imported torch holds a large one. Collected once by an ``atexit`` step and then
frozen (``gc.freeze``), the heap is skipped by the interpreter's own last collections: what was
garbage then is still collected and its finalizers run; objects still referenced go with the
process, as most of them did before (atexit handlers and weakref finalizers run as ever). Only
the process's entry point calls this, never a library function: frozen objects are never
collected again, which is right at exit and wrong in a process that goes on (a test session).
``benchmarks/startup.py`` times the commands before and after."""

from __future__ import annotations

import atexit
import gc


def _collect_then_freeze() -> None:
    gc.collect()
    gc.freeze()


def collect_once_at_exit() -> None:
    """Register the collect-then-freeze step. ``atexit`` runs the last registered first, so an
    entry point calls this before it imports the runtimes: the step then runs after the
    handlers they register (their clean-up first, then the freeze)."""
    atexit.register(_collect_then_freeze)
