"""``edgekit tune``'s search with scripted sessions (no runtime): which configuration wins,
ties, the incumbent's two sessions, refusals, the budget, knobs that need another. Fast: the
mutation tests of edgekit/tune/search.py run these."""

from __future__ import annotations

import numpy as np
import pytest
from measured_rows import read_back
from scripted_sides import NO_GUARD, Scripted

from edgekit.errors import EdgekitError
from edgekit.targets.knobs import Knob
from edgekit.tune.search import search, stages, verdict
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol

PLAN = LatencyProtocol(warmup=0, min_runs=1, min_seconds=0.0, rounds=12, block_seconds=0.001)
MODE = Knob("mode", ("plain", "fancy"), "a knob that changes nothing")
LEVEL = Knob("level", (1, 2, 3), "level 3 is 20 % faster")


class Session(Scripted):
    """A session whose block medians scatter 2 % around ``ms``."""

    def __init__(self, ms: float, seed: int) -> None:
        super().__init__("side", ms, 0.02, seed)


def scripted(speed, refuse=lambda options: None):
    """open_timer for ``speed(options) -> ms``; ``refuse(options)`` names a refusal."""
    opened: list[Session] = []

    def open_timer(options):
        reason = refuse(options)
        if reason:
            raise EdgekitError(reason)
        opened.append(Session(speed(options), len(opened)))
        opened[-1].options = options
        return opened[-1]

    return open_timer, opened


def two_cores_and_level(options) -> float:
    return (0.6 if options["threads"] == 2 else 1.0) * (0.8 if options["level"] == 3 else 1.0)


DEFAULT = {"threads": 1, "mode": "plain", "level": 1}


def test_each_stage_keeps_only_what_its_interval_says_is_faster():
    open_timer, opened = scripted(two_cores_and_level)
    tuned = search(
        "f.onnx",
        DEFAULT,
        stages((MODE, LEVEL), 2),
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    assert tuned.best == {"threads": 2, "mode": "plain", "level": 3}
    assert tuned.changed == {"threads": 2, "level": 3}
    verdicts = {(t.knob, t.value): t.verdict for t in tuned.trials}
    assert verdicts == {("threads", 2): "faster", ("mode", "fancy"): "tie",
                        ("level", 2): "tie", ("level", 3): "faster"}  # fmt: skip
    assert tuned.interval is not None and tuned.interval[1] < 1.0  # best against default
    assert tuned.ratio == pytest.approx(0.48, rel=0.05)
    assert tuned.best_p50_ms < tuned.default_p50_ms
    assert all(timer.closed for timer in opened)


def test_a_start_read_back_from_a_manifest_is_not_tried_against_itself():
    """``tune --only`` starts from the options a manifest recorded: strings equal to the
    knobs' values but other objects, so the search compares values, not identities."""
    open_timer, _ = scripted(lambda options: 1.0)
    start = DEFAULT | {"mode": read_back("plain")}
    tuned = search("f.onnx", start, [MODE], open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60)
    assert [(trial.knob, trial.value) for trial in tuned.trials] == [("mode", "fancy")]
    assert tuned.changed == {}


def test_a_tie_everywhere_keeps_the_default_and_measures_only_it_at_the_end():
    open_timer, opened = scripted(lambda options: 1.0)
    tuned = search(
        "f.onnx",
        DEFAULT,
        stages((MODE,), 2),
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    assert tuned.best == DEFAULT and tuned.changed == {} and tuned.ratio is None
    assert tuned.final is None and tuned.rejected is None
    # two stages of two incumbent sessions + one candidate; then the start's two sides alone
    assert len(opened) == 8 and all(timer.options == DEFAULT for timer in opened[-2:])
    low, high = tuned.best_p50_interval
    assert low < tuned.best_p50_ms < high and tuned.written_p50 == (
        tuned.best_p50_ms,
        tuned.best_p50_interval,
    )


def test_a_default_that_wins_every_stage_is_reported_with_its_own_p50_on_both_sides():
    open_timer, _ = scripted(lambda options: 1.0 if options == DEFAULT else 1.5)
    tuned = search(
        "f.onnx",
        DEFAULT,
        stages((MODE,), 2),
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    assert tuned.best == DEFAULT and tuned.final is None
    assert {t.verdict for t in tuned.trials} == {"slower"}
    for trial in tuned.trials:  # each candidate's p50 beside its incumbent's
        assert trial.p50_ms == pytest.approx(1.5, rel=0.05)
        assert trial.incumbent_p50_ms == pytest.approx(1.0, rel=0.05)
    # both are the start's p50 in the final run, with where another session's should fall
    assert tuned.default_p50_ms == tuned.best_p50_ms == pytest.approx(1.0, rel=0.05)
    assert tuned.default_p50_interval == tuned.best_p50_interval


def test_a_winner_that_ties_the_default_at_the_end_is_sent_back_and_kept_on_record():
    opened_before: list[int] = []

    def fast_only_at_first(options) -> float:  # two threads pay in the stage, not after
        opened_before.append(1)
        return 0.6 if options["threads"] == 2 and len(opened_before) <= 3 else 1.0

    open_timer, _ = scripted(fast_only_at_first)
    tuned = search(
        "f.onnx", DEFAULT, stages((), 2), open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert tuned.rejected == DEFAULT | {"threads": 2} and tuned.final == "tie"
    assert tuned.best == DEFAULT and tuned.changed == {}
    assert tuned.tied == {"threads": 2} and tuned.to_dict()["tied"] == {"threads": 2}
    assert tuned.interval[0] <= 1.0 <= tuned.interval[1]
    # what is written is the start: its p50 is the one a later session is held to
    assert tuned.written_p50 == (tuned.default_p50_ms, tuned.default_p50_interval)
    assert tuned.best_p50_ms != tuned.default_p50_ms


def test_sessions_that_land_apart_widen_every_interval():
    """Every process lands 3 % off another of the same configuration (where its buffers went),
    and every side is reopened between sessions: a candidate 2 % faster within its rounds is a
    tie, not a win."""
    landing = np.random.default_rng(4)

    class Lands(Session):
        def __init__(self, ms: float, seed: int) -> None:
            super().__init__(ms * float(np.exp(landing.normal(0.0, 0.03))), seed)
            self.base = ms

        def reopen(self) -> BlockTimer:
            return Lands(self.base, 0)

    def open_timer(options):
        return Lands(0.98 if options["threads"] == 2 else 1.0, 0)

    tuned = search(
        "f.onnx", DEFAULT, stages((), 2), open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    (trial,) = tuned.trials
    assert trial.verdict == "tie" and trial.interval[0] < 1.0 < trial.interval[1]


def test_a_value_the_runtime_refuses_fails_that_candidate_and_the_search_goes_on():
    def refuse(options):
        return "onnx: 3 levels are too many" if options["level"] == 3 else None

    open_timer, opened = scripted(two_cores_and_level, refuse)
    tuned = search(
        "f.onnx",
        DEFAULT,
        stages((LEVEL,), 2),
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    failed = [t for t in tuned.trials if t.verdict == "failed"]
    assert [(t.value, t.error) for t in failed] == [(3, "onnx: 3 levels are too many")]
    assert tuned.best == {"threads": 2, "mode": "plain", "level": 1}
    assert all(timer.closed for timer in opened)


def test_an_incumbent_that_fails_stops_the_search_and_closes_every_session():
    class Crashes(Session):
        def block(self, runs: int) -> Block:
            raise EdgekitError("onnx: the session crashed")

    opened: list[Session] = []

    def open_timer(options):
        opened.append(Crashes(1.0, 0) if options["threads"] == 1 else Session(0.5, 0))
        return opened[-1]

    with pytest.raises(EdgekitError, match="the incumbent failed: onnx: the session crashed"):
        search(
            "f.onnx",
            DEFAULT,
            stages((), 2),
            open_timer,
            protocol=PLAN,
            guard=NO_GUARD,
            budget_s=60.0,
        )
    assert len(opened) == 3 and all(timer.closed for timer in opened)


def test_a_stage_that_would_not_fit_the_budget_is_left_out_and_named():
    # every look at the clock is 10 s later: the thread stage takes 10 s, and at 30 s the next
    # stage and the final comparison (10 s each, as the slowest stage) would end past 45 s
    ticks = iter(range(0, 1000, 10))
    open_timer, _ = scripted(two_cores_and_level)
    tuned = search(
        "f.onnx",
        DEFAULT,
        stages((MODE, LEVEL), 2),
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=45.0,
        clock=lambda: next(ticks),
    )
    assert [t.knob for t in tuned.trials] == ["threads"]
    assert tuned.untried == ["mode", "level"]
    roomier = iter(range(0, 1000, 10))
    tuned = search(
        "f.onnx",
        DEFAULT,
        stages((MODE, LEVEL), 2),
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=50.0,
        clock=lambda: next(roomier),
    )
    assert [t.knob for t in tuned.trials][:2] == ["threads", "mode"]


def test_a_knob_that_needs_another_is_searched_only_beside_it():
    parallel = Knob("inter_op", (1, 2), "", requires={"mode": "fancy"})
    open_timer, _ = scripted(lambda options: 1.0)
    tuned = search(
        "f.onnx",
        DEFAULT | {"inter_op": 1},
        [MODE, parallel],
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    assert [t.knob for t in tuned.trials] == ["mode"]  # mode stayed plain: inter_op moot
    open_timer, _ = scripted(lambda options: 0.7 if options["mode"] == "fancy" else 1.0)
    tuned = search(
        "f.onnx",
        DEFAULT | {"inter_op": 1},
        [MODE, parallel],
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    assert [t.knob for t in tuned.trials] == ["mode", "inter_op"]  # fancy won: now it matters


def test_a_value_brings_the_options_it_needs():
    fancy = Knob("mode", ("plain", "fancy"), "", companions={"fancy": {"helpers": 2}})
    asked: list[dict] = []
    open_timer, _ = scripted(lambda options: asked.append(options) or 1.0)
    search(
        "f.onnx",
        DEFAULT | {"helpers": 1},
        [fancy],
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
    )
    assert [(o["mode"], o["helpers"]) for o in asked] == [("plain", 1), ("plain", 1),
                                                          ("fancy", 2),  # the stage
                                                          ("plain", 1), ("plain", 1)]  # fmt: skip


def test_faster_only_below_one_slower_only_above():
    assert verdict((0.90, 0.99)) == "faster"
    assert verdict((0.95, 1.0)) == "tie" and verdict((1.0, 1.05)) == "tie"
    assert verdict((1.01, 1.10)) == "slower"


def test_threads_go_from_one_to_the_cores():
    assert stages((), 4)[0].values == (1, 2, 3, 4)


def test_the_fastest_of_several_faster_values_wins_and_changed_names_it():
    open_timer, _ = scripted(lambda o: {1: 1.0, 2: 0.9, 3: 0.7}[o["level"]])
    tuned = search(
        "f.onnx", DEFAULT, [LEVEL], open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert tuned.best["level"] == 3 and tuned.to_dict()["changed"] == {"level": 3}
    fancy, _ = scripted(lambda o: 0.7 if o["mode"] == "fancy" else 1.0)
    tuned = search("f.onnx", DEFAULT, [MODE], fancy, protocol=PLAN, guard=NO_GUARD, budget_s=60.0)
    assert tuned.changed == {"mode": "fancy"} and tuned.to_dict()["best"]["mode"] == "fancy"


def test_a_candidate_a_little_faster_wins_only_beyond_the_incumbents_own_band():
    open_timer, _ = scripted(lambda o: 0.93 if o["threads"] == 2 else 1.0)
    tuned = search(
        "f.onnx", DEFAULT, stages((), 2), open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert tuned.trials[0].verdict == "faster" and tuned.best["threads"] == 2


def test_ratios_are_against_both_incumbent_sessions_and_p50s_from_the_final_comparison():
    opened = iter(range(100))

    def landed(options) -> float:
        if options["threads"] == 2:
            return 0.6
        return 1.0 if next(opened) % 2 == 0 else 1.04  # the incumbent's two sessions differ

    open_timer, _ = scripted(landed)
    tuned = search(
        "f.onnx", DEFAULT, stages((), 2), open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    both = (1.0 * 1.04) ** 0.5  # the geometric mean of the two sessions
    assert tuned.trials[0].ratio == pytest.approx(0.6 / both, rel=0.01)
    assert tuned.default_p50_ms == pytest.approx(both, rel=0.01)
    assert tuned.best_p50_ms == pytest.approx(0.6, rel=0.02)


def test_threads_stop_at_the_cores():
    assert stages((), 3)[0].values == (1, 2, 3)


def test_errors_keep_their_first_line():
    def refuse(options):
        return "onnx: level 3 refused\ndetails" if options["level"] == 3 else None

    class CrashesAtLevel2(Session):
        def block(self, runs: int) -> Block:
            raise EdgekitError("onnx: crashed\ntraceback")

    opened: list[Session] = []

    def open_timer(options):
        reason = refuse(options)
        if reason:
            raise EdgekitError(reason)
        slow = 0.7 if options["level"] == 1 else 1.0  # level 2 crashes, 3 is refused
        opened.append(CrashesAtLevel2(slow, 0) if options["level"] == 2 else Session(slow, 0))
        return opened[-1]

    tuned = search(
        "f.onnx", DEFAULT, [LEVEL], open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert [(t.value, t.verdict, t.error) for t in tuned.trials] == [
        (2, "failed", "onnx: crashed"), (3, "failed", "onnx: level 3 refused")]  # fmt: skip


def test_a_crash_of_one_candidate_leaves_the_next_one_judged():
    class Crashes(Session):
        def block(self, runs: int) -> Block:
            raise EdgekitError("crashed")

    def open_timer(options):
        if options["level"] == 2:
            return Crashes(1.0, 0)
        return Session(0.7 if options["level"] == 3 else 1.0, options["level"])

    tuned = search(
        "f.onnx", DEFAULT, [LEVEL], open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert [t.verdict for t in tuned.trials] == ["failed", "faster"]


@pytest.mark.parametrize(
    ("session", "message"), [(0, "first session crashed"), (1, "second session crashed\nmore")]
)
def test_either_incumbent_session_failing_stops_the_search(session, message):
    count = iter(range(100))

    class Crashes(Session):
        def block(self, runs: int) -> Block:
            raise EdgekitError(message)

    def open_timer(options):
        return Crashes(1.0, 0) if next(count) == session else Session(1.0, 0)

    first_line = message.splitlines()[0]
    with pytest.raises(EdgekitError, match=rf"the incumbent failed: {first_line}$"):
        search(
            "f.onnx",
            DEFAULT,
            stages((), 2),
            open_timer,
            protocol=PLAN,
            guard=NO_GUARD,
            budget_s=60.0,
        )


def test_a_final_comparison_that_fails_keeps_the_start_and_says_why():
    count = iter(range(100))

    class Crashes(Session):
        def block(self, runs: int) -> Block:
            raise EdgekitError("winner crashed\nmore")

    def open_timer(options):  # the sixth session is the winner's in the final comparison
        n = next(count)
        speed = 0.6 if options["threads"] == 2 else 1.0
        return Crashes(speed, n) if n == 5 else Session(speed, n)

    tuned = search(
        "f.onnx", DEFAULT, stages((), 2), open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert tuned.final == "failed: winner crashed" and tuned.best == DEFAULT
    assert tuned.rejected == DEFAULT | {"threads": 2}


def test_a_final_comparison_whose_sessions_cannot_open_keeps_the_start():
    count = iter(range(100))

    def refuse(options):
        return "no memory left\nmore" if next(count) >= 3 else None

    open_timer, _ = scripted(two_cores_and_level, refuse)
    tuned = search(
        "f.onnx", DEFAULT, stages((), 2), open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0
    )
    assert tuned.final == "failed: no memory left" and tuned.best == DEFAULT


def test_a_knob_with_one_value_or_not_applying_opens_nothing_and_the_next_still_runs():
    solo = Knob("solo", ("only",), "")
    later = Knob("later", (1, 2), "", requires={"mode": "fancy"})
    open_timer, opened = scripted(lambda options: 1.0)
    tuned = search("f.onnx", DEFAULT | {"solo": "only", "later": 1}, [solo, later, MODE],
                   open_timer, protocol=PLAN, guard=NO_GUARD, budget_s=60.0)  # fmt: skip
    assert [t.knob for t in tuned.trials] == ["mode"]
    assert len(opened) == 3 + 2  # the one stage; the start's two sides at the end


def test_elapsed_is_the_time_the_search_took():
    ticks = iter(range(100, 1000, 10))
    open_timer, _ = scripted(lambda options: 1.0)
    tuned = search(
        "f.onnx",
        DEFAULT,
        [MODE],
        open_timer,
        protocol=PLAN,
        guard=NO_GUARD,
        budget_s=60.0,
        clock=lambda: next(ticks),
    )
    assert tuned.elapsed_s == 30 and tuned.budget_s == 60.0  # four looks at the clock


class Drifting(Session):
    """A session whose process landed ``landing`` off (each reopen lands anew), on a machine
    whose speed moves by ``drift`` from one session to the next."""

    def __init__(self, ms: float, seed: int, drift: float) -> None:
        super().__init__(ms, seed)
        self.drift = drift
        self.ms = ms * (1.0 + self._rng.normal(0.0, drift))

    def reopen(self) -> Drifting:
        self.close()
        return Drifting(self.ms, int(self._rng.integers(1 << 30)), self.drift)


@pytest.mark.parametrize("drift", [0.003, 0.01])
def test_the_p50_interval_covers_each_session_and_widens_with_the_drift_between_them(drift):
    seeds = iter(range(1000))
    widths = {}
    for spread in (drift, drift * 4):

        def open_timer(options, spread=spread):
            return Drifting(0.6 if options["threads"] == 2 else 1.0, next(seeds), spread)

        tuned = search(
            "f.onnx",
            DEFAULT,
            stages((), 2),
            open_timer,
            protocol=PLAN,
            guard=NO_GUARD,
            budget_s=60.0,
        )
        assert tuned.final == "faster" and tuned.best["threads"] == 2
        low, high = tuned.best_p50_interval
        assert low < tuned.best_p50_ms < high
        widths[spread] = high / low
    assert widths[drift * 4] > widths[drift]


def test_final_runs_in_sessions_of_at_least_two_rounds():
    from edgekit.tune.search import FINAL_SESSIONS, final_protocol

    final = final_protocol(LatencyProtocol(rounds=4))
    assert final.sessions == FINAL_SESSIONS and final.rounds == 2 * FINAL_SESSIONS
    assert final_protocol(LatencyProtocol(rounds=12)).rounds == 12


def test_a_p50_interval_when_the_clean_rounds_all_fell_in_one_session():
    """Rounds the noise guard set aside in two of three sessions: the prediction still sees
    every session (disturbed ones included) rather than none."""
    from edgekit.measure.interleaved import Interleaved
    from edgekit.tune.search import p50_interval

    session_ms = (1.0, 1.05, 0.97)
    result = Interleaved(["a", "b"], [1, 1], [[], []])
    result.session_of_round = [0, 0, 1, 1, 2, 2, 2, 2]
    for side in (0, 1):
        result.blocks[side] = [Block([session_ms[s]] * 3, session_ms[s], session_ms[s])
                               for s in result.session_of_round]  # fmt: skip
    result.rounds_used = [4, 5, 6, 7]  # only the last session's were clean
    low, high = p50_interval(result, [0, 1])
    assert low < 0.97 and high > 1.05
    assert (low * high) ** 0.5 == pytest.approx(0.97)  # about the clean rounds' p50
    result.rounds_used = [0, 2, 4]  # clean rounds in every session: those alone
    low, high = p50_interval(result, [0, 1])
    assert (low * high) ** 0.5 == pytest.approx(1.0)  # the median of 1.0, 1.05 and 0.97
