"""The command line as a user types it: output, exit codes, and one-line errors for bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from cli_helpers import EDGEKIT, run_cli, run_edgekit


def test_help_lists_the_commands(capsys, monkeypatch):
    """Every command by its own name in the help's command table, and nothing else: a removed
    or renamed command fails this (a substring of the page would not: "eval" is in
    "evaluate")."""
    import re

    monkeypatch.setenv("COLUMNS", "200")  # one command per table line
    result = run_cli(capsys, "--help")
    assert result.code == 0
    listed = re.findall(r"^│ ([a-z][a-z-]*) ", result.out, re.M)
    assert listed == [
        "audit", "culprit", "export", "golden", "doctor", "eval", "bench", "check", "profile",
        "quantize-debug", "run", "report", "history", "compare", "tune", "zoo", "device",
        "cluster",
    ]  # fmt: skip


def test_zoo_list_and_show(capsys):
    listing = run_cli(capsys, "zoo", "list")
    assert listing.code == 0 and "digits-mobilenet" in listing.out and "resnet50" in listing.out
    shown = run_cli(capsys, "zoo", "show", "mobilenet_v2")
    assert shown.code == 0
    facts = json.loads(shown.out)
    assert facts["parameters"] == 3_504_872 and facts["preprocess"]["input_size"] == [224, 224]


def test_doctor_reports_this_machine(capsys):
    result = run_cli(capsys, "doctor", "--json")
    assert result.code == 0
    facts = json.loads(result.out)
    assert facts["versions"]["torch"].startswith("2.13.0")
    assert facts["targets"]["onnx"] == {"export": True, "run": True, "problems": []}
    assert facts["targets"]["executorch"]["xnnpack"] is True
    assert facts["fingerprint"]["logical_cores"] == os.cpu_count() and facts["fingerprint"]["id"]
    assert facts["cores"] == os.cpu_count()
    human = run_cli(capsys, "doctor")
    assert human.code == 0 and "XNNPACK" in human.out and "Vulkan" in human.out


def test_the_default_model_is_the_shipped_one_on_any_machine(capsys):
    """The digits classifier is not trained here: every machine evaluates the shipped file, so
    the digest and the accuracy are the card's (what the README quotes)."""
    import re

    from edgekit.sources.weights import shipped_card

    card = shipped_card("digits-mobilenet")
    result = run_cli(capsys, "eval")
    assert result.code == 0
    found = re.search(
        r"digits-mobilenet on digits \(evaluation split, 899 images\): top-1 ([\d.]+) %.*"
        r"\[weights ([0-9a-f]{12})\]",
        result.out,
    )
    assert found, result.out
    assert found.group(1) == f"{100 * card.top1:.2f}" and found.group(2) == card.state_digest[:12]


def test_eval_of_a_source_model_loads_the_weights_it_is_given(capsys, tmp_path, monkeypatch):
    import torch
    from user_models import tiny_cnn

    monkeypatch.chdir(os.path.dirname(__file__))  # where user_models.py is importable from
    state = {name: torch.zeros_like(value) for name, value in tiny_cnn().state_dict().items()}
    torch.save(state, tmp_path / "zeros.pt")
    digests = {}
    for name, extra in (("own", []), ("zeros", ["--weights", str(tmp_path / "zeros.pt")])):
        result = run_cli(capsys, "eval", "--model", "user_models:tiny_cnn", "--json", *extra)
        assert result.code == 0, result.err
        digests[name] = json.loads(result.out)["digest"]
    assert digests["own"] != digests["zeros"]


def test_export_writes_a_validated_artifact_and_its_manifest(capsys, tmp_path):
    # --target is run's spelling and --io float audit's word: every command takes both
    result = run_cli(capsys, "export", "--target", "onnx", "--int8", "--io", "float", "-o",
                     str(tmp_path), "--json")  # fmt: skip
    assert result.code == 0, result.err
    (entry,) = json.loads(result.out)["artifacts"]
    assert entry["recipe"] == "int8" and entry["validation"]["passed"]
    assert (tmp_path / "digits-mobilenet-int8.onnx").is_file()
    manifest = json.loads((tmp_path / "digits-mobilenet-int8.onnx.json").read_text())
    assert manifest["calibration"]["size"] == 200
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "--target", "coreml"], "unknown target 'coreml'"),
        (["export", "--target", "onnx", "--recipe", "int4"], "unknown recipe 'int4'"),
        (
            ["export", "--target", "onnx", "--int8", "--calibration-samples", "0"],
            "--calibration-samples must be positive",
        ),
        (["export", "--target", "onnx", "--model", "nowhere/model.pt2"], "model file not found"),
        (["export", "--target", "onnx", "--int8", "--fp16"], "choose one recipe"),
        (["eval", "missing.tflite"], "missing.tflite: artifact not found"),
        (["check", "missing.onnx"], "give at least one bound"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, args, message):
    result = (
        run_cli(capsys, *args, "-o", str(tmp_path))
        if args[0] == "export"
        else run_cli(capsys, *args)
    )
    assert result.code == 2
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err


def test_an_output_directory_that_is_not_writable(capsys, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    result = run_cli(capsys, "export", "--target", "onnx", "-o", str(blocked / "out"))
    assert result.code == 2 and "output directory is not writable" in result.err


def test_a_dataset_that_does_not_match_the_model(capsys, tmp_path):
    path = tmp_path / "three.npz"
    np.savez(
        path,
        x=np.zeros((6, 8, 8)),
        y=np.array([0, 1, 2, 0, 1, 2]),
        class_names=np.array(["a", "b", "c"]),
    )
    result = run_cli(capsys, "export", "--target", "onnx", "--data", str(path), "-o", str(tmp_path))
    assert result.code == 2 and "dataset has 3 classes but the model has 10" in result.err


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(Exception, match="no such zoo model"):
        run_cli(capsys, "--debug", "export", "--model", "zoo:alexnet")


def test_accuracy_aware_export_on_the_default(capsys, tmp_path, monkeypatch):
    import edgekit.measure.bench as bench

    # the steps' latency timed without the noise guard: this test is about the drop, and it runs
    # beside other tests
    guards, measure = [], bench.measure_interleaved

    def recording(timers, records, protocol, guard, *rest, **options):
        guards.append(guard)
        return measure(timers, records, protocol, guard, *rest, **options)

    monkeypatch.setattr(bench, "measure_interleaved", recording)
    result = run_cli(capsys, "export", "--target", "onnx", "--int8", "--max-drop", "1",
                     "--no-noise-guard", "-o", str(tmp_path))  # fmt: skip
    assert result.code == 0, result.err
    assert [guard.enabled for guard in guards] == [False]
    assert "within budget" in result.out and "int8 within 1 points" in result.out
    manifest = json.loads((tmp_path / "digits-mobilenet-int8.onnx.json").read_text())
    aware = manifest["accuracy_aware"]
    assert aware["within_budget"] and aware["steps"][0]["keep_float"] == []
    assert aware["steps"][0]["drop_ci"][1] <= 1.0


def test_keep_float_is_recorded_in_the_manifest(capsys, tmp_path):
    result = run_cli(
        capsys, "export", "--target", "onnx", "--int8", "--keep-float", "stem", "-o", str(tmp_path)
    )
    assert result.code == 0, result.err
    manifest = json.loads((tmp_path / "digits-mobilenet-int8.onnx.json").read_text())
    assert manifest["keep_float"] == ["stem"]
    assert manifest["coverage"]["int8_ops"] == manifest["coverage"]["compute_ops"] - 1


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        ("onnx", ["--fp16", "--max-drop", "1"], "--max-drop needs --int8"),
        ("onnx", ["--int8", "--max-drop", "1", "--keep-float", "stem"], "chooses the float"),
        ("onnx", ["--int8", "--keep-float", "block99.dw"], "block99.dw"),
        ("tflite", ["--int8", "--keep-float", "block99.dw"], "block99.dw"),
        ("executorch", ["--int8", "--keep-float", "block99.dw"], "block99.dw"),
    ],
)
def test_bad_float_island_options(capsys, tmp_path, target, args, message):
    result = run_cli(capsys, "export", "--target", target, *args, "-o", str(tmp_path))
    assert result.code == 2 and message in result.err
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".edgekit-probe")]


def test_a_failed_validation_keeps_the_file_as_rejected_and_exits_1(capsys, tmp_path):
    """int8 of a model with an outlier channel: 3 dB of SQNR against a 12 dB tolerance."""
    result = run_cli(
        capsys,
        "export",
        "--model",
        "damaged_models:outlier_mobilenet",
        "--target",
        "onnx",
        "--int8",
        "-o",
        str(tmp_path),
    )
    assert result.code == 1 and "validation failed" in result.err
    assert "SQNR" in result.err and "kept under the .rejected name" in result.err
    rejected = tmp_path / "outlier_mobilenet-int8.onnx.rejected"
    assert rejected.is_file() and not (tmp_path / "outlier_mobilenet-int8.onnx").exists()
    manifest = json.loads((tmp_path / "outlier_mobilenet-int8.onnx.rejected.json").read_text())
    assert manifest["validation"]["passed"] is False


def test_quantize_debug_table(capsys, tmp_path):
    plot = tmp_path / "sensitivity.png"
    result = run_cli(
        capsys,
        "quantize-debug",
        "--target",
        "onnx",
        "--samples",
        "32",
        "--json",
        "--plot",
        str(plot),
    )
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert plot.stat().st_size > 5000
    assert report["target"] == "onnx" and report["samples"] == 32
    # every compute layer of digits-mobilenet, named by its module path, with its SQNR figures,
    # and the runtime's own per-tensor debugger beside edgekit's
    names = [layer["name"] for layer in report["layers"]]
    assert {"stem", "head", "classifier"} <= set(names) and len(names) == len(set(names)) == 20
    assert all(layer["only_db"] > 0 and layer["artifact_db"] > 0 for layer in report["layers"])
    assert report["crosscheck"].startswith("onnxruntime qdq_loss_debug")


def test_a_users_own_factory_exports_to_all_three_targets(capsys, tmp_path):
    result = run_cli(
        capsys,
        "export",
        "--model",
        "user_models:tiny_cnn",
        "--target",
        "all",
        "-o",
        str(tmp_path),
        "--json",
    )
    assert result.code == 0, result.err
    exported = json.loads(result.out)["artifacts"]
    assert sorted(a["target"] for a in exported) == ["executorch", "onnx", "tflite"]
    assert all(
        a["validation"]["passed"] and a["source"]["spec"] == "user_models:tiny_cnn"
        for a in exported
    )


def test_output_piped_into_head_ends_quietly():
    """``edgekit --help | head -1``: the reader leaves early, and edgekit neither complains nor
    fails (rich and click would exit 1 without a word, and the supervisor then blamed a crash)."""
    import subprocess

    for args in (["--help"], ["zoo", "list"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first line: every write breaks
        done = subprocess.run([EDGEKIT, *args], stdout=write_end, capture_output=False,
                              stderr=subprocess.PIPE, timeout=60, check=False)  # fmt: skip
        os.close(write_end)
        assert done.returncode == 0 and done.stderr == b"", (args, done.stderr)


def test_a_plugin_that_does_not_import_is_one_line_on_every_command_that_needs_it(tmp_path):
    """EDGEKIT_PLUGINS naming a module that is not there: --help still works, and a command
    that needs the registries says which plugin, once, with exit 2 (it once crashed at import)."""

    def call(*args):
        return run_edgekit(*args, cwd=tmp_path, env={"EDGEKIT_PLUGINS": "no_such_plugin_module"},
                           timeout=120)  # fmt: skip

    assert call("--help").returncode == 0
    done = call("export", "--target", "onnx")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "edgekit: error: plugin no_such_plugin_module: does not import "
        "(ModuleNotFoundError: No module named 'no_such_plugin_module')"
    ]
    assert not list(tmp_path.iterdir())  # nothing written
