"""The machine's matmul peaks: the best of several kernels, cached per fingerprint and thread
count, raised by a faster row. Kernel rates are scripted (no test asserts how fast this machine
is); one test runs the real kernels and checks only the shape of what they return."""

from __future__ import annotations

import json
import threading
import time

import pytest

from edgekit.measure import peak
from edgekit.measure.peak import Kernel, MachinePeaks, arithmetic_of, measure_kernels, shares_of
from edgekit.results import Results, Row
from edgekit.targets import peak_kernels

BEST_SECONDS = peak_kernels.best_seconds  # the real one: the autouse fixture scripts its name
HOST = {"where": "host", "latency_comparable": True}


class Scripted:
    """A kernel call whose best time is given, not measured."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> None:
        pass


def kernel(op: str, arithmetic: str, rate: float) -> Kernel:
    """A kernel of 10^9 multiply-accumulates whose best rate is ``rate`` GFLOP/s."""
    return Kernel("scripted", op, arithmetic, 1000, lambda size, threads: Scripted(2.0 / rate))


def broken(size: int, threads: int) -> Scripted:
    raise RuntimeError("this runtime is not installed")


KERNELS = (
    kernel("small", "fp32", 100.0),
    kernel("large", "fp32", 150.0),
    kernel("other", "fp32", 120.0),
    kernel("f16", "fp16", 300.0),
    kernel("i8", "int8", 2000.0),
    Kernel("scripted", "missing", "int8", 1000, broken),
)


class Measure:
    """A ``measure`` for ``MachinePeaks.load`` that records the thread counts it is asked for."""

    def __init__(self, kernels: tuple[Kernel, ...] = KERNELS, delay_s: float = 0.0) -> None:
        self.kernels, self.delay_s = kernels, delay_s
        self.calls: list[list[int]] = []

    def __call__(self, threads: list[int]) -> dict:
        self.calls.append(list(threads))
        time.sleep(self.delay_s)
        return {str(t): measure_kernels(t, self.kernels) for t in threads}


@pytest.fixture(autouse=True)
def scripted(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(peak_kernels, "best_seconds", lambda call, budget_s: call.seconds)


def row(rate: float, kind: str = "fp32", threads: int = 1, target: str = "tflite") -> Row:
    made = Row("artifact", target, kind, "ok", device="cpu", threads=threads, model="digits")
    made.gflops, made.peak_kind, made.traits = rate, kind, dict(HOST)
    return made


def stored(peaks: MachinePeaks) -> dict:
    return json.loads(peaks.path.read_text())


# ---- the best of several kernels ---------------------------------------------------------------


def test_each_peak_is_the_best_kernel_of_its_arithmetic_and_a_broken_one_is_skipped():
    entry = measure_kernels(1, KERNELS)
    assert entry["peaks"]["fp32"] == {
        "rate": 150.0,
        "kernel": "scripted large 1000^3",
        "raised_by": None,
    }
    assert entry["peaks"]["fp16"]["rate"] == 300.0
    assert entry["peaks"]["int8"]["kernel"] == "scripted i8 1000^3"
    failed = entry["kernels"]["scripted missing 1000^3"]
    assert failed["rate"] is None and "not installed" in failed["error"]
    rates = sorted(k["rate"] for k in entry["kernels"].values() if k["rate"] is not None)
    assert rates == [100.0, 120.0, 150.0, 300.0, 2000.0]


def test_best_seconds_is_the_fastest_timed_call_not_the_warm_up():
    durations, now = iter([0.5, 3.0, 1.0, 2.0]), [0.0]

    def call() -> None:
        now[0] += next(durations)

    assert BEST_SECONDS(call, budget_s=0.0, min_calls=3, clock=lambda: now[0]) == 1.0


def test_an_arithmetic_no_kernel_ran_has_no_peak_and_its_rows_no_share():
    peaks = MachinePeaks.load([1], measure=Measure(KERNELS[:3]))
    assert peaks.peak(1, "fp16") is None and peaks.peak(1, "int8") is None
    fp16 = row(500.0, kind="fp16")
    peaks.place(fp16)
    assert fp16.peak_fraction is None  # not divided by the fp32 peak under another name
    assert peaks.figures() == {"1": {"fp32_gflops": 150.0}}


@pytest.mark.parametrize(
    ("recipe", "audit", "expected"),
    [
        ("int8", {"compute": {"int8": {"mac_share": 0.9}}}, "int8"),
        ("int8-dynamic", {"compute": {"int8": {"mac_share": 0.1}}}, "fp32"),  # onnx: convs fp32
        ("fp16", {"compute": {"fp16": {"mac_share": 1.0}}}, "fp16"),  # ExecuTorch: F16
        ("fp16", {"compute": {"fp32": {"mac_share": 1.0}}}, "fp32"),  # LiteRT, onnx
        ("fp32", None, "fp32"),  # a file without an audit (a plugin target's)
    ],
)
def test_a_row_divides_by_the_peak_of_the_arithmetic_its_file_computes_in(recipe, audit, expected):
    assert arithmetic_of(recipe, *shares_of(audit)) == expected


# ---- cached per fingerprint and thread count ----------------------------------------------------


def test_a_second_load_uses_the_cache_and_measures_only_new_thread_counts():
    measure = Measure()
    first = MachinePeaks.load([1, 2], measure=measure)
    second = MachinePeaks.load([2, 1], measure=measure)
    assert measure.calls == [[1, 2]]
    assert second.figures() == first.figures()
    MachinePeaks.load([1, 4], measure=measure)
    assert measure.calls == [[1, 2], [4]]
    assert set(stored(first)["threads"]) == {"1", "2", "4"}


def test_two_commands_loading_at_once_measure_once():
    measure = Measure(delay_s=0.3)
    loaded: list[MachinePeaks] = []
    workers = [
        threading.Thread(target=lambda: loaded.append(MachinePeaks.load([1], measure=measure)))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert measure.calls == [[1]]
    assert loaded[0].figures() == loaded[1].figures()


def test_a_different_fingerprint_measures_anew(monkeypatch):
    measure = Measure()
    here = MachinePeaks.load([1], measure=measure)
    other = dict(here.machine, cpu_model="another CPU", id="0123456789ab")
    monkeypatch.setattr(peak, "peak_fingerprint", lambda: other)
    there = MachinePeaks.load([1], measure=measure)
    assert measure.calls == [[1], [1]]
    assert there.path != here.path and there.path.name == "0123456789ab.json"


def test_the_fingerprint_holds_the_timed_runtimes_versions():
    versions = peak.peak_fingerprint()["versions"]
    # every timed runtime is installed here, so each must be named: an upgrade of any of them
    # invalidates the cached peaks
    assert set(versions) == set(peak.peak_packages()) and all(versions.values())


@pytest.mark.parametrize(
    "damage",
    [
        "not json at all",
        '{"schema": 1, "fingerprint": {"id": "',  # cut short
        "[]",
        '{"schema": 99, "threads": {}}',
        "wrong fingerprint",
        "negative rate",
        "no fp32 peak",
    ],
)
def test_a_damaged_cache_file_is_remeasured_and_rewritten(damage):
    measure = Measure()
    peaks = MachinePeaks.load([1], measure=measure)
    payload = stored(peaks)
    if damage == "wrong fingerprint":
        payload["fingerprint"]["id"] = "ffffffffffff"
    elif damage == "negative rate":
        payload["threads"]["1"]["peaks"]["fp32"]["rate"] = -1.0
    elif damage == "no fp32 peak":
        del payload["threads"]["1"]["peaks"]["fp32"]
    text = damage if damage.startswith(("not", "{", "[")) else json.dumps(payload)
    peaks.path.write_text(text)
    again = MachinePeaks.load([1], measure=measure)
    assert measure.calls == [[1], [1]]
    assert again.peak(1, "fp32") == 150.0
    assert stored(again)["threads"]["1"]["peaks"]["fp32"]["rate"] == 150.0


def test_a_failed_measurement_is_used_but_never_cached():
    def failing(threads: list[int]) -> dict:
        return {str(t): {"peaks": {}, "kernels": {}, "error": "it crashed"} for t in threads}

    peaks = MachinePeaks.load([1], measure=failing)
    assert peaks.peak(1, "fp32") is None and peaks.figures() == {"1": {}}
    measure = Measure()
    MachinePeaks.load([1], measure=measure)
    assert measure.calls == [[1]]


# ---- a row above the peak raises it -------------------------------------------------------------


def test_a_row_above_the_peak_raises_it_to_exactly_100_percent_and_the_cache_keeps_it():
    peaks = MachinePeaks.load([1], measure=Measure())
    slower, faster = row(75.0, target="onnx"), row(300.0)
    peaks.place(slower)
    assert slower.peak_fraction == 0.5
    peaks.place(faster)
    assert faster.peak_fraction == 1.0
    assert slower.peak_fraction == 0.25  # every row of the run divides by the same peak
    cached = stored(peaks)["threads"]["1"]["peaks"]["fp32"]
    assert cached["rate"] == 300.0 and cached["raised_by"] == faster.key
    assert cached["raised_from"] == 150.0 and cached["kernel"] == "tflite/fp32 row (digits)"
    measure = Measure()
    assert MachinePeaks.load([1], measure=measure).peak(1, "fp32") == 300.0
    assert measure.calls == []


def test_a_raise_keeps_a_higher_peak_another_command_stored_meanwhile():
    mine = MachinePeaks.load([1], measure=Measure())
    theirs = MachinePeaks.load([1], measure=Measure())
    theirs.place(row(500.0, target="executorch"))
    raised = row(200.0)
    mine.place(raised)
    assert mine.peak(1, "fp32") == 500.0 and raised.peak_fraction == 200.0 / 500.0


def test_a_row_of_another_machine_neither_gets_a_share_nor_raises():
    peaks = MachinePeaks.load([1], measure=Measure())
    remote = row(900.0)
    remote.fingerprint = dict(peaks.machine, cpu_model="another CPU", threads=1)
    peaks.place(remote)
    assert remote.peak_fraction is None and peaks.peak(1, "fp32") == 150.0
    local = row(75.0)
    local.fingerprint = dict(peaks.machine, threads=1, versions={"torch": "2.13.0"})
    peaks.place(local)
    assert local.peak_fraction == 0.5


def test_a_run_row_above_the_peak_reads_100_percent_and_the_report_names_what_raised_it():
    from edgekit.report.tables import COLUMNS, machine_line, table_rows
    from edgekit.run.matrix import _derive

    peaks = MachinePeaks.load([1], measure=Measure())
    fast, slow = row(0.0), row(0.0, target="onnx")
    fast.latency, slow.latency = {"p50_ms": 1.0}, {"p50_ms": 4.0}
    for made in (slow, fast):
        _derive(made, peaks, macs=100_000_000)  # 200 and 50 GFLOP/s against a 150 peak
    run = {"peaks": peaks.figures(), "peak_kernels": peaks.kernels()}
    column = COLUMNS.index("GFLOP/s (% of peak)")
    cells = [cells[column] for cells in table_rows(Results(run, [slow, fast]))]
    assert cells == ["50.0 (25 % of fp32)", "200.0 (100 % of fp32, raised the peak)"]
    line = machine_line(run)
    assert "fp32 200 GFLOP/s (peak raised by tflite/fp32 row (digits): 200 GFLOP/s from 150" in line
    assert "int8 2000 GOP/s (scripted i8 1000^3)" in line


def test_no_share_prints_above_100_percent_even_from_an_older_results_file():
    from edgekit.report.tables import COLUMNS, table_rows

    old = row(300.0)
    old.peak_fraction = 1.71  # written before peaks were raised
    cell = table_rows(Results({"peaks": {"1": {"fp32_gflops": 175.0}}}, [old]))[0]
    assert cell[COLUMNS.index("GFLOP/s (% of peak)")] == "300.0 (100 % of fp32)"


# ---- the real kernels ---------------------------------------------------------------------------


def test_the_real_kernels_run_in_a_child_and_each_peak_is_their_best(monkeypatch):
    monkeypatch.delenv("EDGEKIT_CACHE")  # the session's cache: its exported fp16 program
    entry = peak.measure_in_child([1])["1"]
    assert set(entry["kernels"]) == {k.name for k in peak.all_kernels()}, entry.get("error")
    for arithmetic, found in entry["peaks"].items():
        ran = [k["rate"] for k in entry["kernels"].values() if k["arithmetic"] == arithmetic]
        assert found["rate"] == max(r for r in ran if r is not None) > 0
        assert entry["kernels"][found["kernel"]]["rate"] == found["rate"]
    assert {"fp32", "int8"} <= set(entry["peaks"])
