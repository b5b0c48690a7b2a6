"""Which artifact to ship: the recommendation and the Pareto front decided on rows built by
hand, so that each rule (interval-backed speed, ties, the drop budget, why each row lost) is
pinned without measuring anything."""

from __future__ import annotations

import dataclasses

import pytest
from measured_rows import interleaved, measured_row, read_back

from edgekit.common.budget import DropBudget
from edgekit.common.ranking import stopping_line
from edgekit.common.schema import record_from
from edgekit.common.stats import ratio_interval
from edgekit.records import MemoryRecord
from edgekit.report.recommend import (
    Recommendation,
    decision_lines,
    faster,
    latency_ratio,
    measured,
    measuring_line,
    pareto_front,
    recommend,
    recommend_each,
    same_pool,
    speed_groups,
    tied,
    timed,
    told_apart,
)
from edgekit.results import Row

FAST = [1.00, 1.01, 0.99, 1.02, 1.00]
SLOW = [1.30, 1.31, 1.29, 1.33, 1.30]


def test_a_clear_winner_is_faster_beyond_its_interval():
    fast = measured_row("tflite", "fp32", [1.00, 1.01, 0.99, 1.02, 1.00], 0.0, 0.0)
    slow = measured_row("onnx", "fp32", [1.30, 1.31, 1.29, 1.33, 1.30], 0.0, 0.0)
    advice = recommend(interleaved(fast, slow), max_drop=1.0)
    assert advice.best is fast and advice.tie_break is None
    assert "slower: 1.30x" in dict(advice.reasons)[slow.label]


def test_a_tie_goes_to_the_smaller_drop_then_the_smaller_file():
    # the same latency within noise: the round ratios straddle 1
    a = measured_row("tflite", "int8", [1.00, 1.05, 0.97, 1.03, 0.99], 0.4, 0.8, size=900)
    b = measured_row("onnx", "int8", [1.01, 0.98, 1.04, 0.99, 1.02], 0.1, 0.5, size=2000)
    advice = recommend(interleaved(a, b), max_drop=1.0)
    assert advice.best is b and "in one speed group" in advice.tie_break
    c = measured_row("executorch", "int8", [1.02, 0.99, 1.01, 1.00, 1.00], 0.1, 0.5, size=500)
    advice = recommend(interleaved(a, b, c), max_drop=1.0)
    assert advice.best is c  # same drop as b, smaller file


def test_pareto_front_counts_only_interval_backed_speed():
    fast = measured_row("a", "int8", [1.0, 1.01, 0.99, 1.0, 1.0], 0.5, 0.9)
    same_speed_better_drop = measured_row("b", "fp32", [1.0, 0.99, 1.01, 1.0, 1.0], 0.0, 0.0)
    slow_worse = measured_row("c", "int8", [1.5, 1.51, 1.49, 1.5, 1.5], 0.6, 1.0)
    front = pareto_front(interleaved(fast, same_speed_better_drop, slow_worse))
    assert [row.target for row in front] == ["b"]  # b ties a on latency and has a smaller drop


def test_rows_that_cannot_win_say_why():
    software_gpu = measured_row("tflite", "fp32", [0.1] * 5, 0.0, 0.0, device="gpu")
    software_gpu.traits = {"latency_comparable": False, "note": "software Vulkan, not a GPU speed"}
    over = measured_row("onnx", "int8", [0.5] * 5, 1.2, 2.5)
    good = measured_row("executorch", "int8", [0.8] * 5, 0.2, 0.6)
    lacking = Row(
        kind="artifact",
        target="onnx",
        recipe="fp16",
        device="gpu",
        threads=1,
        status="unavailable",
        error="no CUDA",
    )
    rows = [software_gpu, over, good, lacking]
    advice = recommend(rows, max_drop=1.0)
    reasons = dict(advice.reasons)
    assert advice.best is good
    assert "software Vulkan" in reasons[software_gpu.label]
    assert "drop upper bound +2.50 > budget 1" in reasons[over.label]
    assert lacking.label not in reasons  # a device this machine lacks is listed elsewhere
    assert recommend(rows, max_drop=-1.0).best is None


def test_disturbed_rows_still_compete_on_their_paired_ratios_with_a_warning():
    fast, slow = interleaved(
        measured_row("tflite", "int8", [0.30, 0.31, 0.29, 0.30, 0.30], 0.1, 0.5, disturbed=True),
        measured_row("onnx", "fp32", [0.60, 0.61, 0.59, 0.60, 0.60], 0.0, 0.3, disturbed=True),
    )
    advice = recommend([fast, slow], max_drop=1.0)
    assert advice.best is fast
    assert "slower: 2.00x" in dict(advice.reasons)[slow.label]
    assert "WARNING: other processes disturbed the timing of 2 competing row(s)" in advice.summary
    quiet = recommend(
        interleaved(measured_row("tflite", "int8", [0.3] * 5, 0.1, 0.5)), max_drop=1.0
    )
    assert "WARNING" not in quiet.summary


def test_when_nothing_qualifies_the_summary_gives_the_reasons_that_applied():
    failed = measured_row("onnx", "int8", [0.5] * 5, 0.0, 0.0)
    failed.status, failed.error = "failed", "crashed"
    over = measured_row("tflite", "int8", [0.3] * 5, 1.5, 2.0)
    summary = recommend([failed, over], max_drop=1.0).summary
    assert summary == "nothing to recommend: 1 row(s) failed; 1 row(s) drop over the budget"
    only_failed = recommend([failed], max_drop=1.0).summary
    assert "budget" not in only_failed  # the budget is never the reason where it was not


def _pair(**changes):
    """Two rows timed in the same rounds, the second then changed by ``changes``."""
    a, b = interleaved(
        measured_row("tflite", "fp32", FAST, 0.0, 0.0), measured_row("onnx", "fp32", SLOW, 0.0, 0.0)
    )
    for name, value in changes.items():
        setattr(b, name, value)
    return a, b


@pytest.mark.parametrize(
    ("side", "name", "value"),
    [("b", "device", "gpu"), ("b", "threads", 2), ("b", "rounds_ms", SLOW[:4]),
     ("a", "interleaved_with", [])],
    ids=["another device", "other threads", "fewer rounds", "not in the pool"],
)  # fmt: skip
def test_rows_are_compared_by_ratio_only_when_timed_in_the_same_rounds(side, name, value):
    a, b = _pair()
    assert same_pool(a, b) and same_pool(b, a)
    assert latency_ratio(b, a) == ratio_interval(SLOW, FAST, None, 0.0)
    setattr({"a": a, "b": b}[side], name, value)
    assert not same_pool(a, b) and latency_ratio(a, b) is None
    if name != "interleaved_with":  # the pool is the same seen from either row
        assert not same_pool(b, a) and latency_ratio(b, a) is None


def test_rows_without_rounds_are_never_one_pool():
    a, b = _pair()
    a.rounds_ms, b.rounds_ms = [], []
    assert not same_pool(a, b) and not same_pool(b, a)


def test_a_ratio_is_widened_by_the_larger_noise_band_of_the_two():
    a, b = _pair(noise_band=0.1)
    a.noise_band = 0.05
    assert latency_ratio(b, a) == ratio_interval(SLOW, FAST, None, 0.1)
    a.noise_band, b.noise_band = 0.2, None
    assert latency_ratio(b, a) == ratio_interval(SLOW, FAST, None, 0.2)


def test_a_ratio_over_several_sessions_takes_its_interval_from_the_sessions():
    slow = [1.30, 1.31, 1.29, 1.36, 1.37, 1.35]
    fast = [1.00, 1.01, 0.99, 1.00, 1.01, 0.99]
    a, b = interleaved(
        measured_row("onnx", "fp32", slow, 0.0, 0.0), measured_row("tflite", "fp32", fast, 0, 0)
    )
    a.round_sessions = b.round_sessions = [0, 0, 0, 1, 1, 1]
    a.noise_band = 0.5  # the sessions' spread stands in for the band
    expected = ratio_interval(slow, fast, [0, 0, 0, 1, 1, 1], 0.5)
    assert latency_ratio(a, b) == expected
    assert expected != ratio_interval(slow, fast, None, 0.5)


def test_the_same_rounds_on_both_sides_tie_neither_is_faster():
    a, b = interleaved(
        measured_row("tflite", "fp32", FAST, 0.0, 0.0), measured_row("onnx", "fp32", FAST, 0, 0)
    )
    assert latency_ratio(a, b) == (1.0, (1.0, 1.0))
    assert not faster(a, b) and not faster(b, a) and tied(a, b)


def test_rows_of_other_pools_compare_by_p50_and_equal_p50s_tie():
    a, b = _pair(threads=2)
    assert faster(a, b) and not faster(b, a) and not tied(a, b)
    b.latency = {"p50_ms": a.p50}
    assert tied(a, b)


def test_only_measured_comparable_rows_with_a_drop_and_its_interval_compete():
    good = measured_row("tflite", "int8", FAST, 0.1, 0.5)
    baseline = measured_row("baseline", "fp32", FAST, 0.0, 0.0, kind="baseline")
    failed = measured_row("onnx", "int8", FAST, 0.1, 0.5, status="failed")
    software = measured_row("tflite", "fp16", FAST, 0.1, 0.5, device="gpu")
    software.traits = {"latency_comparable": False}
    no_latency = measured_row("onnx", "fp32", FAST, 0.0, 0.0)
    no_latency.latency = {}
    no_drop = measured_row("executorch", "int8", FAST, 0.1, 0.5)
    no_drop.accuracy = dataclasses.replace(no_drop.accuracy, drop_points=None)
    no_interval = measured_row("executorch", "fp32", FAST, 0.1, 0.5)
    no_interval.accuracy = dataclasses.replace(no_interval.accuracy, drop_ci=None)
    rows = [good, baseline, failed, software, no_latency, no_drop, no_interval]
    assert measured(rows) == [good]


def test_the_front_keeps_rows_that_tie_with_the_same_drop_and_sorts_by_p50():
    a = measured_row("tflite", "int8", [1.00, 1.05, 0.97, 1.03, 0.99], 0.4, 0.8)
    b = measured_row("onnx", "int8", [1.01, 0.98, 1.04, 0.99, 1.02], 0.4, 0.8)
    slower_but_better = measured_row("executorch", "fp32", SLOW, 0.0, 0.0)
    front = pareto_front(interleaved(slower_but_better, a, b))
    assert front == sorted([a, b, slower_but_better], key=lambda row: row.p50)
    assert front[-1] is slower_but_better  # slower, yet no other row has a drop as small


def test_a_server_row_never_dominates_an_on_device_row():
    device = measured_row("onnx", "int8", SLOW, 0.4, 0.8)
    server = measured_row("baseline", "fp32", FAST, 0.0, 0.0)
    server.traits = {"latency_comparable": True, "where": "server"}
    assert pareto_front(interleaved(device, server)) == [server, device]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"status": "failed", "error": "crashed"}, "failed: crashed"),
        ({"accuracy": None}, "no accuracy figure"),
        ({"latency": {}}, "no latency figure"),
        (
            {"accuracy": {"drop_points": None, "drop_ci": None}},
            "no baseline to measure a drop against (a file without a source model)",
        ),
        (
            {"accuracy": {"drop_points": 0.1, "drop_ci": None}},
            "no baseline to measure a drop against (a file without a source model)",
        ),
        ({"traits": {"note": "emulated: not a phone's speed"}}, "emulated: not a phone's speed"),
        ({"traits": {}}, "its latency is not comparable"),
        (
            {"traits": {"latency_comparable": True, "where": "server"}},
            "a server row: compared with the baseline, never with on-device rows",
        ),
        (
            {"accuracy": {"drop_points": 0.5, "drop_ci": [0.1, 1.4]}},
            "drop upper bound +1.40 > budget 1",
        ),
    ],
)
def test_each_row_that_cannot_win_says_why_in_one_phrase(change, why):
    row = measured_row("onnx", "int8", FAST, 0.1, 0.5, **change)
    advice = recommend([row], max_drop=1.0)
    assert advice.best is None and advice.reasons == [(row.label, why)]


def test_a_point_estimate_budget_holds_the_drop_not_its_upper_bound():
    row = measured_row("onnx", "int8", FAST, 0.8, 1.5)
    assert recommend([row], max_drop=1.0).best is None
    assert recommend([row], max_drop=1.0, point_estimate=True).best is row
    over = measured_row("onnx", "int8", FAST, 1.2, 1.5)
    advice = recommend([over], max_drop=1.0, point_estimate=True)
    assert advice.reasons == [(over.label, "drop +1.20 > budget 1")]


def test_a_drop_exactly_at_the_budget_is_within_it():
    row = measured_row("onnx", "int8", FAST, 0.7, 1.0)
    assert recommend([row], max_drop=1.0).best is row


def test_the_winner_is_chosen_on_the_first_device_and_the_others_are_sent_to_their_own_rows():
    gpu = measured_row("tflite", "fp16", [0.1] * 5, 0.0, 0.2, device="gpu")
    cpu = measured_row("onnx", "int8", SLOW, 0.1, 0.5)
    baseline = measured_row("baseline", "fp32", SLOW, 0.0, 0.0, kind="baseline")
    unavailable = Row(kind="artifact", target="onnx", recipe="fp16", device="cuda", threads=1,
                      status="unavailable", error="no CUDA")  # fmt: skip
    advice = recommend([baseline, unavailable, cpu, gpu], max_drop=1.0)
    assert advice.best is cpu and advice.budget == 1.0
    assert advice.reasons == [(gpu.label, "other device (gpu): see its own rows")]
    assert recommend([gpu, cpu], max_drop=1.0).best is gpu


def test_a_tie_on_drop_and_size_goes_to_the_smaller_p50_and_each_loser_says_why():
    a = measured_row("tflite", "int8", [1.00, 1.05, 0.97, 1.03, 0.99], 0.1, 0.5)
    b = measured_row("onnx", "int8", [1.01, 0.98, 1.04, 0.99, 1.02], 0.1, 0.5)
    slow = measured_row("executorch", "int8", SLOW, 0.0, 0.3)
    advice = recommend(interleaved(a, b, slow), max_drop=1.0)
    assert advice.best is a  # p50 1.00 against 1.01
    assert advice.tie_break == (
        "in one speed group with onnx/int8 @ cpu x1 (not told apart): chose the smaller "
        "drop, then the smaller file"
    )
    value, (low, high) = latency_ratio(slow, a)
    assert advice.reasons == [
        (b.label, "same speed group; lost on drop +0.10 or size"),
        (slow.label, f"slower: {value:.2f}x [{low:.2f}, {high:.2f}] its p50"),
    ]


def test_a_row_without_a_size_counts_as_the_smallest_file():
    a = measured_row("tflite", "int8", [1.00, 1.05, 0.97, 1.03, 0.99], 0.1, 0.5, size=None)
    b = measured_row("onnx", "int8", [0.99, 0.98, 1.04, 0.99, 1.02], 0.1, 0.5, size=1)
    assert recommend(interleaved(a, b), max_drop=1.0).best is a


def test_rows_of_another_thread_count_lose_on_their_p50_and_say_they_were_not_interleaved():
    one = measured_row("onnx", "int8", [0.3] * 5, 0.1, 0.5)
    two = measured_row("onnx", "int8", [0.6] * 5, 0.1, 0.5)
    two.threads = 2
    advice = recommend([two, one], max_drop=1.0)
    assert advice.best is one and advice.tie_break is None
    assert advice.reasons == [(two.label, "slower: p50 0.600 ms vs 0.300 ms (not interleaved)")]


def test_a_row_of_another_pool_with_the_same_thread_count_loses_on_its_p50_not_a_ratio():
    # a resumed run's pool beside the first: the same device and threads, no shared rounds
    first = measured_row("onnx", "int8", [0.3] * 5, 0.1, 0.5)
    resumed = measured_row("tflite", "int8", [0.6] * 5, 0.1, 0.5)
    advice = recommend([resumed, first], max_drop=1.0)
    assert advice.best is first
    assert advice.reasons == [(resumed.label, "slower: p50 0.600 ms vs 0.300 ms (not interleaved)")]


def test_only_disturbed_rows_of_the_winners_device_are_warned_about():
    cpu = measured_row("onnx", "int8", [0.3] * 5, 0.1, 0.5)
    gpu = measured_row("tflite", "fp16", [0.1] * 5, 0.0, 0.2, device="gpu", disturbed=True)
    assert recommend([cpu, gpu], max_drop=1.0).disturbed == []
    cpu.disturbed = True
    assert recommend([cpu, gpu], max_drop=1.0).disturbed == [cpu.label]


def test_the_summary_states_the_winner_its_speed_up_drop_and_budget():
    best = measured_row("tflite", "int8", [0.3] * 5, 0.1, 0.5, speedup=2.0, speedup_ci=(1.9, 2.1))
    summary = Recommendation(best, 1.0).summary
    assert summary == (
        "tflite/int8 @ cpu x1: p50 0.300 ms, 2.00x [1.90, 2.10] the baseline in this run, drop "
        "+0.10 points (95% upper bound +0.50 <= 1)"
    )
    best.speedup_ci = None
    assert ", 2.00x [2.00, 2.00] the baseline" in Recommendation(best, 1.0).summary
    best.speedup = None
    assert Recommendation(best, 1.5).summary == (
        "tflite/int8 @ cpu x1: p50 0.300 ms, drop +0.10 points (95% upper bound +0.50 <= 1.5)"
    )
    tie_and_warning = Recommendation(best, 1.0, tie_break="tied", disturbed=["a", "b", "c"])
    assert tie_and_warning.summary.endswith(
        "<= 1); tied; WARNING: other processes disturbed the timing of 3 competing row(s): "
        "ranked on their paired per-round ratios, absolute ms unreliable"
    )


def test_the_summary_with_no_winner_tallies_the_reasons_by_kind():
    no_baseline = "no baseline to measure a drop against (a file without a source model)"
    assert Recommendation(None, 1.0, [("a", no_baseline), ("b", no_baseline)]).summary == (
        "nothing to recommend: no baseline in this run to measure a drop against"
    )
    mixed = [
        ("a", no_baseline),
        ("b", "failed: crashed"),
        ("c", "failed: timed out"),
        ("d", "drop upper bound +2.00 > budget 1"),
        ("e", "no latency figure"),
    ]
    assert Recommendation(None, 1.0, mixed).summary == (
        "nothing to recommend: 1 row(s) no baseline to measure a drop against (a file without a "
        "source model); 2 row(s) failed; 1 row(s) drop over the budget; 1 row(s) no latency "
        "figure"
    )
    assert Recommendation(None, 1.0, []).summary == (
        "nothing to recommend: no artifact row was measured"
    )


def test_each_model_of_a_run_gets_its_own_recommendation_in_run_order():
    a = measured_row("onnx", "int8", [0.3] * 5, 0.1, 0.5, model="b-model")
    b = measured_row("onnx", "int8", [0.2] * 5, 0.1, 0.5, model="a-model")
    unnamed = measured_row("tflite", "int8", [0.1] * 5, 0.1, 0.5)
    advice = recommend_each([a, b, unnamed], max_drop=1.0, point_estimate=False)
    assert list(advice) == ["b-model", "a-model", ""]
    assert [advice[m].best for m in advice] == [a, b, unnamed]
    assert all(advice[m].reasons == [] for m in advice)  # no model saw another's rows
    over = recommend_each([a], max_drop=0.5, point_estimate=True)["b-model"]
    assert over.best is a and over.budget == 0.5


def test_the_drop_budget_holds_the_upper_bound_unless_told_to_hold_the_drop():
    upper = DropBudget.of(1.0)
    assert upper == DropBudget(1.0, on_upper_bound=True) and upper.figure == "drop upper bound"
    assert upper.rule == "upper bound of the drop's 95% interval"
    assert upper.measured(0.2, 1.3) == 1.3 and upper.over(0.2, 1.3) and not upper.over(0.2, 1.0)
    assert upper.why_over(0.2, 1.3) == "drop upper bound +1.30 > budget 1"
    point = DropBudget.of(0.5, point_estimate=True)
    assert not point.on_upper_bound and point.figure == "drop" and point.rule == "drop"
    assert point.measured(0.2, 1.3) == 0.2 and not point.over(0.5, 9.0) and point.over(0.51, 0)
    assert point.why_over(0.75, 2.0) == "drop +0.75 > budget 0.5"
    assert DropBudget() == DropBudget(1.0, True)
    assert DropBudget.of(points=2.0).points == 2.0  # named as callers name it
    with pytest.raises(TypeError):  # the flag is keyword-only: of(0.5, True) says nothing
        DropBudget.of(0.5, True)
    with pytest.raises(dataclasses.FrozenInstanceError):  # one budget, read by every command
        upper.points = 2.0


def test_rows_read_back_from_results_json_compare_by_value_not_identity():
    a, b = interleaved(
        measured_row(
            "tflite", "fp32", FAST, 0.0, 0.0, device=read_back("cpu"), status=read_back("ok")
        ),
        measured_row("onnx", "fp32", SLOW, 0.0, 0.0, device=read_back("cpu")),
    )
    a.traits = {"latency_comparable": True, "where": read_back("host")}
    assert same_pool(a, b)
    advice = recommend([a, b], max_drop=1.0)
    assert advice.best is a and [why for _, why in advice.reasons] == [
        f"slower: {latency_ratio(b, a)[0]:.2f}x [{latency_ratio(b, a)[1][0]:.2f}, "
        f"{latency_ratio(b, a)[1][1]:.2f}] its p50"
    ]
    # equal drops that are not one float object: a tie, not a domination
    tie_a = measured_row("tflite", "int8", [1.00, 1.05, 0.97, 1.03, 0.99], float("0.4"), 0.8)
    tie_b = measured_row("onnx", "int8", [1.01, 0.98, 1.04, 0.99, 1.02], float("0.4"), 0.8)
    tie_b.traits = {"latency_comparable": True, "where": read_back("host")}
    assert len(pareto_front(interleaved(tie_a, tie_b))) == 2


def test_a_faster_row_with_the_same_drop_takes_the_slower_ones_place_on_the_front():
    fast = measured_row("tflite", "int8", FAST, 0.4, 0.8)
    slow = measured_row("onnx", "int8", SLOW, 0.4, 0.8)
    slow.traits = {"latency_comparable": True, "where": read_back("host")}  # as results.json has it
    assert pareto_front(interleaved(fast, slow)) == [fast]


def test_the_other_devices_rows_are_sent_to_their_own_whichever_device_comes_first():
    gpu = measured_row("tflite", "fp16", [0.1] * 5, 0.0, 0.2, device="gpu")
    cpu = measured_row("onnx", "int8", SLOW, 0.1, 0.5)
    advice = recommend([gpu, cpu], max_drop=1.0)
    assert advice.best is gpu
    assert advice.reasons == [(cpu.label, "other device (cpu): see its own rows")]


def test_two_rows_alike_in_every_field_are_still_two_rows():
    a, b = interleaved(
        measured_row("onnx", "int8", FAST, 0.1, 0.5), measured_row("onnx", "int8", FAST, 0.1, 0.5)
    )
    advice = recommend([a, b], max_drop=1.0)
    assert advice.best is a
    assert advice.reasons == [(b.label, "same speed group; lost on drop +0.10 or size")]
    assert advice.tie_break.startswith(f"in one speed group with {b.label} (not told apart")


def test_by_default_the_budget_is_one_point_on_the_upper_bound():
    within = measured_row("onnx", "int8", [0.3] * 5, 0.5, 1.0)
    upper_over = measured_row("tflite", "int8", [0.2] * 5, 0.8, 1.5)
    assert recommend([within, upper_over]).best is within
    assert recommend_each([within, upper_over])[""].best is within
    assert recommend([measured_row("onnx", "int8", [0.3] * 5, 1.2, 1.9)]).best is None


def test_rows_of_many_rounds_are_one_pool():
    # 300 rounds: counts past the small integers CPython keeps as single objects
    a, b = interleaved(
        measured_row("tflite", "fp32", FAST * 60, 0.0, 0.0),
        measured_row("onnx", "fp32", SLOW * 60, 0.0, 0.0),
    )
    assert same_pool(a, b) and latency_ratio(b, a) == ratio_interval(SLOW * 60, FAST * 60)


def test_an_on_device_row_never_dominates_a_server_row_either():
    device = measured_row("onnx", "int8", FAST, 0.0, 0.2)
    server = measured_row("baseline", "fp32", SLOW, 0.4, 0.8)
    server.traits = {"latency_comparable": True, "where": "server"}
    assert pareto_front(interleaved(device, server)) == [device, server]


def test_kinds_statuses_places_and_models_read_back_from_json_are_compared_by_value():
    artifact = measured_row("onnx", "int8", FAST, 0.1, 0.5, kind=read_back("artifact"))
    assert measured([artifact]) == [artifact]
    assert recommend([artifact], max_drop=1.0).best is artifact
    server = measured_row("onnx", "int8", FAST, 0.1, 0.5)
    server.traits = {"latency_comparable": True, "where": read_back("server")}
    assert recommend([server], max_drop=1.0).reasons == [
        (server.label, "a server row: compared with the baseline, never with on-device rows")
    ]
    missing = Row(kind="artifact", target="onnx", recipe="fp16", device="cuda", threads=1,
                  status=read_back("unavailable"), error="no CUDA")  # fmt: skip
    assert recommend([missing], max_drop=1.0).reasons == []
    named = measured_row("onnx", "int8", FAST, 0.1, 0.5, model=read_back("digits-mobilenet"))
    slower = measured_row("tflite", "int8", SLOW, 0.1, 0.5, model=read_back("digits-mobilenet"))
    advice = recommend_each(interleaved(named, slower), max_drop=1.0)["digits-mobilenet"]
    assert advice.best is named and [label for label, _ in advice.reasons] == [slower.label]


def test_a_row_without_a_size_ties_with_an_empty_file_and_the_smaller_p50_wins():
    unknown = measured_row("tflite", "int8", [1.00, 1.05, 0.97, 1.03, 1.01], 0.1, 0.5, size=None)
    empty = measured_row("onnx", "int8", [0.99, 0.98, 1.04, 0.99, 1.00], 0.1, 0.5, size=0)
    assert recommend(interleaved(unknown, empty), max_drop=1.0).best is empty


@pytest.mark.parametrize(
    ("memory", "said"),
    [
        ({"status": "ok", "process_peak_mb": 125.4, "model_mb": 1.23},
         ", memory: process peak 125 MB, the model's own 1.2 MB"),
        ({"status": "ok", "process_peak_mb": 12.0, "model_mb": None},  # a phone: no share
         ", memory: process peak 12 MB"),
        ({"status": "unavailable", "process_peak_mb": None}, ""),
        ({"status": "failed", "process_peak_mb": 125.4}, ""),  # a peak of a run that failed
        ({"status": "unavailable", "process_peak_mb": 125.4}, ""),
        ({"status": read_back("ok"), "process_peak_mb": 12.0}, ", memory: process peak 12 MB"),
        (None, ""),
    ],
)  # fmt: skip
def test_the_recommendation_names_the_memory_of_what_it_recommends(memory, said):
    best = measured_row("tflite", "int8", FAST, 0.0, 0.0)
    best.memory = None if memory is None else record_from(MemoryRecord, memory)  # as read
    advice = recommend(interleaved(best), max_drop=1.0)
    assert advice.best is best
    assert advice.summary.endswith(f"<= 1){said}")


def test_groups_decide_where_rounds_alone_tied_and_the_faster_artifact_wins():
    """The MobileNetV2 case: onnx/int8 6.09 ms, executorch/int8 6.95 ms. Told apart, the faster
    one is recommended although the slower one's file is smaller."""
    from measured_rows import fitted

    onnx = fitted(measured_row("onnx", "int8", [6.09] * 3, 0.0, 0.0, size=4000), 6.09)
    executorch = fitted(measured_row("executorch", "int8", [6.95] * 3, 0.0, 0.0, size=3000), 6.95)
    tflite = fitted(measured_row("tflite", "int8", [6.12] * 3, 0.0, 0.0, size=3500), 6.12)
    rows = interleaved(onnx, executorch, tflite)
    advice = recommend(rows)
    assert advice.groups == [["onnx/int8 @ cpu x1", "tflite/int8 @ cpu x1"],
                             ["executorch/int8 @ cpu x1"]]  # fmt: skip
    assert advice.best is tflite  # the smaller file within the fastest group
    assert advice.versus.startswith("tflite/int8 @ cpu x1 is 1.14x [")
    assert advice.versus.endswith("faster than executorch/int8 @ cpu x1")
    assert "faster than executorch/int8" in advice.summary


def test_a_member_of_a_chained_group_told_apart_from_the_fastest_is_not_recommended():
    """a ~ b and b ~ c, but a < c: one group (no cut holds), and c, told apart from a, does not
    win on its smaller drop."""
    from measured_rows import fitted

    a = fitted(measured_row("onnx", "int8", [1.0] * 3, 0.5, 0.6), 1.0, variance=2e-4)
    b = fitted(measured_row("tflite", "int8", [1.04] * 3, 0.4, 0.5), 1.04, variance=2e-4)
    c = fitted(measured_row("executorch", "int8", [1.08] * 3, 0.0, 0.0), 1.08, variance=2e-4)
    advice = recommend(interleaved(a, b, c))
    assert advice.groups == [["onnx/int8 @ cpu x1", "tflite/int8 @ cpu x1",
                              "executorch/int8 @ cpu x1"]]  # fmt: skip
    assert advice.best is b  # b ties with a and has the smaller drop; c is slower than a


def test_the_recommended_pools_groups_and_measuring_are_said_in_words():
    from measured_rows import fitted

    from edgekit.report.recommend import decision_lines

    fast = fitted(measured_row("onnx", "int8", [1.0] * 3, 0.0, 0.1), 1.0)
    slow = fitted(measured_row("onnx", "fp32", [2.0] * 3, 0.0, 0.1), 2.0)
    for row in (fast, slow):
        row.pool = {"sessions": 4, "rounds": 12, "stopped": "precision", "precision": 0.05,
                    "seconds": 31.0, "reopened": True}  # fmt: skip
    advice = recommend(interleaved(fast, slow))
    lines = decision_lines(advice)
    assert lines[0] == "speed groups, fastest first: 1) onnx/int8 @ cpu x1  2) onnx/fp32 @ cpu x1"
    assert lines[1].startswith("onnx/int8 @ cpu x1 is 2.00x [1.9")
    assert lines[2] == ("measured in 4 session(s) of every side, 12 interleaved rounds, 31 s; "
                        "stopped on every interval within 5 % of its ratio")  # fmt: skip


def test_a_budget_that_left_pairs_undecided_names_the_first_three_and_counts_the_rest():
    """Five artifacts of one latency measured too loosely: all ten pairs' intervals include 1
    and reach past the precision. The measuring line names three and says how many more."""
    from measured_rows import fitted

    from edgekit.report.recommend import measuring_line

    recipes = ["fp32", "fp16", "int8", "int8-dynamic"]
    rows = [fitted(measured_row("onnx", recipe, [1.0] * 3, 0.0, 0.1), 1.0, variance=0.01)
            for recipe in recipes]  # fmt: skip
    rows.append(fitted(measured_row("tflite", "fp32", [1.0] * 3, 0.0, 0.1), 1.0, variance=0.01))
    pool = {"sessions": 3, "rounds": 11, "stopped": "budget", "precision": 0.05, "seconds": 90.0}
    line = measuring_line(pool, interleaved(*rows))
    named = "onnx/fp32 @ cpu x1 vs onnx/fp16 @ cpu x1, onnx/fp32 @ cpu x1 vs onnx/int8 @ cpu x1, "
    named += "onnx/fp32 @ cpu x1 vs onnx/int8-dynamic @ cpu x1"
    assert line.endswith(
        f"; undecided (interval includes 1, wider than the precision): {named} and 7 more"
    )
    # two groups far apart, three and two artifacts: four undecided pairs, one more than named
    far = [fitted(measured_row("tflite", recipe, [3.0] * 3, 0.0, 0.1), 3.0, variance=0.01)
           for recipe in ("fp16", "int8")]  # fmt: skip
    four = measuring_line(pool, interleaved(*rows[:3], *far))
    assert four.endswith(" and 1 more")
    # one undecided pair, or three, are all named, with no count
    one = measuring_line(pool, interleaved(*rows[:2]))
    assert one.endswith(": onnx/fp32 @ cpu x1 vs onnx/fp16 @ cpu x1")
    three = measuring_line(pool, interleaved(*rows[:3]))
    assert three.endswith(
        "onnx/fp32 @ cpu x1 vs onnx/fp16 @ cpu x1, onnx/fp32 @ cpu x1 vs onnx/int8 @ cpu x1, "
        "onnx/fp16 @ cpu x1 vs onnx/int8 @ cpu x1"
    )


def test_only_the_chosen_pools_rows_are_ranked_whatever_else_the_run_measured():
    """A run on three devices at 1, 2 and 4 threads: the 2-thread cpu pool is fastest, and its
    speed groups hold its own rows, none of another device's or thread count's. Devices are
    read back from results.json, as a report reads them."""
    from measured_rows import fitted

    def pool(device, threads, ms, disturbed=False):
        rows = [
            fitted(measured_row(target, "int8", [ms * k] * 3, 0.0, 0.1, device=read_back(device),
                                threads=threads, disturbed=disturbed), ms * k)
            for target, k in (("onnx", 1.0), ("tflite", 1.5))
        ]  # fmt: skip
        return interleaved(*rows)

    chosen = pool("cpu", 2, 0.3)
    rows = [*pool("cpu", 1, 0.5, True), *chosen, *pool("cpu", 4, 0.4, True)]
    rows += [*pool("arm64", 2, 0.1), *pool("gpu", 2, 0.2)]  # devices before and after "cpu"
    advice = recommend(rows)
    assert advice.best is chosen[0]
    assert advice.groups == [["onnx/int8 @ cpu x2"], ["tflite/int8 @ cpu x2"]]
    assert advice.disturbed == []  # the other thread counts' disturbed rows are not the pool's


def test_a_faster_row_outside_the_budget_ranks_first_and_the_runner_up_comes_after_the_winner():
    from measured_rows import fitted

    over = fitted(measured_row("onnx", "fp16", [0.2] * 3, 3.0, 4.0), 0.2)  # over the budget
    best = fitted(measured_row("onnx", "int8", [0.4] * 3, 0.0, 0.1), 0.4)
    runner_up = fitted(measured_row("tflite", "int8", [0.8] * 3, 0.0, 0.1), 0.8)
    advice = recommend(interleaved(over, best, runner_up))
    assert advice.best is best and len(advice.groups) == 3
    assert advice.versus.startswith(f"{best.label} is 2.00x [")
    assert advice.versus.endswith(f"faster than {runner_up.label}")


def test_only_measured_comparable_artifacts_are_ranked():
    from measured_rows import fitted

    best = fitted(measured_row("onnx", "int8", [0.4] * 3, 0.0, 0.1), 0.4)
    baseline = fitted(measured_row("baseline", "fp32", [0.1] * 3, 0.0, 0.0, kind="baseline"), 0.1)
    failed = fitted(measured_row("tflite", "fp32", [0.2] * 3, 0.0, 0.0, status="failed"), 0.2)
    uncomparable = fitted(measured_row("tflite", "int8", [0.3] * 3, 0.0, 0.1, traits={}), 0.3)
    unmeasured = measured_row("executorch", "fp32", [0.1] * 3, 0.0, 0.0, latency={})
    rows = interleaved(best, baseline, failed, uncomparable, unmeasured)
    assert timed(rows) == [best]
    assert recommend(rows).groups == [[best.label]]


def test_rows_recorded_before_the_fit_are_grouped_and_told_apart_by_their_rounds():
    fast, slow = _pair()  # interleaved rounds, no level in a fit
    assert speed_groups([slow, fast]) == [[fast], [slow]]
    assert told_apart(fast, slow, [fast, slow]) and told_apart(slow, fast, [fast, slow])
    pool = {"sessions": 1, "rounds": 5, "stopped": "budget"}
    assert measuring_line(pool, [fast, slow]) == stopping_line(pool)  # no pairs from a fit
    assert decision_lines(recommend([fast, slow])) == []  # no speed-group sentence either


def test_a_pool_of_one_has_no_speed_group_sentence():
    from measured_rows import fitted

    alone = fitted(measured_row("onnx", "int8", FAST, 0.0, 0.1), 1.0)
    assert decision_lines(recommend([alone])) == []
    over = fitted(measured_row("onnx", "int8", FAST, 3.0, 4.0), 1.0)  # nothing recommended
    assert decision_lines(recommend([over])) == []
