"""What an artifact needs in memory, in parts that add up: ``edgekit bench`` prints the model's
own share beside the process peak, a session that keeps every output is caught as a leak, real
sessions over 10,000 invokes are not, and a device that cannot tell says so in one line."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli
from target_helpers import plugin_target_registered, registered_targets

from edgekit.measure.memory import LEAK_FLOOR_KB_PER_1K, leak_slope
from edgekit.worker.latency import LatencyRecord

# one session: the memory of one session's invokes is what is tested, not a latency
QUICK = ("--min-seconds", "0.2", "--rounds", "10", "--no-baseline", "--no-noise-guard",
         "--sessions", "1", "--precision", "off")  # fmt: skip


def _bench(capsys, *paths, json_out=True):
    result = run_cli(capsys, "bench", *map(str, paths), *QUICK, *(["--json"] if json_out else []))
    assert result.code == 0, result.err
    return json.loads(result.out) if json_out else result.out


def test_bench_prints_the_models_own_memory_beside_the_process_peak(capsys, export_digits):
    paths = [export_digits(target, "fp32").path for target in ("tflite", "executorch", "onnx")]
    records = _bench(capsys, *paths)
    for record in records:
        memory = record["memory"]
        assert memory["status"] == "ok", memory
        # the parts add up: the model's share is the file, the plan and a named residual
        parts = memory["file_mb"] + (memory["planned_mb"] or 0.0) + memory["residual_mb"]
        assert memory["model_mb"] == pytest.approx(parts)
        # the process's peak (imports, load, invokes) is at least the floor and the model's share
        assert memory["process_peak_mb"] >= memory["floor_mb"] + memory["model_mb"] - 1e-9
        assert memory["file_mb"] == pytest.approx(record["size_bytes"] / 2**20)
        assert 10 < memory["floor_mb"] < memory["process_peak_mb"] == record["peak_rss_mb"]
        assert memory["residual_is"] and memory["planned_source"]
        assert not memory["leak"] and len(memory["samples"]) >= 10
    planned = {r["target"]: r["memory"]["planned_mb"] for r in records}
    assert planned["executorch"] is not None  # read from the .pte's memory plan
    assert planned["onnx"] is None and planned["tflite"] is None  # their APIs do not tell
    text = _bench(capsys, paths[2], json_out=False)
    assert "model MB" in text and "memory (MB)" in text and "+ residual" in text
    assert "planned, onnx: onnxruntime 1.32's Python API does not report" in text


def test_executorchs_plan_recorded_at_export_is_the_one_the_file_carries(export_digits):
    from edgekit.targets import get_target

    artifact = export_digits("executorch", "int8")
    recorded = get_target("executorch").planned_memory(artifact.path, artifact.manifest.details)
    read = get_target("executorch").planned_memory(artifact.path)  # a file with no manifest
    assert recorded.bytes == read.bytes and recorded.bytes > 0
    assert "as exported" in recorded.source and "read from the file" in read.source


def test_a_session_that_keeps_every_output_is_caught_as_a_leak(capsys, export_digits,
                                                                monkeypatch):  # fmt: skip
    monkeypatch.setenv("EDGEKIT_TEST_LEAK", "1")  # the child keeps a copy of every input/output
    (record,) = _bench(capsys, export_digits("tflite", "fp32").path)
    memory = record["memory"]
    assert memory["leak"] and memory["leak_interval"][0] > memory["leak_floor"]
    assert any(w.startswith("memory grew ") and "a leak" in w for w in record["warnings"])


@pytest.mark.parametrize("target", registered_targets())  # the plugin's too
def test_a_real_session_over_10000_invokes_is_not_flagged(export_digits, target, monkeypatch):
    from edgekit.devices import get_device
    from edgekit.measure.memory import measure_memory

    with plugin_target_registered(monkeypatch):
        # the count ends it, not the clock: the cap only guards against a hang (torch.jit's
        # 10,000 invokes took 62 s on a 2-core AMD EPYC VM, the built-in targets' a few)
        memory = measure_memory(export_digits(target, "fp32"), get_device("cpu"), seconds=600.0,
                                invokes=10_000)  # fmt: skip
    assert memory.status == "ok" and memory.invokes >= 10_000, memory.error
    assert not memory.leak, (memory.leak_kb_per_1k, memory.leak_interval)
    assert memory.retained_mb is not None and memory.floor_mb > 10


def _steps(growth_per_sample_kb: float, count: int = 40, every: int = 250) -> list[list[int]]:
    return [[every * i, int(50_000 + growth_per_sample_kb * i)] for i in range(1, count + 1)]


def test_steady_growth_is_a_leak_and_a_flat_line_is_not():
    slope, (low, _) = leak_slope(_steps(8.0))  # 8 kB per 250 invokes: 32 kB per 1000
    assert slope == pytest.approx(32.0) and low > LEAK_FLOOR_KB_PER_1K
    assert leak_slope(_steps(0.0)) == (0.0, [0.0, 0.0])


def test_one_step_or_settling_at_the_start_is_not_a_leak():
    settling = [[250 * i, 50_000 + (36 if i > 3 else 12 * i)] for i in range(1, 41)]
    assert leak_slope(settling)[1][0] <= 0.0  # the first quarter is left out
    step = [[250 * i, 50_000 + (4 if i > 25 else 0)] for i in range(1, 41)]  # one page, once
    assert leak_slope(step)[1][0] <= LEAK_FLOOR_KB_PER_1K


def test_a_timing_session_needs_more_than_a_page_per_block_to_be_called_a_leak():
    from edgekit.measure.memory import leak_floor

    blocks = _steps(4.0, every=1000)  # a page per block of 1000 invokes: the harness settling
    assert leak_floor(blocks, timing_session=True) == pytest.approx(8.0)
    assert leak_floor(blocks, timing_session=False) == LEAK_FLOOR_KB_PER_1K  # a probe: no blocks
    assert leak_floor(_steps(4.0, every=100_000), timing_session=True) == LEAK_FLOOR_KB_PER_1K


def test_too_few_samples_give_no_verdict():
    assert leak_slope(_steps(100.0, count=5)) is None  # 4 left once the settling part is out
    assert leak_slope(_steps(100.0, count=6)) is not None


def test_a_device_that_cannot_tell_says_so_in_one_line(capsys):
    from edgekit.cli import views
    from edgekit.measure.bench import session_memory

    records = []
    for label in ("tflite/fp32", "onnx/fp32"):  # a plugin's board whose sessions send no figures
        record = LatencyRecord(label, "my-board", 1, "ok", artifact="m.tflite", target="tflite")
        record.memory = session_memory(record, None)
        records.append(record)
    views.memory(records)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines == ["memory: my-board cannot tell memory in this edgekit (the host CPU can)"]


def _check(capsys, *args):
    result = run_cli(capsys, "check", *map(str, args), "--json")
    assert result.code in (0, 1), result.err
    gates = {gate["gate"]: gate for gate in json.loads(result.out)["gates"]}
    return result.code, gates


def test_check_gates_the_models_own_memory_and_the_file_size(capsys, export_digits):
    path = export_digits("onnx", "fp32").path
    code, gates = _check(capsys, path, "--max-peak-mb", "500", "--max-size-kb", "10000")
    assert code == 0 and gates["model's peak MB"]["passed"] and gates["size KB"]["passed"]
    assert gates["model's peak MB"]["measured"] == pytest.approx(
        gates["model's peak MB"]["model_mb"]
    )
    code, gates = _check(capsys, path, "--max-peak-mb", "0.001", "--max-size-kb", "1")
    assert code == 1 and not gates["model's peak MB"]["passed"] and not gates["size KB"]["passed"]
    assert gates["size KB"]["measured"] == pytest.approx(path.stat().st_size / 1024)


def test_check_fails_a_leak_and_passes_a_real_session(capsys, export_digits, monkeypatch):
    path = export_digits("tflite", "fp32").path
    code, gates = _check(capsys, path, "--max-leak-kb-per-1k", str(LEAK_FLOOR_KB_PER_1K))
    assert code == 0 and gates["leak kB per 1k invokes"]["invokes"] >= 10_000
    monkeypatch.setenv("EDGEKIT_TEST_LEAK", "1")
    code, gates = _check(capsys, path, "--max-leak-kb-per-1k", str(LEAK_FLOOR_KB_PER_1K))
    assert code == 1 and gates["leak kB per 1k invokes"]["leak_interval"][0] > LEAK_FLOOR_KB_PER_1K


def test_check_compares_a_candidates_memory_with_a_reference(capsys, export_digits):
    candidate, reference = (
        export_digits("tflite", "int8").path,
        export_digits("tflite", "fp32").path,
    )
    code, gates = _check(
        capsys, candidate, "--against", reference, "--max-memory-regression", "1000"
    )
    gate = gates["memory regression %"]
    assert code == 0 and gate["passed"] and gate["reference_model_mb"] > 0
    code, gates = _check(capsys, candidate, "--against", reference, "--max-memory-regression", "0",
                         "--max-peak-mb", "500")  # fmt: skip
    changed = gates["memory regression %"]["measured"]
    assert (code == 1) == (changed > 0) and gates["model's peak MB"]["passed"]


@pytest.mark.parametrize("mode", ["always [madvise] never", "[always] madvise never"])
def test_the_probe_turns_huge_pages_off_only_where_the_machine_has_them_always(tmp_path, mode):
    import subprocess
    import sys

    (tmp_path / "enabled").write_text(mode + "\n")
    # in a process of its own: the setting stays with the process that asked
    script = (
        "import ctypes, edgekit.worker.memory as m\n"
        f"m.THP_MODE = {str(tmp_path / 'enabled')!r}\n"
        "note = m.hold_pages_small()\n"
        "print(ctypes.CDLL(None).prctl(42, 0, 0, 0, 0), note)\n"  # PR_GET_THP_DISABLE
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    turned_off, _, note = out.stdout.strip().partition(" ")
    if mode.startswith("[always]"):
        assert turned_off == "1" and "turned them off" in note
    else:
        assert turned_off == "0" and note == "None"
