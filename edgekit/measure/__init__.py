"""Measurements through a ``Device`` and the bounds on them: top-1
against the baseline (``accuracy``), interleaved latency (``interleave``, ``bench``), the
machine's matmul peaks (``peak``, ``peak_cache``, ``peak_kernels``) and the regression gates
(``gates``). Imports devices, worker, artifacts and results; never the run, the report or the
CLI."""
