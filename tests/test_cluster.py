"""``edgekit run --cluster``: a two-node Ray cluster on loopback, inside a network namespace of
its own so nothing listens beyond 127.0.0.1 (see tests/cluster_scenario.py, which drives the CLI
as a user would and records what each step saw). The second node advertises a stand-in adb
phone; the head has the host CPU."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _unshare_works() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    return None if done.returncode == 0 else f"unshare -n is not permitted here: {done.stderr}"


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_unshare_works() is not None, reason=str(_unshare_works())),
]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("cluster")
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "cluster_scenario.py", str(out)],
        cwd=HERE, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "scenario.json").read_text())


def _edgekit_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("edgekit: error:")]


def _short(node_id: str) -> str:
    return node_id[:12]


def test_each_node_advertises_its_devices(scenario):
    nodes = scenario["status"]
    assert len(nodes) == 2
    phones = [n for n in nodes if "edgekit_adb_emulator-5554" in n["edgekit"]]
    assert len(phones) == 1
    for node in nodes:
        assert "edgekit_device_cpu" in node["edgekit"]
        assert any(key.startswith("edgekit_fp_") for key in node["edgekit"])
        assert node["edgekit"]["edgekit_bench_slot"] == 1


def test_android_rows_run_on_the_node_with_the_phone(scenario):
    run = scenario["cluster_run"]
    assert run["code"] == 0, run["err"]
    phone = next(n for n in scenario["status"] if "edgekit_adb_emulator-5554" in n["edgekit"])
    for row in run["rows"]:
        assert row["status"] == "ok"
        on_phone = row["node"].endswith(_short(phone["id"]))
        assert on_phone == (row["device"] == "android"), row["node"]


def test_the_cluster_run_has_the_rows_a_local_run_has(scenario):
    def content(row: dict) -> tuple:
        return (row["model"], row["target"], row["recipe"], row["device"], row["threads"],
                row["status"], row.get("accuracy"), row["size_bytes"])  # fmt: skip

    cluster = sorted(content(r) for r in scenario["cluster_run"]["rows"])
    local = sorted(content(r) for r in scenario["local_run"]["rows"])
    assert cluster == local


def test_benchmarks_never_overlap_on_a_node(scenario):
    windows: dict[str, set[tuple[str, str]]] = {}
    for row in scenario["cluster_run"]["rows"]:
        windows.setdefault(row["node"], set()).add((row["bench_started"], row["bench_finished"]))
    for spans in windows.values():
        ordered = sorted((datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in spans)
        for (_, end), (start, _) in itertools.pairwise(ordered):
            assert end <= start


def test_a_killed_node_takes_only_its_rows_down(scenario):
    killed = scenario["killed_run"]
    assert killed["code"] == 1, killed["err"]
    by_device = {row["device"]: row for row in killed["rows"]}
    assert by_device["cpu"]["status"] == "ok"
    assert by_device["android"]["status"] == "failed"
    assert "node died" in by_device["android"]["error"]
    assert len(_edgekit_lines(killed["err"])) == 1


def test_ctrl_c_cancels_the_run_and_leaves_no_run_directory(scenario):
    interrupted = scenario["interrupted"]
    assert interrupted["code"] == 130, interrupted["err"]
    assert interrupted["left"] == []


def test_resume_runs_only_what_is_missing(scenario):
    resumed, killed = scenario["resumed"], scenario["killed_run"]
    assert resumed["code"] == 0, resumed["err"]
    assert all(row["status"] == "ok" for row in resumed["rows"])
    before = {(r["device"], r["recipe"]): r for r in killed["rows"]}
    for row in resumed["rows"]:
        if row["device"] == "cpu":  # kept as the killed run measured it
            assert row["bench_started"] == before[("cpu", row["recipe"])]["bench_started"]
        else:
            assert row["bench_started"] is not None


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("no_such_device", "no node of the cluster has device android"),
        ("unreachable", "127.0.0.1:1: no Ray head answers there"),
        ("other_version", "runs edgekit 0.0.1"),
    ],
)
def test_bad_cluster_input_is_one_line_and_exit_2(scenario, case, says):
    result = scenario[case]
    assert result["code"] == 2, result["err"]
    lines = _edgekit_lines(result["err"])
    assert len(lines) == 1 and says in lines[0], result["err"]
    assert "Traceback" not in result["err"]


def test_stop_leaves_no_process_edgekit_started(scenario):
    assert scenario["stop"]["code"] == 0
    assert scenario["stop"]["pids"]
    assert scenario["stop"]["alive"] == []
