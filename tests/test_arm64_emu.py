"""The emulated ARM64 device: artifacts on the real aarch64 kernels under QEMU, against x86.

Tests marked ``arm64`` need the device (``edgekit device setup arm64-emu``, ~300 MB) and skip
without it; the others (QEMU version refusal, bad mirrors, unsupported files, crashes, staging)
run everywhere. Emulation is CPU-heavy, so the device tests evaluate 100 samples."""

from __future__ import annotations

import json
import shutil
import stat

import numpy as np
import pytest
from cli_helpers import run_cli
from scripted_sides import NO_GUARD  # these tests are about failures, not a quiet machine

from edgekit.artifacts.artifact import load_artifact
from edgekit.common.metrics import device_vs_host
from edgekit.devices import get_device
from edgekit.devices.arm64_emu.emulator import (
    LATENCY_LABEL,
    PTE_REASON,
    check_qemu_version,
    choose_cpu,
    device_ready,
    load_device,
    parse_cpu_models,
    parse_qemu_version,
)
from edgekit.devices.arm64_emu.setup import setup_device
from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError
from edgekit.measure.accuracy import evaluate_artifact
from edgekit.measure.bench import bench_artifact
from edgekit.measure.gates import device_vs_host_gate
from edgekit.worker.latency import LatencyProtocol

SAMPLES = 100
QEMU_10 = "qemu-aarch64 version 10.0.2 (Debian 1:10.0.2+ds-1~bpo12+1)\nCopyright (c) 2003-2025"
QEMU_72 = "qemu-aarch64 version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u16)\nCopyright (c) 2003-2022"
CPU_HELP = "Available CPUs:\n  a64fx\n  cortex-a53\n  cortex-a76\n  max\n  neoverse-n1\n"


needs_device = pytest.mark.skipif(
    not device_ready(),
    reason="arm64-emu is not set up (run 'edgekit device setup arm64-emu', ~1.5 min, ~300 MB)",
)


# --- without the device ---------------------------------------------------------------------


def test_qemu_version_is_parsed_and_old_qemu_refused():
    assert parse_qemu_version(QEMU_10) == (10, 0, 2)
    check_qemu_version(parse_qemu_version(QEMU_10))  # accepted
    with pytest.raises(DeviceUnavailable) as caught:
        check_qemu_version(parse_qemu_version(QEMU_72), "/usr/bin/qemu-aarch64-static")
    message = str(caught.value)
    assert "QEMU 7.2.19" in message and ">= 10" in message and "/proc/cpuinfo" in message
    assert "\n" not in message
    with pytest.raises(DeviceUnavailable, match="cannot read a QEMU version"):
        parse_qemu_version("something else")


def test_cpu_model_choice():
    models = parse_cpu_models(CPU_HELP)
    assert models == ["a64fx", "cortex-a53", "cortex-a76", "max", "neoverse-n1"]
    assert choose_cpu(None, models) == "cortex-a76"  # phone-like by default
    assert choose_cpu(None, ["cortex-a53", "neoverse-n1"]) == "neoverse-n1"
    assert choose_cpu("cortex-a53", models) == "cortex-a53"
    with pytest.raises(UserInputError, match="no CPU model 'cortex-x4'"):
        choose_cpu("cortex-x4", models)


def _fake_device(tmp_path, monkeypatch, version: str, facts: dict | None = None) -> None:
    """A device directory whose qemu-aarch64 is a script: it reports ``version`` and kills
    itself with SIGSEGV when asked to run anything, like an emulated runtime that crashes."""
    monkeypatch.setenv("EDGEKIT_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "arm64-emu"
    root.mkdir(parents=True)
    (root / "device.json").write_text(json.dumps(facts or {"default_cpu": "cortex-a76"}))
    for stamp in (".done-sysroot-bookworm", ".done-site-bookworm"):
        (root / stamp).write_text("")
    qemu = tmp_path / "qemu-aarch64"
    qemu.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --version) echo "{version}";; '
        f"-cpu) printf '{CPU_HELP.replace(chr(10), chr(92) + 'n')}';; "
        "*) kill -SEGV $$;; esac\n"
    )
    qemu.chmod(qemu.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDGEKIT_QEMU_AARCH64", str(qemu))


def test_not_set_up_and_missing_qemu(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("EDGEKIT_QEMU_AARCH64", raising=False)
    with pytest.raises(DeviceUnavailable, match=r"not set up .*edgekit device setup arm64-emu"):
        load_device()
    (tmp_path / "arm64-emu").mkdir()
    (tmp_path / "arm64-emu" / "device.json").write_text("{}")
    with pytest.raises(DeviceUnavailable, match=r"userland .* is incomplete"):
        load_device()  # an interrupted setup
    for stamp in (".done-sysroot-bookworm", ".done-site-bookworm"):
        (tmp_path / "arm64-emu" / stamp).write_text("")
    with pytest.raises(DeviceUnavailable, match=r"QEMU not found at .*qemu-aarch64"):
        load_device()


def test_old_qemu_is_refused_at_run_time(tmp_path, monkeypatch):
    _fake_device(tmp_path, monkeypatch, "qemu-aarch64 version 7.2.19 (Debian 1:7.2+dfsg-7)")
    with pytest.raises(DeviceUnavailable, match=r"QEMU 7\.2\.19; edgekit needs QEMU >= 10"):
        load_device()


QUICK = LatencyProtocol(
    warmup=2, min_runs=10, min_seconds=0.1, max_seconds=10, rounds=3, sessions=1, precision=None
)


def test_a_pte_without_the_executorch_userland_is_unavailable(tmp_path, monkeypatch, export_digits):
    _fake_device(tmp_path, monkeypatch, QEMU_10)
    artifact = export_digits("executorch", "fp32")
    record = bench_artifact(artifact, device="arm64-emu", threads=1, protocol=QUICK, guard=NO_GUARD)
    assert record.status == "unavailable" and record.device == "arm64-emu"
    assert record.error == PTE_REASON
    with pytest.raises(DeviceUnavailable, match="without its optional ExecuTorch userland"):
        evaluate_artifact(str(artifact.path), device="arm64-emu", limit=2)


def test_crashing_emulated_process_is_a_failed_row(tmp_path, monkeypatch, export_digits):
    _fake_device(tmp_path, monkeypatch, QEMU_10)
    artifact = export_digits("tflite", "int8")
    record = bench_artifact(artifact, device="arm64-emu", threads=1, protocol=QUICK, guard=NO_GUARD)
    assert record.status == "failed"
    assert "crashed (SIGSEGV)" in record.error
    with pytest.raises(EdgekitError, match=r"crashed \(SIGSEGV\)"):
        get_device("arm64-emu").predict(artifact, np.zeros((2, 1, 32, 32), np.float32))


@pytest.mark.arm64  # the device's setup needs a Debian host, as CI is
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs a Debian host (apt-get)")
def test_setup_without_archive_access_fails_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEKIT_CACHE", str(tmp_path))
    monkeypatch.setenv("EDGEKIT_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # nothing listens
    lines = []
    with pytest.raises(DeviceUnavailable) as caught:
        setup_device(progress=lines.append)
    message = str(caught.value)
    assert "apt-get update" in message and "127.0.0.1:9" in message and "\n" not in message
    assert lines and lines[0].startswith("qemu: apt-get update")  # progress was reported
    assert not (tmp_path / "arm64-emu" / "device.json").exists()


@pytest.mark.parametrize(
    ("target", "recipe", "io"),
    [("tflite", "int8", "float32"), ("tflite", "int8", "int8"), ("onnx", "fp32", "float32")],
)
def test_the_guest_stages_exactly_as_the_host_sessions(
    export_digits, digits_data, target, recipe, io
):
    """The guest's tree of the installed session modules, run by the host's Python, gives the
    host worker's outputs bit for bit, integer I/O (-io8) included: one staging code."""
    artifact = export_digits(target, recipe, io)
    x = digits_data.evaluation.x[:20]
    guest, info = get_device("arm64-emu").predict(artifact, x, emulated=False)
    host, _ = get_device("cpu").predict(artifact, x)
    assert info["cpu_model"] == "host" and info["emulated"] is False
    np.testing.assert_array_equal(guest, host)


def test_device_against_host_figures_and_gate_catch_a_difference():
    rng = np.random.default_rng(0)
    x86 = rng.standard_normal((50, 10)).astype(np.float32)
    same = device_vs_host(x86.copy(), x86)
    assert same["max_abs_diff"] == 0.0 and same["argmax_agreement"] == 1.0
    arm = x86.copy()
    arm[3, x86[3].argmin()] += 100.0  # flips one prediction
    figures = device_vs_host(arm, x86)
    assert figures["max_abs_diff"] == pytest.approx(100.0)
    assert figures["argmax_agreement"] == pytest.approx(49 / 50)
    assert figures["outputs_differing"] == 1


# --- on the emulated device -----------------------------------------------------------------


def _output_step(artifact) -> float:
    """One quantization step of an onnx QDQ model's output: the scale of the DequantizeLinear
    that produces the graph output."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(artifact.path)).graph
    scales = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    node = producer[graph.output[0].name]
    while node.op_type != "DequantizeLinear":
        node = producer[node.input[0]]
    return float(scales[node.input[1]])


def _grid_step(artifact) -> float:
    """One output quantization step of an int8 file with float outputs, read off its host
    outputs: dequantized values lie on a grid of that step, and 100 images x 10 classes land on
    neighbouring points."""
    from edgekit.sources.data import load_dataset
    from edgekit.sources.zoo import ZOO

    x = load_dataset("digits", ZOO["digits-mobilenet"].preprocess).evaluation.x[:SAMPLES]
    logits, _ = get_device("cpu").predict(artifact, x)
    gaps = np.diff(np.unique(np.asarray(logits, dtype=np.float64)))
    return float(gaps[gaps > 1e-6].min())


# ARM against x86, per kernel family, bounds meant to hold on any x86-64 CPU:
# - XNNPACK int8 (tflite, .pte) accumulates in int32 and requantizes with the same fp32 formula;
#   measured 0 on the two CPUs tried (an AMD EPYC and an Intel Xeon with AMX, both with AVX-512
#   VNNI); an AVX2-only host picks other microkernels and was not tried: one output step;
# - onnxruntime MLAS int8 picks other u8s8 kernels by ISA (AVX2 vpmaddubsw, AVX-VNNI, AMX): at
#   most one output quantization step (measured 0 on the EPYC, 1 step on 1 of 1000 outputs on
#   the Xeon);
# - fp32 sums in other orders on every kernel family: 1e-4 (measured 1e-6 to 4e-6).
@pytest.mark.arm64
@needs_device
@pytest.mark.parametrize(
    ("target", "recipe", "bound"),
    [
        ("tflite", "fp32", 1e-4),
        ("tflite", "int8", "one grid step"),
        ("onnx", "fp32", 1e-4),
        ("onnx", "int8", "one output step"),
    ],
)
def test_arm_kernels_match_x86(export_digits, target, recipe, bound):
    artifact = export_digits(target, recipe)
    if bound == "one output step":
        bound = _output_step(artifact) * 1.001
    elif bound == "one grid step":
        bound = _grid_step(artifact) * 1.001
    record = evaluate_artifact(str(artifact.path), device="arm64-emu", limit=SAMPLES)
    figures = record.versus_host
    assert record.device == "arm64-emu" and record.samples == SAMPLES
    assert record.runtime["cpu_model"] == "cortex-a76" and record.runtime["machine"] == "aarch64"
    assert figures["max_abs_diff"] <= bound, figures
    assert figures["argmax_agreement"] >= 0.99
    assert record.top1 >= record.baseline_top1 - 0.02  # accuracy on ARM, against the baseline
    assert device_vs_host_gate(record, bound).passed
    assert record.to_dict()["versus_host"]["reference"].startswith("host x86")


@pytest.mark.arm64
@needs_device
def test_builtin_int8_kernels_differ_between_arm_and_x86(export_digits):
    """Without XNNPACK, LiteRT's builtin int8 kernels round differently on aarch64: measured
    up to 4 output quantization steps (0.30) on most outputs, predictions nearly all equal.
    Phones run this path when XNNPACK is off; the emulated device is what catches it."""
    artifact = export_digits("tflite", "int8")
    builtin = get_device("arm64-emu", xnnpack=False)  # a device's options are the device's
    record = evaluate_artifact(str(artifact.path), device=builtin, limit=SAMPLES)
    figures = record.versus_host
    assert record.label.endswith("-builtin") and record.runtime["kernels"] == "builtin"
    # Bounds by the kernels' definition, not this CPU's bit pattern: both sides dequantize int8
    # outputs with one scale, so they differ by a whole number of output steps (the point: not
    # zero); the builtin kernels round each requantization differently, never by a wrong
    # result, so the gap stays a few steps, far below the int8 output's own range of 255 steps.
    step = _grid_step(artifact)
    steps = figures["max_abs_diff"] / step
    assert steps >= 1 - 1e-3 and abs(steps - round(steps)) < 1e-3, (steps, figures)
    assert round(steps) <= 16, (steps, figures)
    assert not device_vs_host_gate(record, 1e-6).passed
    assert device_vs_host_gate(record, 16 * step * 1.001).passed


@pytest.mark.arm64
@needs_device
def test_a_perturbed_reference_is_caught(export_digits, digits_data):
    artifact = export_digits("tflite", "int8")
    x = digits_data.evaluation.x[:SAMPLES]
    x86, _ = get_device("arm64-emu").host_reference(load_artifact(artifact.path), x)
    perturbed = x86.copy()
    perturbed[7, 2] += 0.05  # less than one int8 output step
    record = evaluate_artifact(
        str(artifact.path), device="arm64-emu", limit=SAMPLES, host_logits=perturbed
    )
    assert record.versus_host["max_abs_diff"] == pytest.approx(0.05, abs=1e-6)
    assert record.versus_host["outputs_differing"] == 1
    gate = device_vs_host_gate(record, 1e-6)
    assert not gate.passed and "1/1000 outputs differ" in gate.detail


@pytest.mark.arm64
@needs_device
def test_emulated_latency_is_labelled_and_a_crash_does_not_stop_the_rest(
    export_digits, monkeypatch, capsys
):
    artifact = export_digits("tflite", "int8")
    monkeypatch.setenv("EDGEKIT_TEST_CRASH", "segfault")
    crashed = bench_artifact(
        artifact, device="arm64-emu", threads=1, protocol=QUICK, guard=NO_GUARD
    )
    assert crashed.status == "failed" and "crashed (SIGSEGV)" in crashed.error
    monkeypatch.delenv("EDGEKIT_TEST_CRASH")
    result = run_cli(
        capsys,
        "bench",
        str(artifact.path),
        "--device",
        "arm64-emu",
        "--cpu",
        "cortex-a53",
        "--rounds",
        "4",
        "--sessions",
        "2",
        "--min-seconds",
        "0.1",
        "--no-noise-guard",  # what is tested is the label and the guest's figures, not a latency
        "--json",
    )
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)  # no baseline beside an emulated device
    assert sorted(set(record["round_sessions"])) == [0, 1]  # a second emulated process
    assert record["device"] == "arm64-emu" and record["stats"]["count"] >= 10
    assert record["traits"]["latency_comparable"] is False and record["speedup"] is None
    assert record["traits"]["note"] == LATENCY_LABEL and record["runtime"]["emulated"] is True
    runtime = record["runtime"]
    assert runtime["cpu_model"] == "cortex-a53" and runtime["cpu_part"] == "0xd03"
    assert runtime["machine"] == "aarch64"
    # the guest tells its memory too, in the same parts, and says whose process it measured
    memory = record["memory"]
    assert memory["status"] == "ok" and memory["floor_mb"] > 10 and memory["model_mb"] > 0
    assert memory["model_mb"] == pytest.approx(
        memory["file_mb"] + (memory["planned_mb"] or 0) + memory["residual_mb"]
    )
    assert any("QEMU's user-mode process" in note for note in memory["notes"])


@pytest.mark.arm64
@needs_device
@pytest.mark.parametrize("recipe", ["fp32", "int8"])
def test_pte_on_arm(export_digits, recipe):
    if not load_device().facts.get("pte"):
        pytest.skip("arm64-emu was set up without --with-pte")
    path = export_digits("executorch", recipe).path
    record = evaluate_artifact(str(path), device="arm64-emu", limit=SAMPLES)
    # XNNPACK int8: one output step (0 where tried, see above); fp32: other summation orders
    bound = _grid_step(load_artifact(path)) * 1.001 if recipe == "int8" else 1e-4
    assert record.versus_host["max_abs_diff"] <= bound
    assert record.versus_host["argmax_agreement"] == 1.0
    assert "ExecuTorch 1.3.1 runtime" in record.runtime["runtime"]
