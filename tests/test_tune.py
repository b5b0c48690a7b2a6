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
    assert tuned.final is None and tuned.rejected is None
    assert len(opened) == 6  # two stages of two incumbent sessions + one candidate; no final


def test_a_winner_that_ties_the_default_at_the_end_is_sent_back_and_kept_on_record():
    opened_before: list[int] = []

    def fast_only_at_first(options) -> float:  # two threads pay in the stage, not after
        opened_before.append(1)
        return 0.6 if options["threads"] == 2 and len(opened_before) <= 3 else 1.0

    open_timer, _ = scripted(fast_only_at_first)
    tuned = search("f.onnx", DEFAULT, stages((), 2), open_timer, PLAN, QUIET, 60.0)
    assert tuned.rejected == DEFAULT | {"threads": 2} and tuned.final == "tie"
    assert tuned.best == DEFAULT and tuned.changed == {}
    assert tuned.interval[0] <= 1.0 <= tuned.interval[1]


def test_the_incumbents_two_sessions_widen_every_interval():
    """Sessions of one configuration that differ by 3 % (where each process landed): a
    candidate 2 % faster within its rounds is a tie, not a win."""
    opened = iter(range(100))

    def landed(options) -> float:
        if options["threads"] == 2:
            return 0.98
        return 1.0 if next(opened) % 2 == 0 else 1.03

    open_timer, _ = scripted(landed)
    tuned = search("f.onnx", DEFAULT, stages((), 2), open_timer, PLAN, QUIET, 60.0)
    (trial,) = tuned.trials
    assert trial.verdict == "tie" and trial.interval[0] < 1.0 < trial.interval[1]


def test_a_value_the_runtime_refuses_fails_that_candidate_and_the_search_goes_on():
    def refuse(options):
        return "onnx: 3 levels are too many" if options["level"] == 3 else None

    open_timer, opened = scripted(two_cores_and_level, refuse)
    tuned = search("f.onnx", DEFAULT, stages((LEVEL,), 2), open_timer, PLAN, QUIET, 60.0)
    failed = [t for t in tuned.trials if t.verdict == "failed"]
    assert [(t.value, t.error) for t in failed] == [(3, "onnx: 3 levels are too many")]
    assert tuned.best == {"threads": 2, "mode": "plain", "level": 1}
    assert all(timer.closed for timer in opened)


def test_an_incumbent_that_fails_stops_the_search_and_closes_every_session():
    class Crashes(Scripted):
        def block(self, runs: int) -> Block:
            raise EdgekitError("onnx: the session crashed")

    opened: list[Scripted] = []

    def open_timer(options):
        opened.append(Crashes(1.0, 0) if options["threads"] == 1 else Scripted(0.5, 0))
        return opened[-1]

    with pytest.raises(EdgekitError, match="the incumbent failed: onnx: the session crashed"):
        search("f.onnx", DEFAULT, stages((), 2), open_timer, PLAN, QUIET, 60.0)
    assert len(opened) == 3 and all(timer.closed for timer in opened)


def test_a_stage_that_would_not_fit_the_budget_is_left_out_and_named():
    # every look at the clock is 10 s later: the thread stage takes 10 s, and at 30 s the next
    # stage and the final comparison (10 s each, as the slowest stage) would end past 45 s
    ticks = iter(range(0, 1000, 10))
    open_timer, _ = scripted(two_cores_and_level)
    tuned = search("f.onnx", DEFAULT, stages((MODE, LEVEL), 2), open_timer, PLAN, QUIET, 45.0,
                   clock=lambda: next(ticks))  # fmt: skip
    assert [t.knob for t in tuned.trials] == ["threads"]
    assert tuned.untried == ["mode", "level"]
    roomier = iter(range(0, 1000, 10))
    tuned = search("f.onnx", DEFAULT, stages((MODE, LEVEL), 2), open_timer, PLAN, QUIET, 50.0,
                   clock=lambda: next(roomier))  # fmt: skip
    assert [t.knob for t in tuned.trials][:2] == ["threads", "mode"]


def test_a_knob_that_needs_another_is_searched_only_beside_it():
    parallel = Knob("inter_op", (1, 2), "", requires={"mode": "fancy"})
    open_timer, _ = scripted(lambda options: 1.0)
    tuned = search("f.onnx", DEFAULT | {"inter_op": 1}, [MODE, parallel], open_timer, PLAN,
                   QUIET, 60.0)  # fmt: skip
    assert [t.knob for t in tuned.trials] == ["mode"]  # mode stayed plain: inter_op moot
    open_timer, _ = scripted(lambda options: 0.7 if options["mode"] == "fancy" else 1.0)
    tuned = search("f.onnx", DEFAULT | {"inter_op": 1}, [MODE, parallel], open_timer, PLAN,
                   QUIET, 60.0)  # fmt: skip
    assert [t.knob for t in tuned.trials] == ["mode", "inter_op"]  # fancy won: now it matters


def test_a_value_brings_the_options_it_needs():
    fancy = Knob("mode", ("plain", "fancy"), "", companions={"fancy": {"helpers": 2}})
    asked: list[dict] = []
    open_timer, _ = scripted(lambda options: asked.append(options) or 1.0)
    search("f.onnx", DEFAULT | {"helpers": 1}, [fancy], open_timer, PLAN, QUIET, 60.0)
    assert [(o["mode"], o["helpers"]) for o in asked] == [("plain", 1), ("plain", 1),
                                                          ("fancy", 2)]  # fmt: skip


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
        ({"threads": 0}, "runtime_options.threads must be an integer, 1 to 256"),
        ({"inter_op_threads": 100}, "inter_op_threads=100: choose from 1, 2"),
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


def _write_tuned(path: Path, options: dict, cpu: str | None = None) -> None:
    from edgekit.common.machine import cpu_model

    manifest = json.loads(Path(f"{path}.json").read_text())
    tuned = {"device": "cpu", "cpu_model": cpu or cpu_model()}
    Path(f"{path}.json").write_text(json.dumps(manifest | {"runtime_options": options,
                                                           "tuned": tuned}))  # fmt: skip


def _bench(capsys, path: Path, *args: str) -> tuple[dict, str]:
    result = run_cli(capsys, "bench", str(path), *args, "--rounds", "3", "--min-seconds", "0.1",
                     "--no-baseline", "--no-noise-guard", "--json")  # fmt: skip
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)
    return record, result.err


OURS = {"threads": 2, "graph_optimization_level": "ORT_ENABLE_ALL",
        "execution_mode": "ORT_PARALLEL", "inter_op_threads": 2, "allow_spinning": False,
        "enable_mem_pattern": False, "enable_cpu_mem_arena": True}  # fmt: skip
DEFAULTS = {"threads": 1, "graph_optimization_level": "ORT_ENABLE_ALL",
            "execution_mode": "ORT_SEQUENTIAL", "inter_op_threads": 1, "allow_spinning": True,
            "enable_mem_pattern": True, "enable_cpu_mem_arena": True}  # fmt: skip


def test_bench_opens_a_tuned_file_with_its_options_as_the_session_holds_them(
    capsys, export_digits, tmp_path
):
    path = _tuned_copy(export_digits, tmp_path)
    _write_tuned(path, OURS)
    for args, expected in (((), OURS), (("--runtime-options", "default"), DEFAULTS)):
        record, _ = _bench(capsys, path, *args)
        # what onnxruntime's live session reports, not what was asked of it
        assert record["threads"] == expected["threads"]
        assert {key: record["runtime"][key] for key in expected if key != "threads"} == {
            key: value for key, value in expected.items() if key != "threads"
        }
    _write_tuned(path, OURS, cpu="Some Other CPU")  # tuned on another machine: not used here
    record, err = _bench(capsys, path)
    assert record["threads"] == 1 and record["runtime"]["execution_mode"] == "ORT_SEQUENTIAL"
    assert "tuned on Some Other CPU, not this" in err and "defaults" in err


def test_tune_writes_the_winner_into_the_manifest(capsys, export_digits, tmp_path):
    """Plumbing, not figures (which configuration wins is the machine's): the noise guard is
    off, so the test runs beside others."""
    path = _tuned_copy(export_digits, tmp_path)
    result = run_cli(capsys, "tune", str(path), "--budget-s", "20", "--no-noise-guard", "--json")
    assert result.code == 0, result.err
    (tuned,) = json.loads(result.out)
    manifest = json.loads(Path(f"{path}.json").read_text())
    assert manifest["runtime_options"] == tuned["best"]
    assert manifest["tuned"]["device"] == "cpu" and manifest["tuned"]["cpu_model"]
    assert manifest["tuned"]["started_from"] == tuned["default"] == DEFAULTS
    searched = {trial["knob"] for trial in tuned["trials"]}
    assert "threads" in searched  # the first stage always starts
    assert searched | set(tuned["untried"]) >= {"threads", "graph_optimization_level"}
    assert manifest["tuned"]["final"] == tuned["final"]
    if tuned["final"] is not None:  # the stages' winner was compared with the start
        assert (tuned["final"] == "faster") == (tuned["best"] != DEFAULTS)


def test_tune_only_one_option_keeps_the_others_and_prints_the_code_for_the_app(
    capsys, export_digits, tmp_path
):
    path = _tuned_copy(export_digits, tmp_path, "tflite")
    _write_tuned(path, {"threads": 2, "xnnpack": True})  # an earlier tune chose two threads
    result = run_cli(capsys, "tune", str(path), "--only", "xnnpack", "--budget-s", "30",
                     "--no-noise-guard")  # fmt: skip
    assert result.code == 0, result.err
    options = json.loads(Path(f"{path}.json").read_text())["runtime_options"]
    assert options["threads"] == 2  # not searched: as tuned before
    flag = str(options["xnnpack"]).lower()
    assert "Interpreter(model_path=" in result.out and f"setUseXNNPACK({flag})" in result.out
    assert "num_threads=2" in result.out
    before = Path(f"{path}.json").read_text()
    again = run_cli(capsys, "tune", str(path), "--only", "threads", "--budget-s", "10",
                    "--no-noise-guard", "--no-write")  # fmt: skip
    assert again.code == 0 and Path(f"{path}.json").read_text() == before  # --no-write
