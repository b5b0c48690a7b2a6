"""``edgekit run --golden``: the run directory holds a golden bundle of each model's recommended
artifact, the report links it with its tolerance, ``edgekit report`` links it again, and a
resumed run gets its bundles too. A bundle that cannot be made is named with why, and the run
still succeeds."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import QUICK_RUN, plumbing_config, run_cli


def _run(capsys, tmp_path, *args):
    return run_cli(
        capsys,
        "run",
        "--config",
        str(plumbing_config(tmp_path)),
        "--golden",
        "--no-profile",
        "--device",
        "cpu",
        *args,
        *QUICK_RUN,
        "--runs-dir",
        str(tmp_path / "runs"),
        "--history",
        str(tmp_path / "history.sqlite"),
        "--json",
    )


def test_a_golden_run_links_a_checked_bundle_of_its_recommended_artifact(capsys, tmp_path):
    result = _run(capsys, tmp_path, "--target", "tflite,onnx", "--recipe", "int8")
    assert result.code == 0, result.err
    run_dir = Path(json.loads(result.out)["run_dir"])
    results = json.loads((run_dir / "results.json").read_text())
    assert results["run"]["config"]["golden"] is True
    recommended = json.loads((run_dir / "report.json").read_text())["recommendation"]
    best = next(r for r in results["rows"] if r["kind"] == "artifact"
                and recommended.startswith(f"{r['target']}/{r['recipe']}"))  # fmt: skip
    stem = Path(best["artifact"]).stem
    bundle = run_dir / "golden" / stem
    assert (bundle / "SHA256SUMS").is_file()
    recorded = results["run"]["golden"]["digits-mobilenet"]
    assert recorded["bundle"] == f"golden/{stem}" and recorded["artifact"] == best["artifact"]
    atol = json.loads((bundle / "spec.json").read_text())["tolerance"]["logits"]["atol"]
    assert recorded["atol"] == atol
    report = (run_dir / "report.md").read_text()
    link = f"[golden/{stem}/README.md](golden/{stem}/README.md)"
    assert link in report and f"atol {atol:.4g}" in report
    assert f'href="golden/{stem}/README.md"' in (run_dir / "report.html").read_text()

    # the bundle holds against the run's own artifact on the host
    checked = run_cli(capsys, "golden", "--check", str(bundle), str(run_dir / best["artifact"]))
    assert checked.code == 0, checked.out + checked.err
    assert "PASS" in checked.out

    # the report rebuilt from results.json alone links the same bundle
    rebuilt = run_cli(capsys, "report", str(run_dir))
    assert rebuilt.code == 0, rebuilt.err
    assert (run_dir / "report.md").read_text() == report

    # a resumed run (a row marked failed) is written again with its bundle
    for row in results["rows"]:
        if row["kind"] == "artifact" and row["artifact"] != best["artifact"]:
            row.update(status="failed", error="made to fail by the test")
    (run_dir / "results.json").write_text(json.dumps(results))
    resumed = run_cli(capsys, "run", "--resume", str(run_dir), "--history",
                      str(tmp_path / "history.sqlite"), "--json")  # fmt: skip
    assert resumed.code == 0, resumed.err
    assert (run_dir / "golden" / stem / "SHA256SUMS").is_file()
    assert link in (run_dir / "report.md").read_text()


def test_a_run_on_synthetic_data_says_why_it_has_no_bundle_and_succeeds(capsys, tmp_path):
    result = _run(capsys, tmp_path, "--target", "onnx", "--recipe", "int8",
                  "--data", "synthetic:64", "--max-drop", "100")  # fmt: skip
    assert result.code == 0, result.err
    run_dir = Path(json.loads(result.out)["run_dir"])
    recorded = json.loads((run_dir / "results.json").read_text())["run"]["golden"]
    (model,) = recorded.values()
    assert "bundle" not in model and "synthetic" in model["why"]
    assert not list((run_dir / "golden").glob("*/SHA256SUMS"))
    line = next(ln for ln in (run_dir / "report.md").read_text().splitlines()
                if ln.startswith("Golden vectors for the app"))  # fmt: skip
    assert "none made" in line and "synthetic" in line
