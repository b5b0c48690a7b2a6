"""Every command's exit code a CI can trust: a requested file that was not evaluated, tuned,
profiled or measured makes the command exit 1, with one summary line naming it and why, while
what was made is still printed (docs/troubleshooting.md, "Exit codes")."""

from __future__ import annotations

import shutil

from cli_helpers import run_cli

QUICK_BENCH = ("--rounds", "4", "--min-seconds", "0.1", "--no-noise-guard", "--precision", "off")


def _summary(err: str) -> str:
    (line,) = [line for line in err.splitlines() if line.startswith("edgekit: error: ")]
    return line


def test_eval_of_a_file_the_device_refuses_exits_1_and_keeps_the_others(export_digits, capsys):
    """The GPU path runs the .tflite (LiteRT over Vulkan) and refuses the .pte (the pip
    executorch has no GPU backend): the .tflite's row is printed, and the command fails."""
    tflite = export_digits("tflite", "fp32").path
    pte = export_digits("executorch", "fp32").path
    result = run_cli(capsys, "eval", str(tflite), str(pte), "--device", "gpu")
    assert result.code == 1, result.err
    assert _summary(result.err).startswith(
        f"edgekit: error: evaluated 1 of 2; not evaluated: {pte.name} on gpu ("
    )
    assert "tflite/fp32" in result.out and "executorch/fp32" not in result.out


def test_tune_with_a_crashing_runtime_exits_1_naming_each_file(export_digits, monkeypatch,
                                                               tmp_path, capsys):  # fmt: skip
    copies = []
    for target in ("onnx", "tflite"):
        path = export_digits(target, "fp32").path
        for file in (path, path.with_name(path.name + ".json")):
            shutil.copy(file, tmp_path / file.name)
        copies.append(tmp_path / path.name)
    manifests = {p: p.with_name(p.name + ".json").read_text() for p in copies}
    monkeypatch.setenv("EDGEKIT_TEST_CRASH", "segfault")
    result = run_cli(capsys, "tune", *map(str, copies), "--budget-s", "4", "--no-noise-guard")
    assert result.code == 1, result.err
    assert _summary(result.err) == (
        f"edgekit: error: tuned 0 of 2; not tuned: {copies[0].name} (the runtime crashed "
        f"(SIGSEGV)); {copies[1].name} (the runtime crashed (SIGSEGV))"
    )
    # nothing was tuned, so nothing was written
    assert all(p.with_name(p.name + ".json").read_text() == m for p, m in manifests.items())


def test_profile_without_a_whole_model_time_exits_1_and_still_prints_the_layers(
    export_digits, monkeypatch, capsys
):
    """The timing children crash; the runtime's profiler still ran: its layers are printed."""
    onnx = export_digits("onnx", "fp32").path
    monkeypatch.setenv("EDGEKIT_TEST_CRASH", "segfault")
    result = run_cli(capsys, "profile", str(onnx), "--runs", "2", "--rounds", "2")
    assert result.code == 1, result.err
    assert _summary(result.err) == (
        f"edgekit: error: profiled 0 of 1; not profiled: {onnx.name} (not timed: the runtime "
        "crashed (SIGSEGV))"
    )
    assert "most expensive layers" in result.out and "onnx/fp32" in result.out


def test_bench_with_a_failed_measurement_exits_1_naming_it(export_digits, monkeypatch, capsys):
    onnx = export_digits("onnx", "fp32").path
    monkeypatch.setenv("EDGEKIT_TEST_CRASH", "segfault")
    result = run_cli(capsys, "bench", str(onnx), *QUICK_BENCH)
    assert result.code == 1, result.err
    summary = _summary(result.err)
    assert summary.startswith("edgekit: error: measured 0 of 2; not measured: "), summary
    assert f"{onnx} on cpu (" in summary and "crashed (SIGSEGV)" in summary
