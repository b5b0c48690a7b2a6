"""What a golden bundle carries for each runtime's own tools, checked as an app team checks it:
with a fresh Python in which edgekit cannot be imported. The plain-Python runner passes the
bundle and fails it once the expected outputs are off; a .pte's ``program.bpte`` passes
ExecuTorch's own bundled-program verification; an .onnx's test data sets, run by onnxruntime,
give the outputs they hold."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

RUNNERS = {
    "tflite": "runners/run_litert.py",
    "onnx": "runners/run_onnxruntime.py",
    "executorch": "runners/run_executorch.py",
}
# runs a script as ``python SCRIPT ARGS`` would, with ``import edgekit`` made to fail
WITHOUT_EDGEKIT = (
    "import runpy, sys; sys.modules['edgekit'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)

# ExecuTorch's own check of a BundledProgram: each test case's input through the program in
# ExecuTorch's runtime, its output against the bundled expected one (it raises on a mismatch)
VERIFY_BPTE = """
import json, sys
from pathlib import Path
from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

root = Path(sys.argv[1])
spec = json.loads((root / "spec.json").read_text())
atol = spec["tolerance"]["logits"]["atol"]
program = _load_bundled_program_from_buffer((root / "program.bpte").read_bytes())
failed = []
for index in range(len(spec["images"])):
    try:
        program.verify_result_with_bundled_expected_output("forward", index, rtol=0.0, atol=atol)
    except RuntimeError:
        failed.append(index)
print("failed", failed)
sys.exit(1 if failed else 0)
"""

# each test_data_set_K through onnxruntime: the .pb input by its own name, the output against
# output_0.pb (same name, dtype and shape) within the bundle's atol, dequantized
VERIFY_ONNX = """
import json, sys
from pathlib import Path
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

root = Path(sys.argv[1])
spec = json.loads((root / "spec.json").read_text())
atol, quant = spec["tolerance"]["logits"]["atol"], spec["artifact"]["output"]["quantization"]
model = str(root / "onnx" / "model.onnx")
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def read(path):
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return proto.name, numpy_helper.to_array(proto)


def logits(array):
    values = array.astype(np.float32)
    return (values - quant["zero_point"]) * quant["scale"] if quant else values


cases = sorted((root / "onnx").glob("test_data_set_*"), key=lambda p: int(p.name.split("_")[-1]))
assert len(cases) == len(spec["images"]), cases
for case in cases:
    given, tensor = read(case / "input_0.pb")
    returned, expected = read(case / "output_0.pb")
    assert given == session.get_inputs()[0].name and returned == session.get_outputs()[0].name
    got = session.run([returned], {given: tensor})[0]
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape), case.name
    assert np.max(np.abs(logits(got) - logits(expected))) <= atol, case.name
print("verified", len(cases))
"""


def without_edgekit(script: Path | str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EDGEKIT, str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """``bundles(capsys, artifact)`` -> a bundle of the artifact made through the CLI, once."""
    folder = tmp_path_factory.mktemp("bundles")

    def bundle(capsys, artifact) -> Path:
        out = folder / artifact.path.name
        if not out.is_dir():
            made = run_cli(capsys, "golden", str(artifact.path), "-o", str(out), "--spread-on", "")
            assert made.code == 0, made.err or made.out
        return out

    return bundle


def spec_of(bundle: Path) -> dict:
    return json.loads((bundle / "spec.json").read_text())


@pytest.mark.parametrize("target", sorted(RUNNERS))
def test_the_runner_passes_its_bundle_and_fails_one_whose_expected_outputs_are_off(
    capsys, export_digits, bundles, tmp_path, target
):
    bundle = bundles(capsys, export_digits(target, "int8"))
    runner = bundle / RUNNERS[target]
    spec = spec_of(bundle)
    assert RUNNERS[target] in spec["runtime_files"].values()
    assert f"`{RUNNERS[target]}`" in (bundle / "README.md").read_text()

    # from anywhere, with no argument: the bundle is the folder above the script
    passed = without_edgekit(runner, cwd=tmp_path)
    lines = passed.stdout.strip().splitlines()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert len(lines) == len(spec["images"]) + 1 and lines[-1].startswith("PASS")
    assert all(line.startswith(f"{n:03d}  ") for n, line in enumerate(lines[:-1]))

    # a copy whose image 1 is expected beyond the tolerance fails, naming that image
    edited = tmp_path / "edited"
    shutil.copytree(bundle, edited)
    logits = np.load(edited / "expected" / "logits.npy")
    logits[1, 0] += 10 * spec["tolerance"]["logits"]["atol"] + 0.1
    np.save(edited / "expected" / "logits.npy", logits)
    failed = without_edgekit(runner, str(edited), cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    last = failed.stdout.strip().splitlines()[-1]
    assert last.startswith("FAIL: 1 of 16 images") and last.endswith(": 001"), last


def test_the_runner_dequantizes_an_integer_output(capsys, export_digits, bundles, tmp_path):
    bundle = bundles(capsys, export_digits("tflite", "int8", "int8"))
    output = spec_of(bundle)["artifact"]["output"]
    assert output["dtype"] == "int8" and output["quantization"] is not None
    passed = without_edgekit(bundle / RUNNERS["tflite"], cwd=tmp_path)
    assert passed.returncode == 0 and "PASS" in passed.stdout, passed.stdout + passed.stderr


def test_the_bpte_passes_executorchs_own_bundled_program_check(
    capsys, export_digits, bundles, tmp_path
):
    from edgekit.targets.executorch.golden_files import bundled_program

    bundle = bundles(capsys, export_digits("executorch", "int8"))
    assert "program.bpte" in spec_of(bundle)["runtime_files"].values()
    check = tmp_path / "verify_bpte.py"
    check.write_text(VERIFY_BPTE)
    verified = without_edgekit(check, str(bundle), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "failed []" in verified.stdout

    # the check can fail: a BundledProgram expecting another output for image 2 fails there
    edited = tmp_path / "edited"
    shutil.copytree(bundle, edited)
    raw = np.load(edited / "expected" / "raw.npy")
    raw[2] += 0.5
    np.save(edited / "expected" / "raw.npy", raw)
    spec = spec_of(edited)
    (edited / "program.bpte").write_bytes(
        bundled_program(edited, spec, edited / "artifact" / spec["artifact"]["file"])
    )
    refused = without_edgekit(check, str(edited), cwd=tmp_path)
    assert refused.returncode == 1 and "failed [2]" in refused.stdout, refused.stdout


def test_the_onnx_test_data_sets_run_in_onnxruntime(capsys, export_digits, bundles, tmp_path):
    import onnx
    from onnx import numpy_helper

    artifact = export_digits("onnx", "int8")
    bundle = bundles(capsys, artifact)
    folder = bundle / "onnx"
    assert (folder / "model.onnx").read_bytes() == artifact.path.read_bytes()
    assert "onnx/" in spec_of(bundle)["runtime_files"].values()
    # test_data_set_K holds image K's stage-3 tensor and its raw expected output
    for index in (0, 15):
        given = onnx.TensorProto()
        given.ParseFromString((folder / f"test_data_set_{index}" / "input_0.pb").read_bytes())
        stage3 = np.load(bundle / "stage3" / f"{index:03d}.npy")
        assert np.array_equal(numpy_helper.to_array(given), stage3)
    check = tmp_path / "verify_onnx.py"
    check.write_text(VERIFY_ONNX)
    verified = without_edgekit(check, str(bundle), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "verified 16" in verified.stdout
