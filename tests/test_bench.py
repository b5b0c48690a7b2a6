"""``edgekit bench``: the latency protocol in an isolated child, the baseline, and what happens
when a runtime crashes or hangs."""

from __future__ import annotations

import pytest

from edgekit.bench import NoiseGuard, Protocol, bench_artifact, bench_baseline

QUICK = Protocol(warmup=2, min_runs=20, min_seconds=0.2)
NO_GUARD = NoiseGuard(enabled=False)


def test_bench_an_onnx_artifact_on_the_cpu(export_digits):
    artifact = export_digits("onnx", "fp32")
    record = bench_artifact(artifact.path, "cpu", 1, QUICK, NO_GUARD)
    assert record.status == "ok", record.error
    stats = record.stats
    assert stats["count"] >= 20 and len(record.samples_ms) == stats["count"]
    assert 0 < stats["min_ms"] <= stats["p50_ms"] <= stats["p90_ms"] <= stats["max_ms"]
    assert record.load_ms > 0 and record.first_ms > 0 and record.peak_rss_mb > 10
    assert record.size_bytes == artifact.manifest["file"]["size"]
    assert record.runtime["threads"] == 1


def test_the_baseline_says_where_it_ran():
    record = bench_baseline("digits-mobilenet", "auto", 1, QUICK, NO_GUARD)
    assert record.status == "ok", record.error
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert record.device == expected
    assert record.runtime["device"].startswith("CUDA" if expected == "cuda" else "host CPU")


@pytest.mark.parametrize(
    ("crash", "message"), [("segfault", "crashed (SIGSEGV)"), ("hang", "timed out")]
)
def test_a_crashing_or_hanging_runtime_is_a_failed_row(export_digits, crash, message):
    artifact = export_digits("onnx", "fp32")
    record = bench_artifact(
        artifact.path, "cpu", 1, QUICK, NO_GUARD, timeout_s=10, crash_for_test=crash
    )
    assert record.status == "failed"
    assert message in record.error


def test_the_noise_guard_retries_then_marks_a_disturbed_measurement(export_digits, monkeypatch):
    import edgekit.bench as bench

    real = bench.run_child
    calls = []

    def noisy_child(request, timeout_s):
        result = real(request, timeout_s)
        calls.append(1)
        result["foreign_cpu"] = 0.9  # as if another process kept a core busy
        return result

    monkeypatch.setattr(bench, "run_child", noisy_child)
    guard = NoiseGuard(threshold=0.15, retries=1, settle_max_s=0.5)
    record = bench_artifact(export_digits("onnx", "fp32").path, "cpu", 1, QUICK, guard)
    assert len(calls) == 2 and record.attempts == 2
    assert record.disturbed
    assert any(w.startswith("DISTURBED") for w in record.warnings)
