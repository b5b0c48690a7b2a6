"""``edgekit run`` end to end on the default model, as a user calls it and as Python calls it,
and a fourth target added from outside edgekit running through it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_helpers import QUICK_RUN, plumbing_config, run_cli, run_edgekit
from measured_rows import RECORDED

# plumbing, not figures: every run here leaves the noise guard off (plumbing_config), so the
# file runs beside other tests

PLUGINS = Path(__file__).parent / "plugins"


def _run(capsys, tmp_path, *args):
    if "--config" not in args:
        args = ("--config", str(plumbing_config(tmp_path)), *args)
    return run_cli(
        capsys,
        "run",
        *args,
        *QUICK_RUN,
        "--runs-dir",
        str(tmp_path / "runs"),
        "--history",
        str(tmp_path / "history.sqlite"),
        "--json",
    )


def test_a_run_measures_the_matrix_and_writes_its_report_and_history(capsys, tmp_path):
    result = _run(capsys, tmp_path, "--target", "onnx", "--recipe", "fp32,int8", "--device", "cpu")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    run_dir = Path(summary["run_dir"])
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "artifacts",
        "plots",
        "report.html",
        "report.json",
        "report.md",
        "results.json",
    ]
    assert not list(run_dir.parent.glob(".*partial"))  # built under a temporary name
    results = json.loads((run_dir / "results.json").read_text())
    rows = {(r["target"], r["recipe"]): r for r in results["rows"]}
    assert set(rows) == {("onnx", "fp32"), ("onnx", "int8"), ("baseline", "fp32")}
    assert results["run"]["tuning"] == []  # no search without --tune (tests/test_tune.py)
    assert "Tuned against default" not in (run_dir / "report.md").read_text()
    for key in (("onnx", "fp32"), ("onnx", "int8")):
        row = rows[key]
        assert row["status"] == "ok" and row["accuracy"]["samples"] == 899
        assert row["speedup_ci"][0] <= row["speedup"] <= row["speedup_ci"][1]
        assert "baseline/fp32" in row["interleaved_with"] and row["fingerprint"]["id"]
    assert summary["recommendation"].startswith("onnx/")
    # beside its speed and drop, what the recommended file needs in memory
    assert re.search(r"\), memory: process peak \d+ MB, the model's own -?[\d.]+ MB(;|$)",
                     summary["recommendation"]), summary["recommendation"]  # fmt: skip
    # the per-layer section: both artifacts profiled on the host CPU, named by module path
    profiles = {p["label"]: p for p in results["run"]["profiles"]}
    assert set(profiles) == {"onnx/fp32", "onnx/int8"}
    for profile in profiles.values():  # named as the rows name their files
        assert (run_dir / profile["artifact"]).is_file()
    assert "block2.dw" in {layer["name"] for layer in profiles["onnx/int8"]["layers"]}
    report = (run_dir / "report.md").read_text()
    # which layers lead depends on how busy the machine is; the one of largest share leads
    _, leader = max((layer["share"] or 0.0, layer["name"]) for profile in profiles.values()
                    for layer in profile["layers"])  # fmt: skip
    assert "## Where the time goes\n" in report and f"| {leader} |" in report, result.err
    assert (run_dir / "plots" / "layers.png").is_file()
    listed = run_cli(capsys, "history", "--history", str(tmp_path / "history.sqlite"), "--json")
    assert json.loads(listed.out)[0]["id"] == run_dir.name
    # the recorded run the report tests read has this fresh run's shape, so a schema change
    # cannot leave it behind (tests/data/record_results.py records it again)
    assert _shape(json.loads(RECORDED.read_text())) == _shape(results)


def test_a_second_run_copies_the_exports_of_the_first_and_says_so(capsys, tmp_path, monkeypatch):
    import edgekit.export.cache as export_cache

    monkeypatch.setattr(export_cache, "store_dir", lambda: tmp_path / "exports")
    matrix = ("--target", "onnx", "--recipe", "fp32", "--device", "cpu", "--no-profile")
    runs = []
    for extra in ((), (), ("--no-export-cache",)):
        result = _run(capsys, tmp_path, *matrix, *extra)
        assert result.code == 0, result.err
        runs.append(Path(json.loads(result.out)["run_dir"]))
    reused = [
        [
            e["reused"]
            for e in json.loads((d / "results.json").read_text())["run"]["phases"]["exports"]
        ]
        for d in runs
    ]
    assert reused == [[False], [True], [False]]
    manifests = [json.loads(next((d / "artifacts").glob("*.onnx.json")).read_text()) for d in runs]
    assert manifests[1]["reused"]["made"] == manifests[0]["created"]
    assert manifests[1]["file"]["sha256"] == manifests[0]["file"]["sha256"]
    assert "reused" not in manifests[2]


def _shape(results: dict) -> dict:
    """The keys of a results.json: its own, its run's, and each kind of row's."""
    rows: dict[str, set[str]] = {}
    for row in results["rows"]:
        rows.setdefault(row["kind"], set()).update(row)
    return {"top": set(results), "run": set(results["run"]), "rows": rows}


def test_the_python_api_writes_what_the_cli_writes(tmp_path):
    from edgekit.run.config import RunConfig
    from edgekit.run.matrix import run_matrix

    config = RunConfig(
        targets=["onnx"],
        recipes=["fp32"],
        devices=["cpu"],
        min_seconds=0.2,
        min_runs=20,
        rounds=4,
        runs_dir=str(tmp_path / "runs"),
        noise_guard=False,
    )
    result = run_matrix(config, history=tmp_path / "history.sqlite")
    assert sorted(p.name for p in result.run_dir.iterdir()) == [
        "artifacts",
        "plots",
        "report.html",
        "report.json",
        "report.md",
        "results.json",
    ]
    assert result.recommendation.best is not None and not result.failed
    summary = json.loads((result.run_dir / "report.json").read_text())
    assert summary["recommendation"] == result.recommendation.best.label
    # the run renders its report from the results in memory; results.json alone rebuilds it
    written = {name: (result.run_dir / name).read_text() for name in ("report.md", "report.json")}
    from edgekit.report import build_report

    build_report(result.run_dir)
    assert {name: (result.run_dir / name).read_text() for name in written} == written


NO_VULKAN = {"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"}


def _without_vulkan(tmp_path: Path) -> dict[str, str]:
    """A user's machine without a Vulkan driver, its history in ``tmp_path``."""
    return {**NO_VULKAN, "EDGEKIT_HISTORY": str(tmp_path / "history.sqlite")}


def test_the_demo_on_a_machine_without_a_vulkan_driver_skips_the_gpu_and_answers(tmp_path):
    """``make demo``'s devices are the defaults, not a request: a machine with only a CPU
    measures the CPU, names the device it skipped and how to add it, recommends, exits 0."""
    done = run_edgekit("run", "--config", str(plumbing_config(tmp_path)), "--target", "tflite",
                       "--recipe", "fp32,int8", "--no-profile", *QUICK_RUN, cwd=tmp_path,
                       env=_without_vulkan(tmp_path), timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("skipped device")]
    assert len(skipped) == 1 and skipped[0].startswith("skipped device gpu (no CUDA GPU and no ")
    assert "/nonexistent.json" in skipped[0] and "to add it: install a Vulkan driver" in skipped[0]
    assert re.search(r"recommendation: tflite/(fp32|int8)", done.stdout), done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    assert {row["device"] for row in results["rows"] if row["kind"] == "artifact"} == {"cpu"}
    assert set(results["run"]["absent_devices"]) == {"gpu"}
    assert "device gpu: to add it, install a Vulkan driver" in (run_dir / "report.md").read_text()


def test_a_gpu_asked_for_by_name_without_a_driver_is_one_line_and_exit_2(tmp_path):
    done = run_edgekit("run", "--device", "gpu", cwd=tmp_path, env=_without_vulkan(tmp_path))
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("edgekit: error: --device gpu: no CUDA GPU"), (
        lines
    )
    assert not (tmp_path / "runs").exists()  # refused before any work
    # named in a config file, the GPU is asked for too
    config = plumbing_config(tmp_path, 'devices = ["cpu", "gpu"]')
    done = run_edgekit("run", "--config", str(config), cwd=tmp_path, env=_without_vulkan(tmp_path))
    assert done.returncode == 2 and done.stderr.startswith("edgekit: error: --device gpu: no CUDA")


def test_a_target_from_a_plugin_runs_through_edgekit_run(capsys, tmp_path, monkeypatch):
    import edgekit.common.plugins
    import edgekit.targets

    # the registries as they were: later tests must not see the plugin
    monkeypatch.setattr(edgekit.targets, "TARGET_MODULES", dict(edgekit.targets.TARGET_MODULES))
    monkeypatch.setattr(edgekit.targets, "_REGISTRY", dict(edgekit.targets._REGISTRY))
    monkeypatch.setattr(edgekit.common.plugins, "_loaded", set())
    monkeypatch.setenv("EDGEKIT_PLUGINS", "torchscript_target")
    monkeypatch.setenv("PYTHONPATH", str(PLUGINS))
    monkeypatch.syspath_prepend(str(PLUGINS))
    result = _run(
        capsys, tmp_path, "--target", "torchscript", "--recipe", "fp32", "--device", "cpu"
    )
    assert result.code == 0, result.err
    run_dir = Path(json.loads(result.out)["run_dir"])
    rows = json.loads((run_dir / "results.json").read_text())["rows"]
    (row,) = [r for r in rows if r["target"] == "torchscript"]
    assert row["status"] == "ok" and row["accuracy"]["agreement"] == 1.0
    assert row["runtime"]["runtime"].startswith("torch.jit") and row["speedup"] > 0
    assert (run_dir / "artifacts" / "digits-mobilenet-fp32.ts").is_file()


def test_a_device_from_a_plugin_runs_through_edgekit_run(capsys, tmp_path, monkeypatch):
    import edgekit.common.plugins
    import edgekit.devices

    monkeypatch.setattr(edgekit.devices, "DEVICE_MODULES", dict(edgekit.devices.DEVICE_MODULES))
    monkeypatch.setattr(edgekit.devices, "_REGISTRY", dict(edgekit.devices._REGISTRY))
    monkeypatch.setattr(edgekit.common.plugins, "_loaded", set())
    monkeypatch.setenv("EDGEKIT_PLUGINS", "nice_cpu_device")
    monkeypatch.setenv("PYTHONPATH", str(PLUGINS))  # the workers load the plugins too
    monkeypatch.syspath_prepend(str(PLUGINS))
    result = _run(capsys, tmp_path, "--target", "onnx", "--recipe", "fp32", "--device",
                  "cpu-nice")  # fmt: skip
    assert result.code == 0, result.err
    run_dir = Path(json.loads(result.out)["run_dir"])
    rows = json.loads((run_dir / "results.json").read_text())["rows"]
    (row,) = [r for r in rows if r["kind"] == "artifact"]
    assert row["device"] == "cpu-nice" and row["status"] == "ok"
    assert row["runtime"]["nice"] == 10 and row["accuracy"]["agreement"] == 1.0
    assert row["traits"]["note"] == "host CPU at nice 10" and row["speedup"] > 0


def test_many_models_in_one_run_each_with_its_own_data_and_section(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # the baseline's worker imports it
    config = plumbing_config(
        tmp_path,
        'model = "digits-mobilenet,mapping_models:se_resnet"',
        'data = "digits"',
        'targets = ["onnx"]',
        'recipes = ["fp32"]',
        'devices = ["cpu"]',
        "profile = false",
        '[run.data_for]\n"mapping_models:se_resnet" = "synthetic:64"',
    )
    result = _run(capsys, tmp_path, "--config", str(config))
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    run_dir = Path(summary["run_dir"])
    results = json.loads((run_dir / "results.json").read_text())
    models = [info["name"] for info in results["run"]["models"]]
    assert len(models) == 2 and models[0] == "digits-mobilenet"
    assert [info["data"]["spec"] for info in results["run"]["models"]] == ["digits", "synthetic:64"]
    for model in models:  # its own baseline and artifact, its own recommendation
        kinds = sorted(r["kind"] for r in results["rows"] if r["model"] == model)
        assert kinds == ["artifact", "baseline"]
    assert set(summary["recommendations"]) == set(models)
    report = (run_dir / "report.md").read_text()
    assert "## Across models" in report
    for model in models:
        assert f"## {model}\n" in report
    across = json.loads((run_dir / "report.json").read_text())["across_models"]
    assert [row[0] for row in across["rows"]] == models
