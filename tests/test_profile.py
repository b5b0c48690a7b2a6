"""``edgekit profile`` through the CLI: per-layer time from each runtime's own profiler, named
by the source's module paths so the runtimes line up, and the explanation of int8/fp16."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli, run_cli_captured, run_edgekit

QUICK = ["--rounds", "4", "--runs", "20"]


@pytest.fixture(scope="module")
def profiled(export_digits, tmp_path_factory):
    """fp32 and int8 of the three targets, profiled in one call (as a user would)."""
    paths = [str(export_digits(t, r).path) for t in ("tflite", "onnx", "executorch")
             for r in ("fp32", "int8")]  # fmt: skip
    out = tmp_path_factory.mktemp("profile")
    plot = out / "layers.png"
    result = run_cli_captured("profile", *paths, *QUICK, "--json", "--plot", str(plot))
    assert result.code == 0, result.err[-2000:]
    return {p["label"]: p for p in json.loads(result.out)}, plot


def test_layers_are_named_by_the_source_module_paths(profiled):
    profiles, _ = profiled
    for label in (
        "tflite/fp32",
        "onnx/fp32",
        "onnx/int8",
        "tflite/int8",
        "executorch/fp32",
        "executorch/int8",
    ):  # a .pte by the debug handles its manifest maps
        names = {layer["name"] for layer in profiles[label]["layers"]}
        assert {"stem", "block2.dw", "block6.project", "head"} <= names, (label, names)


def test_every_profile_says_how_it_was_measured_and_how_it_sums(profiled):
    profiles, _ = profiled
    methods = {label: p["method"] for label, p in profiles.items()}
    assert "CompiledModel profiler" in methods["tflite/int8"]
    assert "session profiling" in methods["onnx/int8"]
    assert "ETDump" in methods["executorch/int8"]
    for profile in profiles.values():
        assert profile["total_ms"] > 0
        assert all(layer["ms"] >= 0 for layer in profile["layers"])
        layer_sum = sum(layer["ms"] for layer in profile["layers"])
        assert layer_sum == pytest.approx(profile["ops_ms"])
        assert profile["coverage"] == pytest.approx(layer_sum / profile["total_ms"])
        assert {"name", "ms", "share", "ops", "method", "p50_ms"} <= set(profile["layers"][0])
        # the bars a report draws are shares that add up, and their ms add up to the p50
        assert sum(layer["share"] for layer in profile["layers"]) == pytest.approx(1.0)
        parts = sum(layer["p50_ms"] for layer in profile["layers"])
        assert parts == pytest.approx(profile["total_ms"])
        assert "scaled to the whole-model p50" in profile["scaling"]


def test_int8_is_explained_against_the_same_targets_fp32(profiled):
    profiles, _ = profiled
    for target in ("tflite", "onnx", "executorch"):
        int8 = profiles[f"{target}/int8"]
        speedup = int8["speedup_vs_fp32"]
        low, high = speedup["ci"]
        # whichever way this machine goes, the verdict is the one its interval gives
        expected = "faster" if low > 1.0 else ("slower" if high < 1.0 else "no faster (a tie)")
        assert low <= speedup["ratio"] <= high and speedup["verdict"] == expected
        first = int8["explanation"][0]
        assert f"the speed of {target}/fp32" in first and "interleaved" in first
        assert any(line.startswith("CPU: ") for line in int8["explanation"])
        assert any(line.startswith("kernels: ") for line in int8["explanation"])
        assert "int8 share of the MACs: 100.0 %" in int8["explanation"]


def test_profiling_a_tflite_file_prints_no_runtime_chatter(export_digits):
    # LiteRT's C library logs to fd 2 itself: only a real process shows what a user sees
    path = export_digits("tflite", "fp32").path
    done = run_edgekit("profile", str(path), "--rounds", "2", "--runs", "5", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    noise = [
        line
        for line in done.stderr.splitlines()
        if line.startswith(("INFO:", "WARNING:")) or "could not be loaded" in line
    ]
    assert not noise, noise


def test_the_plot_is_written(profiled):
    _, plot = profiled
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_users_own_model_profiles(capsys, tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).parent)
    result = run_cli(capsys, "export", "--model", "user_models:tiny_cnn", "--target", "onnx",
                     "--recipe", "fp32", "-o", str(tmp_path))  # fmt: skip
    assert result.code == 0, result.err[-2000:]
    result = run_cli(capsys, "profile", str(tmp_path / "tiny_cnn-fp32.onnx"), *QUICK)
    assert result.code == 0, result.err[-2000:]
    assert "conv2" in result.out and "the profiler's op times summed to" in result.out
    assert "shares add up to 100 % per artifact" in result.out


def test_a_hint_says_why_int8_is_not_faster(export_digits):
    from edgekit.analysis.explain import not_faster_hints

    fp32, int8 = export_digits("tflite", "fp32"), export_digits("tflite", "int8")
    rounds = [1.0, 1.02, 0.99, 1.01, 1.0, 0.98]

    def item(artifact, scale):
        return {"label": artifact.label, "target": "tflite", "recipe": artifact.recipe,
                "device": "cpu", "threads": 1, "rounds_ms": [r * scale for r in rounds],
                "noise_band": 0.01, "path": str(artifact.path)}  # fmt: skip

    hints = not_faster_hints([item(fp32, 1.0), item(int8, 1.4)])  # int8 seeded 1.4x slower
    assert list(hints) == ["tflite/int8"]
    assert "is slower than tflite/fp32 (0.71x" in hints["tflite/int8"]
    assert "`edgekit profile`" in hints["tflite/int8"]
    assert not not_faster_hints([item(fp32, 1.0), item(int8, 0.5)])  # faster: no hint
