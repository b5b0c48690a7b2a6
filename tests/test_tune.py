"""``edgekit tune``: the search with scripted sessions (which configuration wins, ties, refusals,
the budget), the manifest's runtime_options, and the command on a real ONNX file followed by a
``bench`` that uses what it wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

from edgekit.errors import EdgekitError, UserInputError
from edgekit.targets.knobs import Knob
from edgekit.tune.search import search, stages, verdict
from edgekit.worker.latency import Block, BlockTimer, NoiseGuard, Protocol

PLAN = Protocol(warmup=0, min_runs=1, min_seconds=0.0, rounds=12, block_seconds=0.001)
QUIET = NoiseGuard(enabled=False)
MODE = Knob("mode", ("plain", "fancy"), "a knob that changes nothing")
LEVEL = Knob("level", (1, 2, 3), "level 3 is 20 % faster")


class Scripted(BlockTimer):
    """A session whose block medians scatter 2 % around ``ms``."""

    def __init__(self, ms: float, seed: int) -> None:
        self.label, self.ms, self.warm_ms, self.runtime = "side", ms, 1.0, {}
        self._rng = np.random.default_rng(seed)
        self.closed = False

    def block(self, runs: int) -> Block:
        value = self.ms * (1.0 + self._rng.normal(0.0, 0.02))
        return Block([value] * runs, value, value)

    def close(self) -> None:
        self.closed = True


def scripted(speed, refuse=lambda options: None):
    """open_timer for ``speed(options) -> ms``; ``refuse(options)`` names a refusal."""
    opened: list[Scripted] = []

    def open_timer(options):
        reason = refuse(options)
        if reason:
            raise EdgekitError(reason)
        opened.append(Scripted(speed(options), len(opened)))
        return opened[-1]

    return open_timer, opened


def two_cores_and_level(options) -> float:
    return (0.6 if options["threads"] == 2 else 1.0) * (0.8 if options["level"] == 3 else 1.0)


DEFAULT = {"threads": 1, "mode": "plain", "level": 1}


def test_each_stage_keeps_only_what_its_interval_says_is_faster():
    open_timer, opened = scripted(two_cores_and_level)
    tuned = search("f.onnx", DEFAULT, stages((MODE, LEVEL), 2), open_timer, PLAN, QUIET, 60.0)
    assert tuned.best == {"threads": 2, "mode": "plain", "level": 3}
    assert tuned.changed == {"threads": 2, "level": 3}
    verdicts = {(t.knob, t.value): t.verdict for t in tuned.trials}
    assert verdicts == {("threads", 2): "faster", ("mode", "fancy"): "tie",
                        ("level", 2): "tie", ("level", 3): "faster"}  # fmt: skip
    assert tuned.interval is not None and tuned.interval[1] < 1.0  # best against default
    assert tuned.ratio == pytest.approx(0.48, rel=0.05)
    assert tuned.best_p50_ms < tuned.default_p50_ms
    assert all(timer.closed for timer in opened)


def test_a_tie_everywhere_keeps_the_default_and_compares_nothing_more():
    open_timer, opened = scripted(lambda options: 1.0)
    tuned = search("f.onnx", DEFAULT, stages((MODE,), 2), open_timer, PLAN, QUIET, 60.0)
    assert tuned.best == DEFAULT and tuned.changed == {} and tuned.ratio is None
    assert len(opened) == 4  # two stages of incumbent + one candidate, no final comparison


def test_a_value_the_runtime_refuses_fails_that_candidate_and_the_search_goes_on():
    def refuse(options):
        return "onnx: 3 levels are too many" if options["level"] == 3 else None

    open_timer, _ = scripted(two_cores_and_level, refuse)
    tuned = search("f.onnx", DEFAULT, stages((LEVEL,), 2), open_timer, PLAN, QUIET, 60.0)
    failed = [t for t in tuned.trials if t.verdict == "failed"]
    assert [(t.value, t.error) for t in failed] == [(3, "onnx: 3 levels are too many")]
    assert tuned.best == {"threads": 2, "mode": "plain", "level": 1}


def test_a_stage_that_would_not_fit_the_budget_is_left_out_and_named():
    ticks = iter(range(0, 1000, 10))  # every look at the clock is 10 s later
    open_timer, _ = scripted(two_cores_and_level)
    tuned = search("f.onnx", DEFAULT, stages((MODE, LEVEL), 2), open_timer, PLAN, QUIET, 25.0,
                   clock=lambda: next(ticks))  # fmt: skip
    assert [t.knob for t in tuned.trials] == ["threads"]
    assert tuned.untried == ["mode", "level"]


def test_a_knob_that_needs_another_is_searched_only_beside_it():
    parallel = Knob("inter_op", (1, 2), "", requires={"mode": "fancy"})
    open_timer, _ = scripted(lambda options: 1.0)
    tuned = search("f.onnx", DEFAULT | {"inter_op": 1}, [MODE, parallel], open_timer, PLAN,
                   QUIET, 60.0)  # fmt: skip
    assert [t.knob for t in tuned.trials] == ["mode"]  # mode stayed plain: inter_op moot


def test_faster_only_below_one_slower_only_above():
    assert verdict((0.90, 0.99)) == "faster"
    assert verdict((0.95, 1.0)) == "tie" and verdict((1.0, 1.05)) == "tie"
    assert verdict((1.01, 1.10)) == "slower"


def test_threads_go_from_one_to_the_cores():
    assert stages((), 4)[0].values == (1, 2, 3, 4)


def _tuned_copy(export_digits, tmp_path: Path, target: str = "onnx") -> Path:
    """A copy of the session's shared fp32 file (tune writes into its manifest)."""
    shared = export_digits(target, "fp32").path
    copy = tmp_path / shared.name
    shutil.copy(shared, copy)
    shutil.copy(f"{shared}.json", f"{copy}.json")
    return copy


def test_a_manifest_with_an_unknown_or_bad_runtime_option_is_one_line(export_digits, tmp_path):
    from edgekit.artifacts.artifact import load_artifact

    path = _tuned_copy(export_digits, tmp_path)
    manifest = json.loads(Path(f"{path}.json").read_text())
    for options, message in (
        ({"threads": 2, "turbo": True}, "unknown runtime option 'turbo'"),
        ({"threads": 0}, "runtime_options.threads must be an integer >= 1"),
        ({"execution_mode": "ORT_SIDEWAYS"}, "execution_mode='ORT_SIDEWAYS': choose from"),
        ({"allow_spinning": "no"}, "allow_spinning='no' is not a bool"),
    ):
        Path(f"{path}.json").write_text(json.dumps(manifest | {
            "runtime_options": options, "tuned": {"device": "cpu"}}))  # fmt: skip
        with pytest.raises(UserInputError, match=message):
            load_artifact(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "threads,turbo"], "unknown option(s) turbo for onnx"),
        (["--device", "android"], "--device android: tune runs on cpu"),
        (["--budget-s", "0"], "--budget-s must be > 0"),
    ],
)
def test_bad_tune_options_are_one_line_and_exit_2(capsys, export_digits, tmp_path, args, message):
    path = _tuned_copy(export_digits, tmp_path)
    before = Path(f"{path}.json").read_text()
    result = run_cli(capsys, "tune", str(path), *args)
    assert result.code == 2 and message in result.err
    assert len([line for line in result.err.splitlines() if line.strip()]) == 1
    assert Path(f"{path}.json").read_text() == before  # nothing written


def test_tune_writes_the_winner_and_bench_opens_the_file_so(capsys, export_digits, tmp_path):
    """Plumbing, not figures (which configuration wins is the machine's): the noise guard is
    off, so the test runs beside others."""
    path = _tuned_copy(export_digits, tmp_path)
    result = run_cli(capsys, "tune", str(path), "--budget-s", "20", "--no-noise-guard", "--json")
    assert result.code == 0, result.err
    (tuned,) = json.loads(result.out)
    manifest = json.loads(Path(f"{path}.json").read_text())
    assert manifest["runtime_options"] == tuned["best"]
    assert manifest["tuned"]["device"] == "cpu" and manifest["tuned"]["cpu"]
    searched = {trial["knob"] for trial in tuned["trials"]}
    assert "threads" in searched  # the first stage always starts
    assert set(searched) | set(tuned["untried"]) >= {"threads", "graph_optimization_level"}
    # bench opens it as tuned (its threads, its knobs), or as exported when told
    for choice, expected in (("tuned", tuned["best"]), ("default", tuned["default"])):
        bench = run_cli(capsys, "bench", str(path), "--runtime-options", choice, "--rounds", "3",
                        "--min-seconds", "0.1", "--no-baseline", "--no-noise-guard",
                        "--json")  # fmt: skip
        assert bench.code == 0, bench.err
        (record,) = json.loads(bench.out)
        assert record["threads"] == expected["threads"]
        runtime = record["runtime"]
        assert {key: runtime[key] for key in expected if key != "threads"} == {
            key: value for key, value in expected.items() if key != "threads"
        }


def test_tune_prints_the_winner_and_the_code_for_the_app(capsys, export_digits, tmp_path):
    path = _tuned_copy(export_digits, tmp_path, "tflite")
    result = run_cli(capsys, "tune", str(path), "--only", "xnnpack", "--budget-s", "30",
                     "--no-noise-guard", "--no-write")  # fmt: skip
    assert result.code == 0, result.err
    assert "xnnpack" in result.out and "best:" in result.out
    assert "Interpreter(model_path=" in result.out and "setUseXNNPACK(" in result.out
    assert "runtime_options" not in json.loads(Path(f"{path}.json").read_text())  # --no-write
