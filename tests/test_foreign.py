"""Files edgekit did not make, through the CLI as a user calls it: bench, eval, check and run
take a .tflite/.onnx/.pte with no manifest, say what they assumed, and give the same figures
as the runtime's own tools would; an .onnx is also a source model."""

from __future__ import annotations

import json
from pathlib import Path

import foreign_files
import numpy as np
import pytest
from cli_helpers import plumbing_config, run_cli

# the benches here check what is reported about a file, not its figures: no noise guard, so they
# run beside other tests (the latency gate below runs alone)
QUICK = ["--rounds", "3", "--min-runs", "5", "--min-seconds", "0.05", "--warmup", "2",
         "--no-noise-guard", "--precision", "off"]  # fmt: skip


@pytest.fixture(scope="module")
def keras_made(keras_digits_files):
    """TFLiteConverter's files of a Keras model, its own top-1 on edgekit's evaluation split
    (the half of digits edgekit evaluates on), and their folder."""
    files = {k: v for k, v in keras_digits_files.items() if k != "own_top1"}
    return files, keras_digits_files["own_top1"], files["fp32"].parent


@pytest.fixture(scope="module")
def digits_names(tmp_path_factory):
    path = tmp_path_factory.mktemp("names") / "digits.txt"
    path.write_text("\n".join(str(d) for d in range(10)) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def digits_onnx(digits_model, tmp_path_factory):
    """edgekit's digits classifier exported by the user with torch.onnx.export."""
    path = tmp_path_factory.mktemp("onnx") / "digits.onnx"
    return foreign_files.torch_onnx(digits_model.module, digits_model.example_input(), path)


@pytest.fixture(scope="module")
def baseline_top1(digits_model, digits_data):
    logits = digits_model.predict(digits_data.evaluation.x)
    return float(np.mean(logits.argmax(1) == digits_data.evaluation.y))


def _json(capsys, *args):
    result = run_cli(capsys, *args, "--json")
    assert result.code == 0, result.err[-2000:]
    return json.loads(result.out)


def test_a_tfliteconverter_file_evaluates_as_keras_itself_does(capsys, keras_made):
    files, own, _ = keras_made
    [record] = _json(capsys, "eval", str(files["fp32"]))
    assert abs(record["top1"] - own) < 0.0012  # at most one image of 899 apart
    assert record["drop_points"] is None  # no source model: no drop is claimed
    assert any("layout NHWC: inferred" in line for line in record["assumed"])
    assert any("no normalisation given" in line for line in record["assumed"])


def test_a_full_integer_file_takes_int8_input(capsys, keras_made):
    files, own, _ = keras_made
    [record] = _json(capsys, "eval", str(files["int8"]))
    assert record["runtime"]["input_dtype"] == "int8"
    assert abs(record["top1"] - own) < 0.03
    assert any("recipe int8" in line for line in record["assumed"])


def test_bench_reports_what_it_assumed(capsys, keras_made):
    files, _, _ = keras_made
    result = run_cli(capsys, "bench", str(files["dynamic"]), *QUICK)
    assert result.code == 0, result.err[-2000:]
    assert "keras-dynamic.tflite (tflite," in result.out
    assert "assumed: inputs and outputs read from the file" in result.out


def test_torch_onnx_export_with_its_normalisation_matches_the_source(
    capsys, digits_onnx, digits_names, baseline_top1
):
    args = ["--mean", "0.5", "--std", "0.5", "--class-names", digits_names]
    [given] = _json(capsys, "eval", str(digits_onnx), *args)
    assert abs(given["top1"] - baseline_top1) < 0.0012
    assert "mean (0.5,) given" in given["assumed"]
    [bare] = _json(capsys, "eval", str(digits_onnx))  # the wrong normalisation shows
    assert bare["top1"] < baseline_top1 - 0.05


def test_edgekit_toml_describes_the_file(
    capsys, tmp_path, digits_onnx, digits_names, baseline_top1
):
    config = tmp_path / "edgekit.toml"
    config.write_text(f'[model]\nmean = 0.5\nstd = [0.5]\nclass_names = "{digits_names}"\n')
    [record] = _json(capsys, "eval", str(digits_onnx), "--config", str(config))
    assert abs(record["top1"] - baseline_top1) < 0.0012


def test_a_plain_executorch_file_runs(capsys, digits_foreign_pte, digits_names, baseline_top1):
    pte = digits_foreign_pte(xnnpack=True)
    args = ["--mean", "0.5", "--std", "0.5", "--class-names", digits_names]
    [record] = _json(capsys, "eval", str(pte), *args)
    assert abs(record["top1"] - baseline_top1) < 0.0012
    [timed] = _json(capsys, "bench", str(pte), *QUICK)
    assert timed["status"] == "ok" and timed["stats"]["p50_ms"] > 0


def test_a_non_classifier_is_benchmarked_and_eval_says_why_not(capsys):
    iris = foreign_files.shipped("onnxruntime", "datasets/logreg_iris.onnx")
    [timed] = _json(capsys, "bench", str(iris), *QUICK)
    assert timed["status"] == "ok"
    result = run_cli(capsys, "eval", str(iris))
    assert result.code == 2
    assert "accuracy is out of scope" in result.err and "edgekit bench" in result.err


@pytest.mark.timing
def test_check_gates_latency_between_two_foreign_files(capsys, digits_onnx, tmp_path):
    copy = tmp_path / "same.onnx"
    copy.write_bytes(Path(digits_onnx).read_bytes())
    result = run_cli(
        capsys,
        "check",
        str(copy),
        "--against",
        str(digits_onnx),
        "--max-latency-regression",
        "50",
        "--rounds",
        "6",
    )
    assert result.code == 0, result.err[-2000:]
    assert "PASS" in result.out


def test_run_measures_a_given_file_and_reports_the_assumptions(capsys, tmp_path, keras_made):
    files, _, _ = keras_made
    result = run_cli(
        capsys,
        "run",
        "--config",
        str(plumbing_config(tmp_path)),
        "--model",
        str(files["int8"]),
        "--device",
        "cpu",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--history",
        str(tmp_path / "h.sqlite"),
        "--rounds",
        "3",
        "--min-runs",
        "5",
        "--min-seconds",
        "0.05",
    )
    assert result.code == 0, result.err[-2000:]
    [run_dir] = (tmp_path / "runs").iterdir()
    report = (run_dir / "report.md").read_text()
    assert "## What edgekit assumed about files it did not make" in report
    assert (run_dir / "artifacts" / "keras-int8-io.tflite").is_file()
    rows = json.loads((run_dir / "results.json").read_text())["rows"]
    assert rows[0]["accuracy"]["top1"] > 0.5 and rows[0]["accuracy"]["drop_points"] is None


def test_input_shape_comes_from_the_data(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent)
    x = np.random.default_rng(0).random((40, 3, 32, 32)).astype(np.float32)
    np.savez(tmp_path / "mine.npz", x=x, y=np.arange(40) % 4)
    result = run_cli(
        capsys,
        "export",
        "--model",
        "user_models:shapeless_cnn",
        "--data",
        str(tmp_path / "mine.npz"),
        "--target",
        "onnx",
        "-o",
        str(tmp_path / "o"),
    )
    assert result.code == 0, result.err[-2000:]
    assert "input shape 3,32,32 (C,H,W) taken from the data" in result.err
    manifest = json.loads(next((tmp_path / "o").glob("*.onnx.json")).read_text())
    assert manifest["input"]["shape"] == [1, 3, 32, 32]
    assert manifest["preprocessing"]["class_names"] == [f"class_{i}" for i in range(4)]


def test_an_onnx_source_exports_to_every_target(capsys, tmp_path, digits_onnx, digits_names):
    args = ["--mean", "0.5", "--std", "0.5", "--class-names", digits_names]
    # 50 calibration samples, not 200: PT2E feeds them one at a time through onnx2torch's
    # module per ONNX node, 39 s of this test's 60 on a 2-core Xeon; what is tested here is the
    # path from an ONNX graph to every target, and the int8 drop below still holds
    args += ["--calibration-samples", "50"]
    result = run_cli(
        capsys,
        "export",
        "--model",
        str(digits_onnx),
        *args,
        "--target",
        "all",
        "--recipe",
        "fp32,int8",
        "-o",
        str(tmp_path),
        "--json",
    )
    assert result.code == 0, result.err[-2000:]
    made = {f"{a['target']}/{a['recipe']}": a for a in json.loads(result.out)["artifacts"]}
    assert set(made) == {
        f"{t}/{r}" for t in ("tflite", "executorch", "onnx") for r in ("fp32", "int8")
    }
    for artifact in made.values():  # validated against the original graph in onnxruntime
        assert artifact["validation"]["passed"]
        assert artifact["source"]["framework"] == "onnx"
    assert made["onnx/fp32"]["details"]["exporter"].startswith("the source ONNX graph")
    assert "onnx2torch" in made["tflite/int8"]["details"]["converted_from_onnx"][0]
    assert made["onnx/int8"]["audit"]["looks_like"] == "int8"
    [record] = _json(capsys, "eval", str(tmp_path / "digits-int8.onnx"))
    assert record["baseline"].startswith("source model") and record["drop_points"] < 2.0


def test_an_old_opset_zoo_file_exports_and_a_missing_converter_is_one_line(capsys, tmp_path):
    def export(name: str, code: int = 0):
        path = foreign_files.light_model(name)
        result = run_cli(capsys, "export", "--model", str(path), "--data", "synthetic:16",
                         "--target", "onnx,tflite", "--recipe", "fp32",
                         "-o", str(tmp_path))  # fmt: skip
        assert result.code == code, result.err[-2000:]
        return result

    export("light_squeezenet")  # opset 9, IR 3
    assert {p.name for p in tmp_path.glob("*.tflite")} == {"light_squeezenet-fp32.tflite"}
    manifest = json.loads((tmp_path / "light_squeezenet-fp32.onnx.json").read_text())
    assert "opset 9 upgraded to 13" in " ".join(manifest["details"]["source_notes"])
    # AvgPool with asymmetric pads: onnx is made and kept, tflite is not, and a CI sees it fail
    result = export("light_inception_v1", code=1)
    [line] = [line for line in result.out.splitlines() if "not exported" in line]
    assert "AvgPool" in line and "tflite/fp32" in line
    assert result.err.strip().splitlines()[-1] == (
        "edgekit: error: exported 1 of 2; not exported: tflite/fp32"
    )
    assert (tmp_path / "light_inception_v1-fp32.onnx").is_file()
    assert not list(tmp_path.glob("light_inception_v1*.tflite*"))  # nothing partial
