"""Regression gates decided on figures built by hand: the accuracy gates (drop, agreement,
SQNR), the ARM-vs-x86 gate, the table they print, the latency gate's widened interval and when
it stops measuring, and the recorded-p50 comparison against an earlier run."""

from __future__ import annotations

import pytest
from measured_rows import measured_row, read_back

from edgekit.errors import UserInputError
from edgekit.measure.accuracy import AccuracyRecord
from edgekit.measure.gates import (
    GateResult,
    accuracy_gates,
    accuracy_records,
    device_vs_host_gate,
    format_gates,
    latency_decided,
    run_accuracy_gates,
    run_latency_gates,
)
from edgekit.measure.interleaved import Interleaved
from edgekit.results import Results
from edgekit.worker.latency import Block


def _record(**changes) -> AccuracyRecord:
    figures = {
        "artifact": "runs/r/digits-int8.tflite",
        "label": "tflite/int8 @ cpu x1",
        "device": "cpu",
        "dataset": "digits",
        "samples": 899,
        "top1": 0.935,
        "baseline_top1": 0.939,
        "drop_points": 0.4,
        "drop_ci": (-0.1, 0.9),
        "confidence": 0.95,
        "agreement": 0.98,
        "sqnr_db": 21.5,
        "max_abs_diff": 0.3,
        "mean_abs_diff": 0.01,
        "mcnemar": {"baseline_only": 5, "artifact_only": 1, "p_value": 0.03125},
    }
    return AccuracyRecord(**{**figures, **changes})


def test_the_drop_gate_holds_the_upper_bound_and_passes_at_the_bound():
    (gate,) = accuracy_gates(_record(), max_drop=0.9)
    assert gate == GateResult(
        artifact="tflite/int8 @ cpu x1",
        device="cpu",
        gate="drop upper bound (95%)",
        measured=0.9,
        bound=0.9,
        passed=True,
        detail="drop 0.40 [-0.10, 0.90], McNemar p=0.0312",
    )
    (gate,) = accuracy_gates(_record(), max_drop=0.89)
    assert not gate.passed and gate.measured == 0.9


def test_the_drop_gate_on_the_point_estimate_holds_the_drop_itself():
    (gate,) = accuracy_gates(_record(confidence=0.9), max_drop=0.4, point_estimate=True)
    assert (gate.gate, gate.measured, gate.passed) == ("drop", 0.4, True)
    (upper,) = accuracy_gates(_record(confidence=0.9), max_drop=0.4)
    assert (upper.gate, upper.measured, upper.passed) == ("drop upper bound (90%)", 0.9, False)


def test_agreement_and_sqnr_gates_pass_at_their_bounds_in_that_order():
    drop, agreement, sqnr = accuracy_gates(
        _record(), max_drop=2.0, min_agreement=0.98, min_sqnr=21.5
    )
    assert drop.passed and drop.gate.startswith("drop")
    assert agreement == GateResult(
        artifact="tflite/int8 @ cpu x1",
        device="cpu",
        gate="top-1 agreement",
        measured=0.98,
        bound=0.98,
        passed=True,
    )
    assert sqnr == GateResult(
        artifact="tflite/int8 @ cpu x1",
        device="cpu",
        gate="SQNR (dB)",
        measured=21.5,
        bound=21.5,
        passed=True,
    )
    well_within = accuracy_gates(_record(), min_agreement=0.5, min_sqnr=10.0)
    assert [g.passed for g in well_within] == [True, True]
    failing = accuracy_gates(_record(), min_agreement=0.981, min_sqnr=21.6)
    assert [g.passed for g in failing] == [False, False]
    assert [g.gate for g in failing] == ["top-1 agreement", "SQNR (dB)"]


def test_no_bound_asked_gives_no_gate_even_without_a_baseline():
    assert accuracy_gates(_record()) == []
    assert accuracy_gates(_record(drop_points=None, drop_ci=None)) == []


@pytest.mark.parametrize("bound", [{"max_drop": 1.0}, {"min_agreement": 0.9}, {"min_sqnr": 10.0}])
def test_a_file_without_a_baseline_cannot_be_held_to_a_drop_agreement_or_sqnr(bound):
    record = _record(drop_points=None, drop_ci=None, agreement=None, sqnr_db=None)
    with pytest.raises(UserInputError) as error:
        accuracy_gates(record, **bound)
    assert str(error.value) == (
        "runs/r/digits-int8.tflite: no baseline to measure a drop, agreement or SQNR against (a "
        "file another tool made has no source model here); its top-1 on the labels is 93.50 %"
    )


def test_a_gate_result_flattens_its_figures_into_its_dict():
    gate = GateResult(
        artifact="a",
        device="cpu",
        gate="g",
        measured=1.0,
        bound=2.0,
        passed=True,
        detail="d",
        figures={"ratio": 1.1, "rounds": 8},
    )
    assert gate.to_dict() == {"artifact": "a", "device": "cpu", "gate": "g", "measured": 1.0,
                              "bound": 2.0, "passed": True, "detail": "d", "ratio": 1.1,
                              "rounds": 8}  # fmt: skip


VERSUS_HOST = {
    "max_abs_diff": 2e-5,
    "mean_abs_diff": 1e-6,
    "argmax_agreement": 0.9989,
    "outputs_differing": 3,
    "outputs": 8990,
}


def test_the_arm_gate_holds_the_largest_logit_difference_and_passes_at_its_bound():
    record = _record(device="arm64-emu", versus_host=VERSUS_HOST)
    gate = device_vs_host_gate(record, 2e-5)
    assert gate == GateResult(
        artifact="tflite/int8 @ cpu x1",
        device="arm64-emu",
        gate="ARM vs x86 max |diff|",
        measured=2e-5,
        bound=2e-5,
        passed=True,
        detail="argmax agreement 0.9989, 3/8990 outputs differ",
    )
    assert not device_vs_host_gate(record, 1.9e-5).passed
    assert device_vs_host_gate(record, 1e-3).passed


def test_the_arm_gate_on_a_device_that_does_not_compare_with_the_host_is_refused():
    with pytest.raises(UserInputError) as error:
        device_vs_host_gate(_record(), 1e-4)
    assert str(error.value) == (
        "tflite/int8 @ cpu x1: device cpu does not compare with the host "
        "(--max-arm-x86-diff needs --device arm64-emu)"
    )


def test_the_gate_table_lines_up_its_columns_and_lists_the_details_below():
    gates = [
        GateResult(
            artifact="tflite/int8",
            device="cpu",
            gate="drop",
            measured=0.4,
            bound=1.0,
            passed=True,
            detail="drop 0.40 [-0.10, 0.90]",
        ),
        GateResult(
            artifact="onnx/int8 @ gpu",
            device="gpu",
            gate="SQNR (dB)",
            measured=9.5,
            bound=12.0,
            passed=False,
        ),
    ]
    assert format_gates(gates) == "\n".join([
        "artifact         device  gate       measured  bound   result",
        "tflite/int8      cpu     drop       0.400     1.000   PASS  ",
        "onnx/int8 @ gpu  gpu     SQNR (dB)  9.500     12.000  FAIL  ",
        "  tflite/int8 drop: drop 0.40 [-0.10, 0.90]",
    ])  # fmt: skip


def test_a_runs_accuracy_gates_cover_its_artifact_rows_with_accuracy_labelled_as_the_rows():
    with_accuracy = measured_row("tflite", "int8", [0.3] * 3, 0.4, 0.9)
    with_accuracy.accuracy = _record(label="whatever the file said")
    without = measured_row("onnx", "int8", [0.3] * 3, 0.4, 0.9)
    without.accuracy = None
    baseline = measured_row("baseline", "fp32", [0.6] * 3, 0.0, 0.0, kind="baseline")
    baseline.accuracy = _record()
    results = Results(run={}, rows=[baseline, without, with_accuracy])
    (record,) = accuracy_records(results)
    assert record.label == with_accuracy.label and record.drop_ci == (-0.1, 0.9)
    (gate,) = run_accuracy_gates(results, max_drop=1.0)
    assert gate.artifact == with_accuracy.label and gate.passed
    assert gate.gate == "drop upper bound (95%)"  # by default, the upper bound is held
    with_accuracy.kind = read_back("artifact")  # as results.json gives it back
    assert [r.label for r in accuracy_records(results)] == [with_accuracy.label]
    gates = run_accuracy_gates(results, max_drop=0.5, min_agreement=0.99, min_sqnr=30.0,
                               point_estimate=True)  # fmt: skip
    assert [(g.gate, g.passed) for g in gates] == [
        ("drop", True),
        ("top-1 agreement", False),
        ("SQNR (dB)", False),
    ]


def _two_sides(reference: list[float], candidate: list[float]) -> Interleaved:
    """A latency gate's rounds, two per session: the reference, the candidate."""
    rounds = len(reference)
    return Interleaved(
        labels=["reference", "candidate"],
        block_runs=[10, 10],
        blocks=[[Block(None, ms, ms) for ms in side] for side in (reference, candidate)],
        rounds_used=list(range(rounds)),
        session_of_round=[r // 2 for r in range(rounds)],
    )


def test_the_latency_gate_decides_once_the_interval_is_on_one_side_of_the_bound():
    result = _two_sides([1.0, 1.02, 0.98, 1.0, 1.01, 0.99], [1.5, 1.5, 1.53, 1.5, 1.47, 1.5])
    _, (low, high) = result.ratio(1, 0)
    assert 1.2 < low < 1.5 < high < 2.0
    assert latency_decided(result, 1.2)  # slower beyond doubt
    assert latency_decided(result, high)  # within the bound beyond doubt
    assert latency_decided(result, 2.0)
    assert not latency_decided(result, 1.5)  # straddles the bound: measure on
    assert not latency_decided(result, low)
    assert not latency_decided(result, high * 0.999)


FINGERPRINT = {"id": "m1", "cpu_model": "AMD EPYC", "logical_cores": 2}


def _earlier(monkeypatch, rows):
    monkeypatch.setattr("edgekit.report.history.run_rows", lambda run, history=None: rows)


def test_recorded_p50s_are_compared_on_one_machine_and_pass_at_the_bound(monkeypatch, tmp_path):
    now = measured_row("onnx", "int8", [4.0] * 3, 0.1, 0.5, fingerprint=dict(FINGERPRINT))
    baseline = measured_row("baseline", "fp32", [2.0] * 3, 0.0, 0.0, kind="baseline")
    gone = measured_row("tflite", "int8", [1.0] * 3, 0.1, 0.5)
    _earlier(monkeypatch, {
        now.key: {"p50_ms": 3.0, "artifact_path": None, "fingerprint": dict(FINGERPRINT)},
        baseline.key: {"p50_ms": 1.0, "artifact_path": None, "fingerprint": dict(FINGERPRINT)},
    })  # fmt: skip
    results = Results(run={}, rows=[baseline, now, gone])
    (gate,) = run_latency_gates(results, tmp_path, "20261201-a", 33.34, remeasure=False)
    assert gate == GateResult(
        artifact=now.key,
        device="cpu",
        gate="p50 regression (%), recorded",
        measured=pytest.approx(100 / 3),
        bound=33.34,
        passed=True,
        detail="recorded p50 3.000 ms in 20261201-a -> 4.000 ms (two moments, not interleaved: no "
        "interval)",
    )
    (gate,) = run_latency_gates(results, tmp_path, "20261201-a", 33.33, remeasure=False)
    assert not gate.passed


def test_recorded_p50s_of_another_machine_are_refused_unless_labelled(monkeypatch, tmp_path):
    now = measured_row("onnx", "int8", [0.9] * 3, 0.1, 0.5, fingerprint=dict(FINGERPRINT))
    then = {**FINGERPRINT, "cpu_model": "Intel Xeon"}
    _earlier(monkeypatch, {now.key: {"p50_ms": 1.0, "artifact_path": None, "fingerprint": then}})
    results = Results(run={}, rows=[now])
    with pytest.raises(UserInputError, match=r"onnx/int8@cpux1 ran on different machines"):
        run_latency_gates(results, tmp_path, "20261201-a", 10.0, remeasure=False)
    (gate,) = run_latency_gates(results, tmp_path, "20261201-a", 10.0, across_machines=True,
                                remeasure=False)  # fmt: skip
    assert gate.measured == pytest.approx(-10.0) and gate.passed
    assert gate.detail.endswith("; ACROSS MACHINES: cpu_model differ")


def test_rows_without_a_p50_now_or_then_are_not_gated(monkeypatch, tmp_path):
    unmeasured = measured_row("onnx", "int8", [0.9] * 3, 0.1, 0.5)
    unmeasured.latency = {}
    never_timed = measured_row("tflite", "int8", [0.9] * 3, 0.1, 0.5)
    _earlier(monkeypatch, {
        unmeasured.key: {"p50_ms": 1.0, "artifact_path": None, "fingerprint": None},
        never_timed.key: {"p50_ms": None, "artifact_path": None, "fingerprint": None},
    })  # fmt: skip
    results = Results(run={}, rows=[unmeasured, never_timed])
    assert run_latency_gates(results, tmp_path, "20261201-a", 10.0, remeasure=False) == []


def test_host_rows_whose_files_both_exist_are_measured_again_now(monkeypatch, tmp_path):
    now = measured_row("onnx", "int8", [1.25] * 3, 0.1, 0.5, artifact="now.onnx", threads=None,
                       fingerprint=dict(FINGERPRINT))  # fmt: skip
    # "host" as results.json gives it back: an equal string, not the literal's object
    now.traits = {"latency_comparable": True, "where": read_back("host")}
    (tmp_path / "now.onnx").write_bytes(b"onnx")
    (tmp_path / "then.onnx").write_bytes(b"onnx")
    then = {"p50_ms": 1.0, "artifact_path": str(tmp_path / "then.onnx"),
            "fingerprint": dict(FINGERPRINT)}  # fmt: skip
    _earlier(monkeypatch, {now.key: then})
    calls = []

    def interleaved_again(candidate, reference, max_regression_pct, **options):
        calls.append((candidate, reference, max_regression_pct, options))
        return GateResult(
            artifact=str(candidate),
            device="cpu",
            gate="latency ratio, 95% lower bound",
            measured=1.02,
            bound=1.1,
            passed=True,
            detail="interleaved",
            figures={"rounds": 20},
        )

    monkeypatch.setattr("edgekit.measure.gates.latency_regression", interleaved_again)
    results = Results(run={}, rows=[now])
    (gate,) = run_latency_gates(results, tmp_path, "20261201-a", 10.0)
    assert calls == [(tmp_path / "now.onnx", tmp_path / "then.onnx", 10.0,
                      {"device": "cpu", "threads": 1, "protocol": None})]  # fmt: skip
    assert gate == GateResult(
        artifact=now.key,
        device="cpu",
        gate="latency ratio, 95% lower bound",
        measured=1.02,
        bound=1.1,
        passed=True,
        detail="interleaved",
        figures={"rounds": 20},
    )
    # not asked to measure again, or a file gone, or a device that is not the host: recorded
    assert run_latency_gates(results, tmp_path, "20261201-a", 25.0, remeasure=False)[0].passed
    (tmp_path / "then.onnx").unlink()
    assert run_latency_gates(results, tmp_path, "20261201-a", 25.0)[0].gate.endswith("recorded")
    (tmp_path / "then.onnx").write_bytes(b"onnx")
    (tmp_path / "now.onnx").unlink()
    assert run_latency_gates(results, tmp_path, "20261201-a", 25.0)[0].gate.endswith("recorded")
    (tmp_path / "now.onnx").write_bytes(b"onnx")
    now.traits = {"latency_comparable": True, "where": "server"}
    assert run_latency_gates(results, tmp_path, "20261201-a", 25.0)[0].gate.endswith("recorded")
    now.traits = {"latency_comparable": False, "where": "host"}
    assert run_latency_gates(results, tmp_path, "20261201-a", 25.0)[0].gate.endswith("recorded")
    assert len(calls) == 1


def test_every_host_row_whose_files_exist_is_measured_again(monkeypatch, tmp_path):
    rows = [measured_row(target, "int8", [1.0] * 3, 0.1, 0.5, artifact=f"{target}.file",
                         kind=read_back("artifact"), fingerprint=dict(FINGERPRINT))
            for target in ("onnx", "tflite")]  # fmt: skip
    then = {}
    for row in rows:
        (tmp_path / row.artifact).write_bytes(b"file")
        (tmp_path / f"then-{row.artifact}").write_bytes(b"file")
        then[row.key] = {"p50_ms": 1.0, "artifact_path": str(tmp_path / f"then-{row.artifact}"),
                         "fingerprint": dict(FINGERPRINT)}  # fmt: skip
    _earlier(monkeypatch, then)
    monkeypatch.setattr(
        "edgekit.measure.gates.latency_regression",
        lambda candidate, *args, **options: GateResult(
            artifact=str(candidate), device="cpu", gate="ratio", measured=1, bound=1, passed=True
        ),
    )
    gates = run_latency_gates(Results(run={}, rows=rows), tmp_path, "20261201-a", 10.0)
    assert [g.artifact for g in gates] == [row.key for row in rows]
