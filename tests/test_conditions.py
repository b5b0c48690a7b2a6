"""The conditions of every block: frequency, temperature and throttle flags read from sysfs trees
laid out as a Raspberry Pi 5's and a Jetson Orin's (tests/data/sysfs, sources in its README),
traces made by editing a copy of one between the before and after snapshots, and this machine,
which may have none of them. Nothing here measures how fast or quiet the machine is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scripted_sides import NO_GUARD

from edgekit.measure.bench import measure_interleaved
from edgekit.report.tables import conditions_text, table_rows
from edgekit.results import Results
from edgekit.worker.conditions import (
    block_conditions,
    decode_throttled,
    judge,
    read_conditions,
    summarize,
)
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol, LatencyRecord

TREES = Path(__file__).parent / "data" / "sysfs"
PI5, ORIN = TREES / "rpi5", TREES / "jetson-orin"
PI_POLICY = "sys/devices/system/cpu/cpufreq/policy0"
PI_ZONE = "sys/devices/virtual/thermal/thermal_zone0"
PI_FIRMWARE = "sys/devices/platform/soc@107c000000/soc@107c000000:firmware/get_throttled"
ORIN_CPU_ZONE = "sys/devices/virtual/thermal/thermal_zone0"
NOT_READABLE = "conditions: not readable on this machine (no cpufreq, no thermal zones)"


def edited(tree: Path, folder: Path, files: dict[str, str]) -> str:
    """A copy of ``tree`` with ``files`` (paths under it) rewritten: the state after a block,
    as the kernel would show it."""
    copy = folder / tree.name
    shutil.copytree(tree, copy, symlinks=True)  # cpuN/cpufreq stay links to their policy
    for name, text in files.items():
        (copy / name).write_text(text + "\n")
    return str(copy)


def test_a_raspberry_pi_5_reads_its_cores_its_zone_and_its_firmware_word():
    snapshot = read_conditions(str(PI5))
    assert snapshot["readable"] and "note" not in snapshot
    assert snapshot["cpus"] == {
        "cpu0-3": {"cur_khz": 2400000, "cap_khz": 2400000, "max_khz": 2400000,
                   "governor": "ondemand"},
    }  # fmt: skip
    zone = snapshot["zones"]["cpu-thermal"]
    assert zone["temp_c"] == pytest.approx(54.85)  # millidegrees in the file
    assert zone["trips"] == [[50.0, "active"], [60.0, "active"], [67.5, "active"],
                             [75.0, "active"], [90.0, "critical"]]  # fmt: skip
    assert snapshot["firmware"] == {"raw": 0, "flags": []}
    assert read_conditions(str(PI5), cpus=[2])["cpus"].keys() == {"cpu0-3"}


def test_a_jetson_orin_reads_its_three_clusters_and_its_zones():
    snapshot = read_conditions(str(ORIN))
    assert list(snapshot["cpus"]) == ["cpu0-3", "cpu4-7", "cpu8-11"]
    assert {p["governor"] for p in snapshot["cpus"].values()} == {"schedutil"}
    assert set(snapshot["zones"]) == {
        "cpu-thermal", "gpu-thermal", "cv0-thermal", "cv1-thermal", "cv2-thermal",
        "soc0-thermal", "soc1-thermal", "soc2-thermal", "tj-thermal",
    }  # fmt: skip
    assert snapshot["zones"]["tj-thermal"]["trips"] == [[99.0, "passive"], [104.5, "critical"]]
    assert snapshot["firmware"] is None  # a Raspberry Pi's alone
    assert list(read_conditions(str(ORIN), cpus=[5])["cpus"]) == ["cpu4-7"]  # the cores in use


def test_a_zone_that_reads_empty_is_left_out(tmp_path):
    """A disabled zone (tj-thermal on some Orin modules) reads empty: the others still count."""
    empty = {"sys/class/thermal/thermal_zone8/temp": ""}  # through the class link
    snapshot = read_conditions(edited(ORIN, tmp_path, empty))
    assert "tj-thermal" not in snapshot["zones"] and "cpu-thermal" in snapshot["zones"]


def test_the_firmware_word_decodes_as_vcgencmd_documents_it():
    assert decode_throttled(0x50005) == [
        "under-voltage", "currently throttled", "under-voltage has occurred",
        "throttling has occurred",
    ]  # fmt: skip
    assert decode_throttled(0x80008) == [
        "soft temperature limit active", "soft temperature limit has occurred"
    ]  # fmt: skip
    assert decode_throttled(0) == []


def test_a_frequency_that_falls_during_a_block_is_throttled(tmp_path):
    before = read_conditions(str(PI5))
    after = read_conditions(edited(PI5, tmp_path, {f"{PI_POLICY}/scaling_cur_freq": "1500000"}))
    assert judge(before, after) == "frequency fell from 2400 to 1500 MHz on cpu0-3"
    block = block_conditions(before, after)
    assert block["throttled"] == judge(before, after) and block["mhz"] == [2400, 1500]
    assert block["governor"] == "ondemand" and block["zone"] == "cpu-thermal"
    assert judge(after, before) is None  # rising to the top is the governor at work


def test_a_lowered_frequency_cap_is_throttled(tmp_path):
    """Thermal cooling lowers a policy's limit; the reading may not have caught the fall yet."""
    before = read_conditions(str(ORIN))
    cap = "sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq"
    after = read_conditions(edited(ORIN, tmp_path, {cap: "1420800"}))
    assert judge(before, after) == "frequency cap fell from 2202 to 1421 MHz on cpu4-7"


def test_a_temperature_crossing_a_trip_point_that_slows_the_chip_is_throttled(tmp_path):
    before = read_conditions(str(ORIN))
    hot = read_conditions(edited(ORIN, tmp_path, {f"{ORIN_CPU_ZONE}/temp": "99500"}))
    assert judge(before, hot) == "cpu-thermal crossed its passive trip 99.0 °C (99.5 °C)"
    assert "at or above its passive trip" in judge(hot, hot)  # hot all along
    # a Pi 5's active trips start its fan and slow nothing; its critical one counts
    pi = read_conditions(str(PI5))
    warm = read_conditions(edited(PI5, tmp_path / "warm", {f"{PI_ZONE}/temp": "62000"}))
    assert judge(pi, warm) is None
    melt = read_conditions(edited(PI5, tmp_path / "melt", {f"{PI_ZONE}/temp": "90500"}))
    assert judge(pi, melt) == "cpu-thermal crossed its critical trip 90.0 °C (90.5 °C)"


def test_the_firmware_flags_mark_a_block_now_but_not_for_what_occurred_before_it(tmp_path):
    clean = read_conditions(str(PI5))
    now = read_conditions(edited(PI5, tmp_path / "now", {PI_FIRMWARE: "50005"}))
    assert judge(clean, now) == (
        "firmware throttle flags 0x50005: under-voltage, currently throttled, "
        "under-voltage has occurred, throttling has occurred"
    )
    earlier = read_conditions(edited(PI5, tmp_path / "earlier", {PI_FIRMWARE: "50000"}))
    assert judge(earlier, earlier) is None  # since boot, not during this block
    capped = read_conditions(edited(PI5, tmp_path / "capped", {PI_FIRMWARE: "70000"}))
    assert judge(earlier, capped) == (
        "firmware throttle flags 0x70000: arm frequency capping has occurred"
    )


def test_steady_conditions_are_not_throttled(tmp_path):
    for tree in (PI5, ORIN):
        snapshot = read_conditions(str(tree))
        assert judge(snapshot, snapshot) is None
    # a step of the governor (4 %) is not a throttle
    pi = read_conditions(str(PI5))
    step = read_conditions(edited(PI5, tmp_path, {f"{PI_POLICY}/scaling_cur_freq": "2300000"}))
    assert judge(pi, step) is None


def test_an_unset_threshold_of_zero_is_no_trip(tmp_path):
    """An Intel package zone's passive thresholds read 0 until set: never a throttle."""
    zone = tmp_path / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True)
    for name, text in {"type": "x86_pkg_temp", "temp": "45000", "trip_point_0_temp": "0",
                       "trip_point_0_type": "passive"}.items():  # fmt: skip
        (zone / name).write_text(text + "\n")
    snapshot = read_conditions(str(tmp_path))
    assert snapshot["zones"] == {"x86_pkg_temp": {"temp_c": 45.0, "trips": []}}
    assert judge(snapshot, snapshot) is None


def test_this_machine_reads_without_raising_whatever_it_has():
    """On this VM nothing is readable; another x86-64 machine may have cpufreq or zones: only
    the shape holds everywhere."""
    snapshot = read_conditions("/")
    assert isinstance(snapshot["readable"], bool)
    assert isinstance(snapshot["cpus"], dict) and isinstance(snapshot["zones"], dict)
    if not snapshot["readable"]:
        assert snapshot["note"].startswith("conditions: not readable on this machine")
    block = block_conditions(snapshot, read_conditions("/"))
    assert isinstance(block, dict) and isinstance(block["readable"], bool)
    reason = judge(snapshot, snapshot)
    assert reason is None or isinstance(reason, str)


def test_a_machine_with_nothing_to_read_says_so(tmp_path):
    snapshot = read_conditions(str(tmp_path))
    assert snapshot == {"cpus": {}, "zones": {}, "firmware": None, "readable": False,
                        "note": NOT_READABLE}  # fmt: skip
    block = block_conditions(snapshot, snapshot)
    assert block == {"readable": False, "note": NOT_READABLE}
    assert summarize([block, block]) == {"readable": False, "note": NOT_READABLE}
    assert summarize([None, None]) is None  # a runner that reads nothing (a phone's)


class Traced(BlockTimer):
    """A side whose blocks carry the conditions of a trace, one per block in turn."""

    def __init__(self, label: str, trace: list[dict]) -> None:
        self.label, self.warm_ms, self.runtime, self.trace = label, 1.0, {}, trace
        self.count = 0

    def block(self, runs: int) -> Block:
        conditions = self.trace[self.count % len(self.trace)]
        self.count += 1
        return Block.of([1.0] * runs, 0.0, 0.0, conditions=conditions)


PLAN = LatencyProtocol(warmup=0, min_runs=1, min_seconds=0.0, rounds=6, block_seconds=0.001,
                       sessions=1, precision=None)  # fmt: skip


def _pool(trace_a: list[dict], trace_b: list[dict]) -> list[LatencyRecord]:
    records = [LatencyRecord(label, "cpu", 1, "failed") for label in ("onnx/int8", "onnx/fp32")]
    timers: list[BlockTimer] = [Traced("onnx/int8", trace_a), Traced("onnx/fp32", trace_b)]
    measure_interleaved(timers, records, PLAN, NO_GUARD)
    return records


def test_a_record_with_a_throttled_block_is_marked_in_bench_output(tmp_path, capsys):
    from edgekit.cli import views

    pi = read_conditions(str(PI5))
    fallen = read_conditions(edited(PI5, tmp_path, {f"{PI_POLICY}/scaling_cur_freq": "1500000"}))
    steady, throttled = block_conditions(pi, pi), block_conditions(pi, fallen)
    # one block of the second side falls: the round is throttled, for both sides (as DISTURBED)
    records = _pool([steady], [steady, steady, throttled, steady, steady, steady])
    for record in records:
        assert record.status == "ok" and record.throttled and record.rounds_throttled == 1
        assert record.warnings[0].startswith(
            "THROTTLED: frequency fell from 2400 to 1500 MHz on cpu0-3 (in 1 of the 6 rounds"
        )
    assert records[1].conditions == {
        "readable": True, "mhz": {"min": 1500, "median": 2400, "max": 2400},
        "governors": ["ondemand"], "max_c": 54.9, "zone": "cpu-thermal", "throttled_blocks": 1,
    }  # fmt: skip
    assert records[0].conditions["throttled_blocks"] == 0
    views.latency(records)
    printed = capsys.readouterr().err
    assert "onnx/int8 (cpu, 1 thr): THROTTLED: frequency fell" in printed
    assert not any(r.throttled for r in _pool([steady], [steady]))


def test_a_pool_on_a_machine_with_nothing_readable_is_not_throttled_and_says_why(tmp_path):
    nothing = block_conditions(read_conditions(str(tmp_path)), read_conditions(str(tmp_path)))
    records = _pool([nothing], [nothing])
    assert not records[0].throttled and records[0].warnings == []
    assert records[0].conditions == {"readable": False, "note": NOT_READABLE}


def test_the_report_shows_throttled_and_each_sides_conditions_once_per_unreadable_device():
    from measured_rows import measured_row

    hot = measured_row("tflite", "int8", [1.0], 0.1, 0.4, throttled=True,
                       warnings=["THROTTLED: cpu-thermal ..."])  # fmt: skip
    hot.conditions = {"readable": True, "mhz": {"min": 1500, "median": 2400, "max": 2400},
                      "governors": ["ondemand"], "max_c": 91.0, "zone": "cpu-thermal",
                      "throttled_blocks": 2}  # fmt: skip
    vm = [measured_row("onnx", recipe, [1.0], 0.1, 0.4, device="vm") for recipe in ("int8", "fp32")]
    for row in vm:
        row.conditions = {"readable": False, "note": NOT_READABLE}
    notes = [cells[-1] for cells in table_rows(Results(run={}, rows=[hot, *vm]))]
    assert notes[0] == (
        "THROTTLED; 1500-2400 MHz (median 2400) ondemand, max 91.0 °C (cpu-thermal), "
        "2 blocks throttled"
    )
    assert notes[1] == NOT_READABLE and notes[2] == ""  # said once for the device
    assert conditions_text(None) == ""  # a row from before conditions were recorded
