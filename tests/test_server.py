"""Server rows (``server-cuda``, ``server-tensorrt``): onnxruntime's GPU execution providers on a
CUDA node. No GPU here: what runs is the path up to the provider, and a run that asks for them
says plainly why they are not available. benchmarks/gpu_check.sh measures them on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import plumbing_config, run_cli

from edgekit.common.machine import cuda_facts
from edgekit.devices import get_device
from edgekit.errors import DeviceUnavailable, UserInputError
from edgekit.results import Row
from edgekit.targets.session import Accelerator

# no timing mark: the run below tests plumbing (which rows, which reasons), with the noise guard
# off, so it runs beside other tests


@pytest.mark.skipif(
    bool(cuda_facts().get("available")), reason="a CUDA GPU is here: gpu_check.sh measures it"
)
def test_a_run_that_asks_for_server_rows_says_why_they_are_missing(capsys, tmp_path):
    result = run_cli(capsys, "run", "--config", str(plumbing_config(tmp_path)),
                     "--target", "onnx,tflite", "--recipe", "fp32", "--device",
                     "cpu,server-cuda,server-tensorrt", "--no-profile", "--rounds", "2",
                     "--min-runs", "5", "--min-seconds", "0.05", "--runs-dir", str(tmp_path),
                     "--history", str(tmp_path / "h.sqlite"), "--json")  # fmt: skip
    # the cpu rows ran; a device asked for that cannot run at all is exit 2, named in one line
    assert result.code == 2, result.err
    assert "device server-cuda was asked for and is not available here" in result.err
    run_dir = Path(json.loads(result.out)["run_dir"])
    rows = [Row.from_dict(r) for r in json.loads((run_dir / "results.json").read_text())["rows"]]
    server = [row for row in rows if row.device.startswith("server-")]
    assert {(row.target, row.device) for row in server} == {
        (target, device)
        for target in ("onnx", "tflite")
        for device in ("server-cuda", "server-tensorrt")
    }
    for row in server:
        assert row.status == "unavailable"
        if row.target == "tflite":
            assert "runs .onnx files only" in row.error
        else:
            assert "edgekit-bench[cuda]" in row.error or "no CUDA GPU" in row.error
    report = (run_dir / "report.md").read_text()
    assert "## Not available on this machine" in report and "server-tensorrt" in report


def test_server_rows_never_compete_with_on_device_rows():
    from edgekit.report.recommend import recommend

    traits = get_device("server-cuda").traits().to_dict()
    assert traits["where"] == "server" and "not an on-device figure" in traits["note"]
    latency = {"p50_ms": 0.01, "p90_ms": 0.01, "count": 9}
    accuracy = {"drop_points": 0.0, "drop_ci": [0.0, 0.0], "top1": 0.99}
    server = Row.from_dict(
        {
            **{"kind": "artifact", "target": "onnx", "recipe": "fp32", "device": "server-cuda"},
            **{"threads": 1, "status": "ok", "latency": latency, "accuracy": accuracy},
            "traits": traits,
        }
    )
    advice = recommend([server])
    assert advice.best is None
    assert advice.reasons == [(server.label, "a server row: compared with the baseline, never "
                                             "with on-device rows")]  # fmt: skip


def test_the_provider_option_picks_one_execution_provider(monkeypatch):
    import onnxruntime

    from edgekit.targets.onnx.session import providers

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [
        "TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])  # fmt: skip
    assert providers(Accelerator.GPU, "tensorrt") == [
        "TensorrtExecutionProvider",
        "CPUExecutionProvider",
    ]
    assert providers(Accelerator.GPU, "cuda")[0] == "CUDAExecutionProvider"
    with pytest.raises(UserInputError, match="choose from cuda, tensorrt"):
        providers(Accelerator.GPU, "rocm")
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(DeviceUnavailable, match=r"pip install 'edgekit-bench\[cuda\]'"):
        providers(Accelerator.GPU, "tensorrt")
