"""A session in its own process, and the timing every device shares: the parent side
(``parent``: ``WorkerTimer``, one child per session), the child
itself (``child``, ``python -m edgekit.worker.child``), the timed loop (``loop``, numpy and time
only: the arm64 guest runs it as it is), the measurement plan and records (``latency``:
``LatencyProtocol``, ``Block``, ``BlockTimer``, ``LatencyRecord``) and other processes' CPU per
block (``interference``). Imports sources, targets and artifacts; devices import it.

Kept empty of imports: the guest copies ``loop`` under an empty ``__init__``."""
