"""``edgekit culprit`` on models with one planted failure inside one block (tests/
planted_models.py): an op a converter refuses, a data-dependent branch, a block whose int8
output is wrong, and a stand-in for a hanging converter. Each time the search must name the
planted block, on each target, and the repro it writes must fail the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

from edgekit.culprit.harness import judged
from edgekit.culprit.outcome import op_named
from edgekit.culprit.search import children_of
from edgekit.export.pipeline import VALIDATION_SAMPLES

TARGETS = ("tflite", "onnx", "executorch")
PLANTED = "body.1.odd"  # where tests/planted_models.py puts the odd block
TESTS = Path(__file__).parent


def _culprit(capsys, tmp_path, model, target, recipe="fp32", *extra):
    result = run_cli(capsys, "culprit", "--model", f"planted_models:{model}", "--target", target,
                     "--recipe", recipe, "-o", str(tmp_path / "out"), *extra)  # fmt: skip
    record = None
    folder = tmp_path / "out" / f"{model}-{target}-{recipe}"
    if (folder / "culprit.json").is_file():
        record = json.loads((folder / "culprit.json").read_text())
    return result, record, folder


def _repro(folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}  # block.pt unpickles planted_models' classes
    return subprocess.run([sys.executable, "repro.py"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip


@pytest.mark.parametrize("target", TARGETS)
def test_an_op_the_converter_refuses_is_found_in_its_block(target, capsys, tmp_path):
    result, record, folder = _culprit(capsys, tmp_path, "log_gamma", target)
    assert result.code == 1, result.err
    assert record["culprit"]["path"] == PLANTED and record["culprit"]["kind"] == "LogGamma"
    outcome = record["culprit"]["outcome"]
    assert outcome["failure"] == "convert" and "lgamma" in outcome["op"]
    assert record["chain"] == ["", "body", "body.1", PLANTED]
    assert f"culprit: {PLANTED} (LogGamma)" in result.out
    assert result.err.splitlines()[-1].startswith(f"edgekit: error: {target}/fp32 fails (convert)")
    if target == "tflite":  # the repro, run as a maintainer would, fails the same way
        ran = _repro(folder)
        assert ran.returncode != 0
        assert "Lowering not found: aten.lgamma.default" in ran.stderr
        assert (folder / "README.md").read_text().count("google-ai-edge/litert-torch") == 1


@pytest.mark.parametrize("target", TARGETS)
def test_a_data_dependent_branch_fails_torch_export_in_its_block(target, capsys, tmp_path):
    result, record, _ = _culprit(capsys, tmp_path, "sign_branch", target)
    assert result.code == 1, result.err
    assert record["culprit"]["path"] == PLANTED
    assert record["culprit"]["outcome"]["failure"] == "export"
    assert record["upstream"] == "pytorch/pytorch"  # torch.export's, whatever the target


@pytest.mark.parametrize("target", TARGETS)
def test_a_block_whose_int8_output_is_wrong_is_found(target, capsys, tmp_path):
    """The spike's second conv reads an input whose int8 scale the first conv's channel 0
    set: it is the smallest block whose int8 output is wrong, on each runtime."""
    result, record, folder = _culprit(capsys, tmp_path, "spike", target, "int8")
    assert result.code == 1, result.err
    culprit = record["culprit"]
    assert culprit["path"] == f"{PLANTED}.1"
    verdict = culprit["outcome"]["verdict"]
    assert culprit["outcome"]["failure"] == "mismatch"
    assert verdict["inputs_below"] * 2 > verdict["inputs"] == 8
    siblings = {t["path"]: t["failure"] for t in record["tried"]}
    assert siblings[f"{PLANTED}.0"] is None  # the spike alone converts fine
    if target == "onnx":
        ran = _repro(folder)
        assert ran.returncode == 1 and "mismatch" in ran.stderr


def test_an_error_that_builds_up_is_judged_by_agreement_and_its_weakest_block_named(
    capsys, tmp_path
):
    """int8 keeps every block's SQNR but flips the whole model's top-1: the whole model is
    judged as export judges it (its validation images, its calibration, agreement included),
    and with no block failing alone the block where most of the error enters is named."""
    export = ["export", "--model", "planted_models:near_tie", "--target", "onnx", "--recipe"]
    exported = run_cli(capsys, *export, "int8", "-o", str(tmp_path / "export"))
    assert exported.code == 1 and "validation failed" in exported.err
    [rejected] = (tmp_path / "export").glob("*.onnx.rejected")
    validation = json.loads(Path(f"{rejected}.json").read_text())["validation"]
    result, record, folder = _culprit(capsys, tmp_path, "near_tie", "onnx", "int8")
    assert result.code == 1, result.err
    outcome = record["culprit"]["outcome"]
    assert record["culprit"]["path"] == "" and outcome["failure"] == "mismatch"
    verdict = outcome["verdict"]
    # the refusal export made is the one the search reproduces, figure for figure
    assert verdict["inputs"] == VALIDATION_SAMPLES
    assert verdict["agreement"] == pytest.approx(validation["top1_agreement"])
    assert verdict["sqnr_db"] == pytest.approx(validation["sqnr_db"], abs=0.05)
    assert verdict["agreement"] < verdict["min_agreement"]
    assert verdict["sqnr_db"] >= verdict["min_sqnr_db"]  # SQNR alone would have passed it
    assert outcome["message"].startswith("top-1 agreement ")
    children = {t["path"]: t for t in record["tried"] if t["path"]}
    assert set(children) == {"project", "lift"}
    assert all(t["failure"] is None for t in children.values())
    weakest = min(children, key=lambda path: children[path]["verdict"]["sqnr_db"])
    assert record["weakest"]["path"] == weakest
    assert f"the lowest SQNR alone is {weakest} " in result.out
    assert f"`{weakest}`" in (folder / "README.md").read_text()
    ran = _repro(folder)  # the repro judges the whole model's agreement too
    assert ran.returncode == 1 and "mismatch" in ran.stderr and "'agreement'" in ran.stderr


def test_a_hanging_conversion_ends_at_the_timeout_as_a_hang(capsys, tmp_path, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    result, record, _ = _culprit(capsys, tmp_path, "sleeps_when_exported", "onnx", "fp32",
                                 "--timeout", "8")  # fmt: skip
    assert list(temporary.iterdir()) == []  # the killed worker's scratch went with it
    assert result.code == 1, result.err
    outcome = record["culprit"]["outcome"]
    assert record["culprit"]["path"] == PLANTED
    assert (outcome["failure"], outcome["stage"]) == ("hang", "export")
    assert outcome["message"] == "no answer after 8 s"
    assert {t["path"] for t in record["tried"] if t["failure"] is None} >= {"stem", "body.0"}


def test_a_model_that_converts_says_so_and_exits_0(capsys, tmp_path):
    result, record, folder = _culprit(capsys, tmp_path, "clean", "onnx")
    assert result.code == 0, result.err
    assert "exports, loads and matches torch" in result.out and "nothing to find" in result.out
    assert record is None and not folder.exists()


def test_export_with_culprit_searches_each_failing_cell(capsys, tmp_path):
    out = tmp_path / "out"
    result = run_cli(capsys, "export", "--model", "planted_models:log_gamma", "--target", "onnx",
                     "--recipe", "fp32,int8", "-o", str(out), "--culprit")  # fmt: skip
    assert result.code == 1  # a requested artifact that was not made
    assert result.out.count(f"culprit: {PLANTED} (LogGamma)") == 2
    assert sorted(p.name for p in (out / "culprit").iterdir()) == [
        "log_gamma-onnx-fp32",
        "log_gamma-onnx-int8",
    ]
    last = result.err.splitlines()[-1]  # a converter's refusal, not bad input
    assert last.startswith("edgekit: error: nothing exported: ") and "prims.lgamma" in last


# ---- the pieces, as the search uses them ----


def test_one_odd_input_does_not_make_a_mismatch():
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((8, 1, 16)).astype(np.float32)
    outputs = reference.copy()
    outputs[3] = -reference[3]  # one input far off, seven exact
    verdict = judged(reference, outputs, 12.0)
    assert verdict["inputs_below"] == 1 and not verdict["mismatch"]
    outputs[:5] = 0.0  # most of them lost
    assert judged(reference, outputs, 12.0)["mismatch"]


def test_all_zero_outputs_are_degenerate_not_a_mismatch():
    verdict = judged(np.zeros((4, 1, 10)), np.ones((4, 1, 10)), 12.0)
    assert verdict["degenerate"] and not verdict["mismatch"]


@pytest.mark.parametrize(
    ("message", "op"),
    [
        ("Lowering not found: aten.lgamma.default", "aten.lgamma.default"),
        (
            "No ONNX function found for <OpOverload(op='prims.lgamma', overload='default')>",
            "prims.lgamma.default",
        ),
        (
            "Operator torch._ops.aten.lgamma.default is not in Core ATen opset",
            "aten.lgamma.default",
        ),
        ("'tfl.slice' op quantization parameters violate the same scale constraint", "tfl.slice"),
        (
            "tflite/kernels/broadcast_to.cc Output shape must be broadcastable from input "
            "shape.Node number 19 (BROADCAST_TO) failed to prepare.",
            "BROADCAST_TO",
        ),
        (
            "Attempting to convert non-NHWC compatible node to NHWC: dequantize_per_tensor_15",
            "dequantize_per_tensor",
        ),
        ("amax.default only supports keep_dim == True", "amax.default"),
        ("\"histogram_cpu\" not implemented for 'Long'", "histogram_cpu"),
        ("Could not guard on data-dependent expression Eq(u0, 1)", None),
        ("Failed to load method forward, error: 0x:1", None),
        (
            "Failed to load method forward, error: 0x:1; Failed to create StaticConstantPad node "
            "4 with code: xnn_status_invalid_parameter; Init failed for backend XnnpackBackend",
            "StaticConstantPad",
        ),
    ],
)
def test_the_op_is_read_from_each_converters_words(message, op):
    assert op_named(RuntimeError(message)) == op


def test_the_op_a_runtime_only_logged_is_read_from_its_log():
    """ExecuTorch raises "Failed to load method forward, error: 0x:1"; the node is in its log."""
    from edgekit.targets import get_target

    logged_cause = get_target("executorch").logged_cause
    log = (
        "[cpuinfo_utils.cpp:125] CPU info and manual query on # of cpus dont match.\n"
        "[XNNCompiler.cpp:1262] Failed to create StaticConstantPad node 27 with code: "
        "xnn_status_invalid_parameter\n"
        "[XNNPACKBackend.cpp:143] XNNCompiler::compileModel failed: 0x1\n"
    )
    line, op = logged_cause(log)
    assert op == "StaticConstantPad"
    assert line == (
        "Failed to create StaticConstantPad node 27 with code: xnn_status_invalid_parameter"
    )
    assert logged_cause("[method.cpp:128] Init failed for backend XnnpackBackend: 0x1") is None


def test_a_module_that_cannot_be_converted_alone_passes_its_children_up():
    blocks = [
        {"path": "", "skipped": None},
        {"path": "layers", "skipped": "not called with a tensor first"},  # a ModuleList
        {"path": "layers.0", "skipped": None},
        {"path": "layers.0.mlp", "skipped": None},
        {"path": "head", "skipped": None},
    ]
    assert [b["path"] for b in children_of("", blocks)] == ["layers.0", "head"]
    assert [b["path"] for b in children_of("layers.0", blocks)] == ["layers.0.mlp"]


def test_a_degenerate_source_is_named_by_export_and_by_culprit(capsys, tmp_path):
    """All-zero logits: export says the source is degenerate (its validation compared
    nothing); culprit says there is nothing to compare and exits 0."""
    exported = run_cli(capsys, "export", "--model", "planted_models:flat", "--target", "onnx",
                       "-o", str(tmp_path / "out"))  # fmt: skip
    assert exported.code == 0
    assert "the source flat is degenerate: its logits do not move" in exported.err
    result, record, _ = _culprit(capsys, tmp_path, "flat", "onnx")
    assert result.code == 0 and record is None
    assert "the source itself is degenerate" in result.out


def test_logits_too_small_for_int8_rounding_are_said_first(capsys, tmp_path):
    """Logits near 1e-4 move with the input (not degenerate) but span about one int8 step at
    PT2E's smallest scale (2^-12): the refusal says so before its figures. On synthetic images
    some logits reach a step; on the digits all round to zero."""
    exported = run_cli(capsys, "export", "--model", "planted_models:faint", "--target", "tflite",
                       "--int8", "--data", "synthetic:64", "-o", str(tmp_path))  # fmt: skip
    assert exported.code == 1
    line = exported.err.splitlines()[-1]
    assert "validation failed against faint: the source's largest |logit|, " in line
    assert "steps of this file's output (0.00024 each), too few for rounding to keep; SQNR" in line
    manifest = json.loads((tmp_path / "faint-int8.tflite.rejected.json").read_text())
    assert manifest["validation"]["output_step"] == pytest.approx(2**-12)
    on_digits = run_cli(capsys, "export", "--model", "planted_models:faint", "--target", "tflite",
                        "--int8", "-o", str(tmp_path / "digits"))  # fmt: skip
    assert on_digits.code == 1
    assert (
        "the file's logits are one value for every image and class; the source's largest "
        in (on_digits.err.splitlines()[-1])
    )


@pytest.mark.parametrize(
    ("target", "carried"),
    [("tflite", "def with_runtime_rules"), ("executorch", "def with_runtime_rules"),
     ("onnx", "def own_biases"), ("onnx", "def static_options")],
)  # fmt: skip
def test_a_repro_script_carries_what_its_conversion_imports_of_edgekit(target, carried):
    """The block is quantized as export quantizes it, and the script still needs no edgekit."""
    import importlib

    from edgekit.culprit.repro import script

    convert_module = importlib.import_module(f"edgekit.targets.{target}.convert_block")
    text = script(convert_module, "int8", 12.0, "convert: ...", "a repro")
    compile(text, "repro.py", "exec")
    assert carried in text
    assert not [line for line in text.splitlines() if "import" in line and "edgekit" in line]
