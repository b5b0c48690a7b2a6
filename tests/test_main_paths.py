"""The main paths, through the CLI as a user types them: the demo's own command (`run
--accuracy-aware`), `bench` with its interleaved baseline at two thread counts, and `check RUN
--against OLD` re-measuring a real run directory against an earlier one. Plumbing settings
(tests/cli_helpers.plumbing_config) keep them short; what they measure is the machine's
business, so the tests check what was measured and how, never how fast."""

from __future__ import annotations

import json

from cli_helpers import plumbing_config, run_cli


def test_bench_times_the_baseline_beside_the_artifacts_at_each_thread_count(export_digits, capsys):
    fp32, int8 = export_digits("onnx", "fp32").path, export_digits("tflite", "int8").path
    result = run_cli(capsys, "bench", str(fp32), str(int8), "--threads", "1,2", "--rounds", "4",
                     "--min-seconds", "0.1", "--sessions", "2", "--precision", "off",
                     "--no-noise-guard", "--json")  # fmt: skip
    assert result.code == 0, result.err
    records = json.loads(result.out)
    by_threads = {
        count: {record["label"] for record in records if record["threads"] == count}
        for count in (1, 2)
    }
    assert by_threads[1] == by_threads[2] == {"onnx/fp32", "tflite/int8", "baseline/fp32"}
    for record in records:
        assert record["status"] == "ok", record["error"]
        if record["label"] != "baseline/fp32":
            # each artifact's speed-up over the baseline timed in its own rounds and sessions
            low, high = record["speedup_ci"]
            assert low <= record["speedup"] <= high
            assert "baseline/fp32" in record["interleaved_with"]
            assert record["pool"]["sessions"] == 2


def test_the_demo_command_then_a_check_that_measures_again_against_the_earlier_run(
    tmp_path, capsys
):
    config = plumbing_config(tmp_path, "rounds = 4", "min_seconds = 0.1")
    history = str(tmp_path / "history.sqlite")
    runs = tmp_path / "runs"
    common = ["--model", "digits-mobilenet", "--data", "digits", "--accuracy-aware", "--target",
              "onnx", "--recipe", "int8", "--device", "cpu", "--config", str(config),
              "--runs-dir", str(runs), "--history", history, "--no-profile"]  # fmt: skip
    for name in ("old", "new"):
        made = run_cli(capsys, "run", *common, "--name", name)
        assert made.code == 0, made.err[-2000:]
        assert "recommendation: onnx/int8 @ cpu x1" in made.out
    new = next(runs.glob("*-new"))
    results = json.loads((new / "results.json").read_text())
    [row] = [r for r in results["rows"] if r["kind"] == "artifact"]
    assert row["accuracy_aware"] is not None and row["status"] == "ok"

    gate = run_cli(capsys, "check", str(new), "--max-latency-regression", "50", "--against",
                   "last", "--history", history)  # fmt: skip
    # passed, or undecided beside a busy neighbour: either way, measured again, not recorded
    assert gate.code in (0, 1), gate.err[-2000:]
    said = " ".join(gate.out.split())
    assert "latency ratio, 95% interval" in said
    assert "candidate/reference" in said and "interleaved rounds in" in said
    assert "each side reopened between them" in said and "not interleaved" not in said
