"""The matrix ``edgekit run`` measures: its config (``config``), one cell per model x target x
recipe x device (``cells``, ``matrix``), resuming an interrupted run (``resume``) and the
report's per-layer section (``profile``). Imports everything below it and the report; only
the cluster, the CLI and ``edgekit.testing`` import it."""
