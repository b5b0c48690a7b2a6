"""``edgekit export --timeout``: each conversion runs in a child process under a deadline. A
converter that hangs or crashes is refused in one line that says which, and leaves no file; a
conversion that ends gives the file it gives in process."""

import json

from cli_helpers import run_cli

MODELS = "planted_models:"  # tests/planted_models.py
QUICK = ["--target", "onnx", "--data", "synthetic:64"]
FOLDERS = ("bounded", "in_process")


def _export(capsys, folder, model, *args):
    return run_cli(capsys, "export", "--model", MODELS + model, *QUICK, "-o", str(folder), *args)


def test_a_conversion_under_a_deadline_gives_the_file_it_gives_in_process(capsys, tmp_path):
    bounded = _export(capsys, tmp_path / "bounded", "clean", "--int8", "--timeout", "600")
    assert bounded.code == 0, bounded.err
    in_process = _export(capsys, tmp_path / "in_process", "clean", "--int8")
    assert in_process.code == 0, in_process.err
    made = [json.loads((tmp_path / f / "clean-int8.onnx.json").read_text()) for f in FOLDERS]
    # calibrated on the same images in the child: the same tensors, the same validation
    for field in ("input", "output", "calibration", "validation"):
        assert made[0][field] == made[1][field], field


def test_a_hanging_converter_is_refused_at_the_deadline_as_a_hang(capsys, tmp_path):
    result = _export(capsys, tmp_path, "sleeps_when_exported", "--timeout", "15")
    assert result.code == 1
    [line] = result.err.strip().splitlines()
    assert "sleeps_when_exported: the converter hung" in line and "after 15 s" in line
    assert list(tmp_path.iterdir()) == []  # the partial file is gone with the child


def test_a_converter_that_crashes_is_refused_as_a_crash_and_the_other_cells_go_on(capsys, tmp_path):
    both = ["--recipe", "fp32,int8", "--timeout", "600"]
    result = _export(capsys, tmp_path, "crashes_when_exported", *both)
    assert result.code == 1
    said = result.out + result.err
    for cell in ("onnx/fp32", "onnx/int8"):  # the first crash did not stop the second cell
        assert f"not exported {cell}: {cell}: not supported" in said
    assert said.count("the converter crashed (killed by SIGSEGV)") >= 2
    assert "Traceback" not in result.err
    assert list(tmp_path.iterdir()) == []
