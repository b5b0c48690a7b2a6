"""``edgekit bench``: sessions in isolated children, interleaved with each other and the
baseline, and what happens when a runtime crashes or hangs or the machine is busy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgekit.bench import bench_artifact, bench_artifacts
from edgekit.gates import latency_regression
from edgekit.latency import NoiseGuard, Protocol

QUICK = Protocol(warmup=2, min_runs=20, min_seconds=0.2, rounds=6, block_seconds=0.05)
NO_GUARD = NoiseGuard(enabled=False)


def test_bench_an_onnx_artifact_on_the_cpu(export_digits):
    artifact = export_digits("onnx", "fp32")
    record = bench_artifact(artifact.path, "cpu", 1, QUICK, NO_GUARD)
    assert record.status == "ok", record.error
    stats = record.stats
    assert stats["count"] >= 20 and len(record.samples_ms) == stats["count"]
    assert 0 < stats["min_ms"] <= stats["p50_ms"] <= stats["p90_ms"] <= stats["max_ms"]
    assert record.load_ms > 0 and record.first_ms > 0 and record.peak_rss_mb > 10
    assert len(record.rounds_ms) >= 6 and record.block_runs >= 1
    assert record.size_bytes == artifact.manifest["file"]["size"]
    assert record.fingerprint["cpu_model"] and record.fingerprint["threads"] == 1


def test_artifacts_and_the_baseline_are_interleaved_with_a_speedup_interval(export_digits):
    fp32, int8 = export_digits("onnx", "fp32"), export_digits("tflite", "int8")
    records = bench_artifacts([fp32.path, int8.path], "cpu", 1, QUICK, NO_GUARD)
    first, second, baseline = records
    assert baseline.label == "baseline/fp32" and baseline.status == "ok", baseline.error
    import torch

    assert baseline.device == ("cuda" if torch.cuda.is_available() else "cpu")
    # the baseline ran in two sessions: its rounds are their per-round geometric means and its
    # samples both sessions' (a framework's sessions differ by more than rounds can see)
    assert baseline.runtime["sessions"] == 2
    assert len(baseline.samples_ms) >= 2 * QUICK.min_runs
    assert "baseline/fp32 (second session)" in first.interleaved_with
    for record in (first, second):
        low, high = record.speedup_ci
        assert low <= record.speedup <= high and record.speedup > 1  # faster than torch eager
        assert {r.label for r in records} - {record.label} <= set(record.interleaved_with)
        assert 0 <= record.noise_band < 0.2  # a second session of one file, in six quick rounds
        assert len(record.rounds_ms) == len(baseline.rounds_ms)


@pytest.mark.parametrize(
    ("crash", "message"),
    [
        ("segfault", "crashed (SIGSEGV)"),
        ("hang", "timed out"),
        ("segfault-in-block", "crashed (SIGSEGV)"),
    ],
)
def test_a_crashing_or_hanging_runtime_is_a_failed_row(export_digits, monkeypatch, crash, message):
    monkeypatch.setenv("EDGEKIT_TEST_CRASH", crash)
    record = bench_artifact(
        export_digits("onnx", "fp32").path, "cpu", 1, QUICK, NO_GUARD, timeout_s=10
    )
    assert record.status == "failed"
    assert message in record.error


def test_a_busy_process_beside_the_measurement_is_seen_and_marked(export_digits):
    """Another process keeping a core busy (a real one) shows in the noise guard's reading."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        guard = NoiseGuard(threshold=0.15, retries=1, settle_max_s=0.5)
        record = bench_artifact(export_digits("onnx", "fp32").path, "cpu", 1, QUICK, guard)
    finally:
        busy.kill()
        busy.wait()
    assert record.status == "ok", record.error
    assert record.foreign_cpu > 0.5 and record.rounds_disturbed >= 1
    assert record.disturbed and any(w.startswith("DISTURBED") for w in record.warnings)


def test_the_latency_gate_passes_an_artifact_against_itself_and_catches_a_slower_one(
    export_digits,
):
    artifact = export_digits("onnx", "fp32")
    same = latency_regression(artifact, artifact, 10.0, "cpu", 1, QUICK, NO_GUARD)
    assert same.passed, same.detail
    low, high = same.figures["ratio_ci"]
    assert low <= 1.0 + 0.10 and high + 0.2 >= 1.0
    # two sessions of one file are close, though not always straddling 1 (a CI run saw
    # [1.0005, ...]): the band is how far apart they are, not a test that they are equal
    band_low, band_high = same.figures["noise_band"]
    assert 0.85 <= band_low <= band_high <= 1.15
    p50 = bench_artifact(artifact.path, "cpu", 1, QUICK, NO_GUARD).stats["p50_ms"]
    slower = latency_regression(
        artifact, artifact, 10.0, "cpu", 1, QUICK, NO_GUARD, synthetic_delay_ms=0.5 * p50
    )
    assert not slower.passed and slower.figures["ratio"] > 1.3, slower.detail
