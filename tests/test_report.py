"""The run's report, recommendation, history and config, built from a recorded results.json
(a real `edgekit run` on this machine) so they are tested without re-measuring anything."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import EDGEKIT, run_cli
from measured_rows import RECORDED, interleaved, measured_row

from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError
from edgekit.report.history import compare_runs, list_runs, record_run, resolve_run
from edgekit.report.recommend import recommend
from edgekit.results import RESULTS_SCHEMA_VERSION, Results, Row, load_results
from edgekit.run.cells import failed_row as _failed
from edgekit.run.config import RunConfig

# a run recorded before the two-level intervals (results schema 2: rounds and a noise band)
SCHEMA_2 = Path(__file__).parent / "data" / "results_schema2.json"


@pytest.fixture
def run_dir(tmp_path):
    directory = tmp_path / "runs" / "20261201-000000-digits-mobilenet"
    directory.mkdir(parents=True)
    shutil.copy(RECORDED, directory / "results.json")
    return directory


def test_results_schema_of_a_recorded_run():
    payload = json.loads(RECORDED.read_text())
    assert payload["schema_version"] == RESULTS_SCHEMA_VERSION
    assert {"id", "created", "model", "data", "config", "machine", "peaks"} <= set(payload["run"])
    assert payload["run"]["machine"]["cpu_model"] and payload["run"]["machine"]["id"]
    rows = [Row.from_dict(row) for row in payload["rows"]]
    for row in rows:
        if row.ok and row.kind == "artifact" and row.latency_comparable:
            assert row.p50 > 0 and row.accuracy.samples == 899
            low, high = row.speedup_ci
            assert low <= row.speedup <= high and row.fingerprint["id"]
        if not row.ok:
            assert row.error


def test_report_is_rebuilt_from_results_json_alone(run_dir, capsys):
    result = run_cli(capsys, "report", str(run_dir))
    assert result.code == 0, result.err
    markdown = (run_dir / "report.md").read_text()
    results = load_results(run_dir)
    baseline = next(row for row in results.rows if row.kind == "baseline")
    assert f"{baseline.p50:.3f}" in markdown  # figures come from the results
    assert "## Recommendation" in markdown and "interleaved" in markdown
    assert results.run["machine"]["cpu_model"] in markdown  # whose machine made the figures
    page = (run_dir / "report.html").read_text()
    plots = sorted(path.name for path in (run_dir / "plots").iterdir())
    assert "layers.png" in plots  # the recorded run profiled its host-CPU artifacts
    inline = page.split("<h2>Plots</h2>")[1]
    # every plot inside the page: the speed groups' chart on the first screen, the rest below
    assert inline.count("data:image/png;base64,") == len(plots) - 1 and "groups.png" in plots
    assert '<img id="groups-chart" alt="speed groups" src="data:image/png;base64,' in page
    for name in ("pareto", "latency", "size", "memory"):  # memory: the model's parts, stacked
        assert (run_dir / "plots" / f"{name}.png").stat().st_size > 10_000
    assert "## Not available on this machine" in markdown
    assert "- onnx on gpu (fp32, int8): " in markdown  # once per target and device
    summary = json.loads((run_dir / "report.json").read_text())
    assert summary["recommendation"].endswith("@ cpu x1")


def test_report_open_hands_the_page_to_the_browser_the_user_set(run_dir, tmp_path):
    import subprocess
    import sys

    # $BROWSER is the standard library's first choice; this one writes down what it was given
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(f"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])")
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s"}
    env.pop("DISPLAY", None)
    done = subprocess.run([EDGEKIT, "report", str(run_dir), "--open"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert opened.read_text() == (run_dir / "report.html").resolve().as_uri()


def test_report_says_what_quantization_changed_with_its_plots(run_dir, capsys):
    assert run_cli(capsys, "report", str(run_dir)).code == 0
    markdown = (run_dir / "report.md").read_text()
    section = markdown.split("## What quantization changed")[1].split("\n## ")[0]
    flipped = [row for row in load_results(run_dir).rows
               if row.accuracy and row.accuracy.flips["changed"]]  # fmt: skip
    assert flipped, "the recorded run has an int8 row that flipped an image"
    for row in flipped:
        flips = row.accuracy.flips
        where = row.label.rsplit(" x", 1)[0]
        assert f"- {where}: {flips['changed']} of {flips['samples']} top-1 predictions" in section
    assert "Benjamini-Hochberg" in section
    for name in ("classes", "flips"):  # drops per class and the flip-risk curve
        assert (run_dir / "plots" / f"{name}.png").stat().st_size > 10_000


def test_each_target_has_a_colour_family_and_each_recipe_a_shade():
    from matplotlib.colors import to_hex

    from edgekit.report.style import series_colours

    labels = [f"{t}/{r}" for t in ("tflite", "executorch", "onnx")
              for r in ("fp32", "fp16", "int8", "int8-dynamic")]  # fmt: skip
    colours = series_colours(labels)
    assert len({to_hex(colour) for colour in colours.values()}) == 12  # the cycle had 10
    blue, orange = colours["tflite/fp32"], colours["executorch/fp32"]
    assert blue[2] > blue[0] and orange[0] > orange[2]  # Blues for tflite, Oranges for pte


@pytest.mark.parametrize(("column", "cell", "shade"), [
    ("speed-up, this run [95% CI]", "1.50x [1.20, 1.90]", "better"),
    ("speed-up, this run [95% CI]", "1.10x [0.95, 1.30]", ""),  # the interval holds 1
    ("vs its fp32 [95% CI]", "0.62x [0.43, 0.88]", "worse"),
    ("drop [95% CI]", "+0.44 [+0.11, +0.89]", "worse"),
    ("drop [95% CI]", "+0.22 [+0.00, +0.56]", ""),  # the interval holds 0
    ("drop [95% CI]", "-0.50 [-0.90, -0.10]", "better"),
    ("top-1", "98.89 %", ""),
])  # fmt: skip
def test_a_figure_is_coloured_only_when_its_interval_excludes_the_null(column, cell, shade):
    from edgekit.report.page import significance

    assert significance(column, cell) == shade


def test_the_page_opens_with_headline_cards_and_a_sortable_filterable_table(run_dir, capsys):
    assert run_cli(capsys, "report", str(run_dir)).code == 0
    page = (run_dir / "report.html").read_text()
    summary = json.loads((run_dir / "report.json").read_text())
    cards = page.split('<div class="cards">')[1].split("</div></div></div>")[0]
    assert summary["recommendation"] in cards and "speed-up over the baseline" in cards
    how = page.split('<details class="how">')[1].split("</details>")[0]
    assert load_results(run_dir).run["machine"]["id"] in how  # the machine opens on a click
    # the first screen's decision: the speed groups' chart beside the ranked table
    assert '<div class="decision"><img id="groups-chart"' in page
    assert page.index('<div id="ranked">') < page.index('id="results-0"')
    assert summary["speed_groups"] and summary["measuring"].startswith("measured in ")
    assert '<table class="sortable" id="results-0">' in page and 'data-table="results-0"' in page
    assert "http://" not in page and "https://" not in page  # offline: nothing fetched


def test_the_page_shows_flipped_images_layer_bars_and_links_each_ruled_out_row(run_dir, capsys):
    import base64
    import re

    assert run_cli(capsys, "report", str(run_dir)).code == 0
    page = (run_dir / "report.html").read_text()
    results = load_results(run_dir)
    assert "<pre>" not in page  # every section is a list or a real table
    # the gallery: each flipped image recorded, as a PNG, with both sides' top-3
    flipped = [row for row in results.rows if row.accuracy and row.accuracy.gallery]
    assert flipped, "the recorded run has artifacts that flipped images"
    for row in flipped:
        where = row.label.rsplit(" x", 1)[0]
        tiles = page.split(f'data-artifact="{where}">')[1].split("</div></figure></div>")[0]
        for image in row.accuracy.gallery:
            assert f'alt="image {image["index"]}"' in tiles
            assert base64.b64decode(image["png"])[:8] == b"\x89PNG\r\n\x1a\n"
            name, probability = image["artifact_top3"][0]
            assert f"{name} {100 * probability:.0f}%" in tiles
    # the per-layer table: a bar per cell, each artifact's shares adding up to 100 %
    profiles = results.run["profiles"]
    for profile in profiles:
        assert sum(layer["share"] for layer in profile["layers"]) == pytest.approx(1.0)
    layer_table = page.split("<h2>Where the time goes</h2>")[1].split("<h2>")[0]
    widths = [float(w) for w in re.findall(r'class="bar" style="width:([\d.]+)%"', layer_table)]
    assert widths and all(0 <= w <= 100 for w in widths) and max(widths) > 0
    assert "scaled to the whole-model p50" in layer_table
    # every row the recommendation ruled out links to its row of the results table
    advice = recommend(results.rows, results.run["config"]["max_drop"])
    assert advice.reasons, "the recorded run has rows the recommendation ruled out"
    for label, _ in advice.reasons:
        anchor = re.search(rf'<a href="#([^"]+)">{re.escape(label)}</a>', page)
        assert anchor and f'<tr id="{anchor.group(1)}">' in page, label
    markdown = (run_dir / "report.md").read_text()
    assert "Flipped images of " in markdown and "| image | true class |" in markdown


def test_log_axes_label_their_ticks_as_plain_numbers():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from edgekit.report.style import plain_log_ticks

    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.set_xlim(0.05, 30)
    plain_log_ticks(ax.xaxis)
    fig.canvas.draw()
    labels = [tick.get_text() for tick in ax.get_xticklabels()]
    plt.close(fig)
    assert {"0.1", "1", "10"} <= set(labels) and not any("10^" in label for label in labels)


def test_report_of_a_folder_without_results(tmp_path, capsys):
    result = run_cli(capsys, "report", str(tmp_path))
    assert result.code == 2 and "no results.json" in result.err


def _recorded(run_id: str, created: str = "2026-01-01T00:00:00+00:00") -> Results:
    payload = json.loads(RECORDED.read_text())
    payload["run"]["id"], payload["run"]["created"] = run_id, created
    return Results(payload["run"], [Row.from_dict(row) for row in payload["rows"]])


def _record(args):
    path, run_id = args
    record_run(_recorded(run_id), Path("."), Path(path))


def test_history_survives_two_processes_writing_at_once(tmp_path):
    database = tmp_path / "history.sqlite"
    jobs = [(str(database), f"run-{index}") for index in range(8)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_record, jobs)
    runs = list_runs(database, limit=100)
    assert sorted(r["id"] for r in runs) == sorted(job[1] for job in jobs)
    rows = len(json.loads(RECORDED.read_text())["rows"])
    assert all(r["rows"] == rows for r in runs)
    assert all(r["machine"]["cpu_model"] for r in runs)


def _slower_run(run_dir, database, factor=1.5, cpu_model=None):
    record_run(_recorded("earlier"), run_dir, database)
    slower = _recorded("slower", "2026-02-01T00:00:00+00:00")
    for row in slower.rows:
        if row.latency:
            row.latency["p50_ms"] *= factor
        if row.memory and row.memory.status == "ok":
            row.memory = replace(row.memory, model_mb=2 * row.memory.model_mb)
        row.disturbed = False
        if cpu_model:
            row.fingerprint = dict(row.fingerprint, cpu_model=cpu_model)
    (run_dir / "results.json").write_text(json.dumps(slower.to_dict()))
    record_run(slower, run_dir, database)


def test_compare_and_the_recorded_latency_gate_against_history(run_dir, tmp_path, capsys):
    database = tmp_path / "h.sqlite"
    _slower_run(run_dir, database)
    deltas = {d["key"]: d for d in compare_runs("earlier", "slower", database)}
    assert deltas["digits-mobilenet:onnx/int8@cpux1"]["p50_change_pct"] == pytest.approx(50.0)
    # memory in the history too: the model's share, twice as large in the second run
    assert deltas["digits-mobilenet:onnx/int8@cpux1"]["model_mb_change_pct"] == pytest.approx(100)
    assert deltas["digits-mobilenet:onnx/int8@cpux1"]["a"]["peak_mb"] > 10
    assert resolve_run("last", database, exclude="slower") == "earlier"
    shown = run_cli(capsys, "compare", "earlier", "slower", "--history", str(database))
    assert shown.code == 0 and "+50.0 %" in shown.out and "+100.0 %" in shown.out
    gate = run_cli(
        capsys,
        "check",
        str(run_dir),
        "--max-latency-regression",
        "10",
        "--against",
        "last",
        "--recorded",
        "--history",
        str(database),
    )
    assert gate.code == 1 and "p50 regression" in gate.out and "not interleaved" in gate.out
    relaxed = run_cli(
        capsys,
        "check",
        str(run_dir),
        "--max-latency-regression",
        "60",
        "--max-drop",
        "1",
        "--recorded",
        "--history",
        str(database),
    )
    assert relaxed.code == 0, relaxed.out
    with pytest.raises(UserInputError, match="no run 'nope'"):
        resolve_run("nope", database)


def test_latency_from_another_machine_is_refused_unless_asked(run_dir, tmp_path, capsys):
    database = tmp_path / "h.sqlite"
    _slower_run(run_dir, database, factor=1.0, cpu_model="AMD EPYC 7B13")
    refused = run_cli(capsys, "compare", "earlier", "slower", "--history", str(database))
    assert refused.code == 2 and "cpu_model" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    labelled = run_cli(
        capsys, "compare", "earlier", "slower", "--history", str(database), "--across-machines"
    )
    assert labelled.code == 0 and "ACROSS MACHINES" in labelled.out
    gate = run_cli(
        capsys,
        "check",
        str(run_dir),
        "--max-latency-regression",
        "10",
        "--recorded",
        "--history",
        str(database),
    )
    assert gate.code == 2 and "different machines" in gate.err


def test_a_notes_cell_is_one_line_whose_details_open_on_a_click():
    from edgekit.report.page import table

    html = table(("target", "notes"), [["onnx", "DISTURBED; FALLBACK: conv1 stays float; hint"]])
    assert ('<details class="notes"><summary>DISTURBED (+2)</summary>FALLBACK: conv1 stays '
            "float; hint</details>") in html  # fmt: skip
    assert "<td>one note</td>" in table(("notes",), [["one note"]])


def test_precision_off_is_none_in_a_config_file_and_written_back_as_off(tmp_path, capsys):
    path = tmp_path / "edgekit.toml"
    assert run_cli(capsys, "run", "--precision", "off", "--budget-s", "30",
                   "--write-config", str(path)).code == 0  # fmt: skip
    assert 'precision = "off"' in path.read_text()
    config = RunConfig.from_toml(path)
    assert config.precision is None and config.bench_budget_s == 30.0
    assert config.protocol().precision is None and config.protocol().budget_s == 30.0
    assert RunConfig().protocol().precision == 0.05  # the default stopping rule


def test_config_file_round_trip(tmp_path, capsys):
    path = tmp_path / "edgekit.toml"
    written = run_cli(
        capsys,
        "run",
        "--target",
        "onnx,tflite",
        "--recipe",
        "int8",
        "--threads",
        "1,2",
        "--max-drop",
        "0.5",
        "--write-config",
        str(path),
    )
    assert written.code == 0
    config = RunConfig.from_toml(path)
    assert (config.targets, config.recipes, config.threads, config.max_drop) == (
        ["onnx", "tflite"],
        ["int8"],
        [1, 2],
        0.5,
    )
    path.write_text(path.read_text() + "colour = 'blue'\n")
    with pytest.raises(UserInputError, match="unknown option"):
        RunConfig.from_toml(path)
    bad = run_cli(capsys, "run", "--device", "phone", "--write-config", str(tmp_path / "x.toml"))
    assert bad.code == 2 and "unknown device 'phone'" in bad.err


def test_run_spells_its_options_as_export_does_and_takes_a_weights_file(tmp_path, capsys):
    path, weights = tmp_path / "edgekit.toml", tmp_path / "tiny.pt"
    weights.write_bytes(b"read when the model loads")
    written = run_cli(capsys, "run", "--target", "onnx", "--recipe", "int8", "--device", "cpu",
                      "--model", "user_models:tiny_cnn", "--weights", str(weights),
                      "--write-config", str(path))  # fmt: skip
    assert written.code == 0, written.err
    config = RunConfig.from_toml(path)
    assert (config.targets, config.recipes, config.devices) == (["onnx"], ["int8"], ["cpu"])
    assert config.weights == str(weights)
    two = run_cli(capsys, "run", "--model", "digits-mobilenet,user_models:tiny_cnn", "--weights",
                  str(weights), "--write-config", str(tmp_path / "two.toml"))  # fmt: skip
    assert two.code == 2 and "weights: applies to one model, not 2" in two.err
    assert not (tmp_path / "two.toml").exists()


def test_run_s_old_plural_spellings_still_work_with_one_line_each(tmp_path, capsys):
    path = tmp_path / "old.toml"
    old = run_cli(capsys, "run", "--targets", "onnx", "--recipes", "int8", "--devices", "cpu",
                  "--write-config", str(path))  # fmt: skip
    assert old.code == 0, old.err
    config = RunConfig.from_toml(path)
    assert (config.targets, config.recipes, config.devices) == (["onnx"], ["int8"], ["cpu"])
    said = [line for line in old.err.splitlines() if "goes in the next release" in line]
    assert said == [f"edgekit: --{name}s is now --{name}; --{name}s goes in the next release"
                    for name in ("target", "recipe", "device")]  # fmt: skip
    both = run_cli(capsys, "run", "--target", "onnx", "--targets", "tflite", "--write-config",
                   str(tmp_path / "both.toml"))  # fmt: skip
    assert both.code == 2 and "--targets and --target are one option" in both.err
    assert not (tmp_path / "both.toml").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('threads = "many"', "'threads' must be list[int]"),
        ("targets = 5", "'targets' must be list[str]"),
        ("max_drop = true", "'max_drop' must be float"),
    ],
)
def test_a_config_of_the_wrong_types_is_one_line(tmp_path, capsys, line, message):
    path = tmp_path / "edgekit.toml"
    path.write_text(f"[run]\n{line}\n")
    result = run_cli(capsys, "run", "--config", str(path))
    assert result.code == 2 and message in result.err and str(path) in result.err


def test_a_missing_device_is_unavailable_and_a_broken_one_failed():
    lacks = _failed("onnx", "fp32", "gpu", 1, DeviceUnavailable("no CUDA provider"))
    broke = _failed("onnx", "fp32", "cpu", 1, EdgekitError("the runtime crashed (SIGSEGV)"))
    assert (lacks.status, broke.status) == ("unavailable", "failed")
    assert broke.error == "the runtime crashed (SIGSEGV)"


def test_each_quantized_row_shows_its_ratio_to_the_same_targets_fp32():
    from edgekit.report.tables import COLUMNS, table_rows

    fp32, int8, other = interleaved(
        measured_row("tflite", "fp32", [0.60, 0.61, 0.59, 0.60, 0.60], 0.0, 0.3),
        measured_row("tflite", "int8", [0.30, 0.31, 0.29, 0.30, 0.30], 0.1, 0.5),
        measured_row("onnx", "int8", [0.20, 0.20, 0.21, 0.19, 0.20], 0.1, 0.5),
    )
    results = Results({"id": "x", "peaks": {}}, [fp32, int8, other])
    column = COLUMNS.index("vs its fp32 [95% CI]")
    cells = {(r[0], r[1]): r[column] for r in table_rows(results)}
    assert cells[("tflite", "int8")].startswith("2.00x [")
    assert cells[("tflite", "fp32")] == ""  # itself
    assert cells[("onnx", "int8")] == ""  # no onnx/fp32 in this pool: nothing to divide by


def test_a_results_file_of_schema_2_still_opens_in_report_compare_and_history(
    run_dir, tmp_path, capsys
):
    from edgekit.report.history import record_run

    old = tmp_path / "runs" / "20261130-000000-digits-mobilenet"
    old.mkdir(parents=True)
    shutil.copy(SCHEMA_2, old / "results.json")
    assert json.loads(SCHEMA_2.read_text())["schema_version"] == 2
    report = run_cli(capsys, "report", str(old))
    assert report.code == 0, report.err
    summary = json.loads((old / "report.json").read_text())
    # its ratios come from its rounds widened by its noise band, as the edgekit that wrote it
    # read them; the speed groups read from those
    assert summary["recommendation"] and summary["speed_groups"]
    history = tmp_path / "h.sqlite"
    for directory in (old, run_dir):
        record_run(load_results(directory), directory, history)
    listed = run_cli(capsys, "history", "--history", str(history), "--json")
    old_id = load_results(old).run["id"]
    assert listed.code == 0 and old_id in listed.out
    # recorded on other machines: compared, labelled so
    compared = run_cli(capsys, "compare", old_id, load_results(run_dir).run["id"], "--history",
                       str(history), "--across-machines", "--json")  # fmt: skip
    assert compared.code == 0, compared.err
