"""``edgekit bench``: the latency protocol, run in an isolated child per measurement.

Protocol: ``warmup`` untimed invokes, then timed single invokes on a pre-staged input until at
least ``min_runs`` runs and ``min_seconds`` have passed (capped by ``max_seconds``). Defaults sit
between the anchors: benchmark_model 1 warm-up/50 runs, ExecuTorch MiniBench 10/50, Olive 10/20."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.noise import wait_for_quiet
from edgekit.stats import latency_summary
from edgekit.worker import RESULT_MARKER

HIGH_CV = 0.10  # a coefficient of variation above this gets a noise warning


@dataclass(frozen=True)
class Protocol:
    warmup: int = 10
    min_runs: int = 50
    min_seconds: float = 1.0
    max_seconds: float = 60.0
    max_runs: int = 100_000


@dataclass(frozen=True)
class NoiseGuard:
    threshold: float = 0.15  # other processes' CPU, in cores, above which a run is disturbed
    retries: int = 2
    settle_max_s: float = 20.0
    enabled: bool = True


@dataclass
class LatencyRecord:
    """One measurement: an artifact (or the baseline) on one device with a thread count."""

    label: str
    device: str
    threads: int
    status: str  # ok | failed
    artifact: str | None = None
    target: str | None = None
    recipe: str | None = None
    error: str | None = None
    load_ms: float | None = None
    first_ms: float | None = None
    stats: dict[str, float] = field(default_factory=dict)
    samples_ms: list[float] = field(default_factory=list)
    peak_rss_mb: float | None = None
    size_bytes: int | None = None
    foreign_cpu: float | None = None
    disturbed: bool = False
    attempts: int = 0
    runtime: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def for_artifact(cls, artifact: Any, device: str, threads: int) -> LatencyRecord:
        """A not-yet-measured record of ``artifact`` (an :class:`edgekit.artifact.Artifact`)."""
        return cls(
            label=artifact.label,
            device=device,
            threads=threads,
            status="failed",
            artifact=str(artifact.path),
            target=artifact.target,
            recipe=artifact.recipe,
            size_bytes=artifact.manifest["file"]["size"],
        )

    def fill(self, result: dict[str, Any]) -> bool:
        """Take a child's result (status, timings, runtime facts); True when it measured."""
        self.status = result["status"]
        self.error = result.get("error")
        self.peak_rss_mb = result.get("peak_rss_mb")
        if self.status != "ok":
            return False
        samples = np.asarray(result["samples_ms"])
        self.samples_ms = [round(float(v), 5) for v in samples]
        self.stats = latency_summary(samples)
        self.load_ms = result["load_ms"]
        self.first_ms = result["first_ms"]
        self.runtime = result.get("runtime", {})
        self.foreign_cpu = result.get("foreign_cpu")
        return True


def run_child(request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run ``edgekit.worker`` with ``request``; a crash or hang becomes ``status: failed``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "edgekit.worker"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "error": f"timed out after {timeout_s:.0f} s (killed)"}
    if RESULT_MARKER in completed.stdout:
        payload = completed.stdout.split(RESULT_MARKER, 1)[1].strip().splitlines()[0]
        return json.loads(payload)
    if completed.returncode < 0:
        name = signal.Signals(-completed.returncode).name
        return {"status": "failed", "error": f"the runtime crashed ({name})"}
    tail = (completed.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return {"status": "failed", "error": f"the child exited with {completed.returncode}: {tail}"}


def _measure(
    request: dict[str, Any], record: LatencyRecord, guard: NoiseGuard, timeout_s: float
) -> LatencyRecord:
    result: dict[str, Any] = {}
    for attempt in range(1, guard.retries + 2):
        if guard.enabled:
            wait_for_quiet(guard.threshold, max_wait_s=guard.settle_max_s)
        result = run_child(request, timeout_s)
        record.attempts = attempt
        if result["status"] != "ok":
            break
        foreign = result.get("foreign_cpu")
        if not guard.enabled or foreign is None or foreign <= guard.threshold:
            break
    if not record.fill(result):
        return record
    record.disturbed = bool(
        guard.enabled and record.foreign_cpu is not None and record.foreign_cpu > guard.threshold
    )
    if record.disturbed:
        record.warnings.append(
            f"DISTURBED: other processes used {record.foreign_cpu:.2f} cores during the timed loop "
            f"after {record.attempts} attempt(s); treat this figure as unreliable"
        )
    if record.stats["cv"] > HIGH_CV:
        record.warnings.append(f"noisy: CV {record.stats['cv']:.1%} (> {HIGH_CV:.0%})")
    return record


def _staged_input(path: Path, x: np.ndarray | None) -> str | None:
    if x is None:
        return None
    np.save(path, np.ascontiguousarray(x[:1], dtype=np.float32))
    return str(path)


def bench_artifact(
    artifact: str | Path,
    device: str = "cpu",
    threads: int = 1,
    protocol: Protocol | None = None,
    guard: NoiseGuard | None = None,
    sample: np.ndarray | None = None,
    timeout_s: float = 600.0,
    crash_for_test: str | None = None,
) -> LatencyRecord:
    """Latency of one artifact on one local device (``cpu`` or ``gpu``) in a child process."""
    from edgekit.artifact import load_artifact

    loaded = load_artifact(artifact)
    record = LatencyRecord.for_artifact(loaded, device, threads)
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as tmp:
        request = {
            "mode": "bench",
            "artifact": str(loaded.path),
            "device": device,
            "threads": threads,
            "input": _staged_input(Path(tmp) / "x.npy", sample),
            "protocol": asdict(protocol or Protocol()),
            "crash_for_test": crash_for_test,
        }
        record = _measure(request, record, guard or NoiseGuard(), timeout_s)
    if device == "gpu" and record.runtime.get("software_vulkan"):
        record.warnings.append("software Vulkan, not a GPU speed")
    return record


def bench_baseline(
    model: str,
    device: str = "auto",
    threads: int = 1,
    protocol: Protocol | None = None,
    guard: NoiseGuard | None = None,
    sample: np.ndarray | None = None,
    timeout_s: float = 600.0,
) -> LatencyRecord:
    """The source model in its own framework, fp32: CUDA when present (``auto``), else CPU."""
    record = LatencyRecord(
        label="baseline/fp32", device="baseline", threads=threads, status="failed"
    )
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-") as tmp:
        request = {
            "mode": "baseline",
            "model": model,
            "device": device,
            "threads": threads,
            "input": _staged_input(Path(tmp) / "x.npy", sample),
            "protocol": asdict(protocol or Protocol()),
        }
        record = _measure(request, record, guard or NoiseGuard(), timeout_s)
    where = record.runtime.get("device", "")
    record.device = "cuda" if where.startswith("CUDA") else "cpu"
    return record


def predict_in_child(
    artifact: str | Path,
    x: np.ndarray,
    device: str = "cpu",
    threads: int = 1,
    timeout_s: float = 900.0,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Logits of ``x`` from the artifact on ``device``, computed in an isolated child."""
    from edgekit.errors import DeviceUnavailable, EdgekitError

    with tempfile.TemporaryDirectory(prefix="edgekit-eval-") as tmp:
        inputs, outputs = Path(tmp) / "x.npy", Path(tmp) / "y.npy"
        np.save(inputs, np.ascontiguousarray(x, dtype=np.float32))
        request = {
            "mode": "predict",
            "artifact": str(artifact),
            "device": device,
            "threads": threads,
            "input": str(inputs),
            "output": str(outputs),
        }
        result = run_child(request, timeout_s)
        if result["status"] != "ok":
            # the child's DeviceUnavailable stays one, so callers can tell "lacks" from "broke"
            kind = (
                DeviceUnavailable
                if result.get("error_type") == "DeviceUnavailable"
                else EdgekitError
            )
            raise kind(f"{Path(artifact).name} on {device}: {result['error']}")
        return np.load(outputs), result.get("runtime", {})
