"""``edgekit run --cluster``: a two-node Ray cluster on loopback, inside a network namespace of
its own so nothing listens beyond 127.0.0.1 (see tests/cluster_scenario.py, which drives the CLI
as a user would and records what each step saw). The second node advertises a stand-in adb
phone; the head has the host CPU. The cluster run measures the zoo model and a user's model
whose module only the driver can import.

The last tests need no cluster: what the driver ships with a user's model, and how a node
loads it."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from cli_helpers import error_lines

HERE = Path(__file__).parent


def _unshare_works() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    return None if done.returncode == 0 else f"unshare -n is not permitted here: {done.stderr}"


# no timing mark: the scenario's runs turn the noise guard off (they test plumbing, not figures),
# so its minutes of waiting on Ray overlap with other tests
pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> dict:
    if _unshare_works() is not None:
        pytest.skip(str(_unshare_works()))
    out = tmp_path_factory.mktemp("cluster")
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "cluster_scenario.py", str(out)],
        cwd=HERE, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "scenario.json").read_text())


def _short(node_id: str) -> str:
    return node_id[:12]


def _node_names(scenario: dict) -> set[str]:
    """How rows name the cluster's nodes (host/id): both run on this machine."""
    return {f"{socket.gethostname()}/{_short(node['id'])}" for node in scenario["status"]}


@pytest.mark.cluster
def test_each_node_advertises_its_devices(scenario):
    nodes = scenario["status"]
    assert len(nodes) == 2
    phones = [n for n in nodes if "edgekit_adb_emulator-5554" in n["edgekit"]]
    assert len(phones) == 1
    for node in nodes:
        assert "edgekit_device_cpu" in node["edgekit"]
        assert any(key.startswith("edgekit_fp_") for key in node["edgekit"])
        assert node["edgekit"]["edgekit_bench_slot"] == 1


@pytest.mark.cluster
def test_android_rows_run_on_the_node_with_the_phone(scenario):
    run = scenario["cluster_run"]
    assert run["code"] == 0, run["err"]
    phone = next(n for n in scenario["status"] if "edgekit_adb_emulator-5554" in n["edgekit"])
    assert {row["device"] for row in run["rows"]} == {"cpu", "android"}  # rows of both to place
    for row in run["rows"]:
        assert row["status"] == "ok"
        on_phone = row["node"].endswith(_short(phone["id"]))
        assert on_phone == (row["device"] == "android"), row["node"]


@pytest.mark.cluster
def test_the_cluster_run_has_the_rows_a_local_run_has(scenario):
    def content(row: dict) -> tuple:
        return (row["model"], row["target"], row["recipe"], row["device"], row["threads"],
                row["status"], row.get("accuracy"), row["size_bytes"])  # fmt: skip

    cluster = sorted(content(r) for r in scenario["cluster_run"]["rows"])
    local = sorted(content(r) for r in scenario["local_run"]["rows"])
    assert cluster == local


@pytest.mark.cluster
def test_a_model_only_the_driver_can_import_runs_on_every_node(scenario):
    run = scenario["cluster_run"]
    assert run["code"] == 0, run["err"]
    phone = next(n for n in scenario["status"] if "edgekit_adb_emulator-5554" in n["edgekit"])
    mine = [row for row in run["rows"] if row["model"] == "tiny_cnn"]
    measured = sorted((row["kind"], row["device"], row["threads"]) for row in mine)
    assert measured == [("artifact", "android", 1), ("artifact", "cpu", 1), ("baseline", "cpu", 1)]
    assert all(row["status"] == "ok" for row in mine), [row["error"] for row in mine]
    # the phone's pool loads the model (for its dataset) on the node that never had the module
    android = next(row for row in mine if row["device"] == "android")
    assert android["node"].endswith(_short(phone["id"]))


@pytest.mark.cluster
def test_a_node_that_cannot_import_a_model_says_which_node_and_what_to_copy(scenario):
    result = scenario["cannot_import"]
    assert result["code"] == 1, result["err"]
    # labelled with the devices and threads the export's artifact was to run on
    assert sorted(result["failed"]) == ["tflite/fp32 @ android x1", "tflite/fp32 @ cpu x1"]
    for row in result["rows"]:
        assert row["status"] == "failed" and row["stage"] == "export"
        assert row["node"] in _node_names(scenario)
        assert f"No module named 'driver_only_helper') on node {row['node']}" in row["error"]
        helper = HERE / "cluster_user_model" / "elsewhere" / "driver_only_helper.py"
        assert f"copy {helper} there and add its folder to PYTHONPATH" in row["error"]
    assert len(error_lines(result["err"])) == 1


@pytest.mark.cluster
def test_benchmarks_never_overlap_on_a_node(scenario):
    # one pool per model on each node, timed one after the other
    windows: dict[str, set[tuple[str, str]]] = {}
    for row in scenario["cluster_run"]["rows"]:
        windows.setdefault(row["node"], set()).add((row["bench_started"], row["bench_finished"]))
    assert sorted(len(spans) for spans in windows.values()) == [2, 2], windows
    for spans in windows.values():
        ordered = sorted((datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in spans)
        for (_, end), (start, _) in itertools.pairwise(ordered):
            assert end <= start


@pytest.mark.cluster
def test_a_killed_node_takes_only_its_rows_down(scenario):
    killed = scenario["killed_run"]
    assert killed["pushed"], "the node was killed before the phone's pool ran"
    assert killed["code"] == 1 and "rows" in killed, (killed["out_head"], killed["err"])
    by_device = {row["device"]: row for row in killed["rows"]}
    assert by_device["cpu"]["status"] == "ok"
    assert by_device["android"]["status"] == "failed"
    assert "node died" in by_device["android"]["error"]
    assert len(error_lines(killed["err"])) == 1


@pytest.mark.cluster
def test_ctrl_c_cancels_the_run_and_leaves_no_run_directory(scenario):
    interrupted = scenario["interrupted"]
    # the supervisor exits 130 on any Ctrl-C: the run must have reached the phone's pool first
    assert interrupted["pushed"], "Ctrl-C came before the phone's pool ran"
    assert interrupted["code"] == 130, interrupted["err"]
    assert interrupted["left"] == []


@pytest.mark.cluster
def test_resume_runs_only_what_is_missing(scenario):
    resumed, killed = scenario["resumed"], scenario["killed_run"]
    assert resumed["code"] == 0, resumed["err"]
    measured = sorted((row["kind"], row["device"]) for row in resumed["rows"])
    assert measured == [("artifact", "android"), ("artifact", "cpu"), ("baseline", "cpu")]
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
@pytest.mark.cluster
def test_bad_cluster_input_is_one_line_and_exit_2(scenario, case, says):
    result = scenario[case]
    assert result["code"] == 2, result["err"]
    lines = error_lines(result["err"])
    assert len(lines) == 1 and says in lines[0], result["err"]
    assert "Traceback" not in result["err"]


@pytest.mark.cluster
def test_stop_leaves_no_process_edgekit_started(scenario):
    assert scenario["stop"]["code"] == 0
    assert scenario["stop"]["pids"]
    assert scenario["stop"]["alive"] == []


def test_stop_kills_a_node_that_outlives_its_grace():
    """edgekit's nodes end on SIGTERM at once (start_node turns Ray's drain off); one that does
    not (a node started by hand waits up to 30 s for its raylet to drain) is SIGKILLed, with its
    whole process group, once stop's grace is over."""
    from edgekit.cluster.nodes import stop_processes

    ignores_sigterm = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print(child.pid, flush=True); time.sleep(120)"
    )
    node = subprocess.Popen([sys.executable, "-c", ignores_sigterm], start_new_session=True,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    child = int(node.stdout.readline())  # its handler in place, and a process in its group
    stop_processes([node.pid], grace_s=0.5)
    assert node.wait(timeout=30) == -signal.SIGKILL
    stat = Path(f"/proc/{child}/stat")
    for _ in range(300):  # a SIGKILLed process is gone (or a zombie) once the kernel is done
        with contextlib.suppress(FileNotFoundError):
            if stat.read_text().rpartition(")")[2].split()[0] != "Z":
                time.sleep(0.1)
                continue
        break
    else:
        raise AssertionError(f"pid {child} of the node's group outlived stop")


# -- what the driver ships, without a cluster -------------------------------------------------


def test_a_users_package_ships_with_the_modules_it_imported_beside_it(tmp_path, monkeypatch):
    from edgekit.cluster.shipping import code_to_ship

    project = tmp_path / "project"
    (project / "shipme_pkg").mkdir(parents=True)
    (project / "shipme_pkg" / "__init__.py").write_text("from shipme_helper import WIDTH\n")
    (project / "shipme_helper.py").write_text("WIDTH = 4\n")
    (project / "unused_here.py").write_text("")  # not imported: not shipped
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delitem(sys.modules, "shipme_pkg", raising=False)
    monkeypatch.delitem(sys.modules, "shipme_helper", raising=False)
    __import__("shipme_pkg")
    try:
        shipped = code_to_ship(["shipme_pkg.models:build"])
    finally:
        del sys.modules["shipme_pkg"], sys.modules["shipme_helper"]
    project = project.resolve()
    assert shipped == [str(project / "shipme_pkg"), str(project / "shipme_helper.py")]


def test_installed_code_zoo_models_and_model_files_ship_nothing():
    import numpy.random  # noqa: F401 (imported, as a factory's module is once it is loaded)

    from edgekit.cluster.shipping import code_to_ship

    specs = ["numpy.random:rand", "zoo:digits-mobilenet", "digits-mobilenet", "model.pt2",
             "edgekit.sources.zoo:build"]  # fmt: skip
    assert code_to_ship(specs) == []


def test_a_node_without_an_installed_package_is_told_the_version_to_install():
    from importlib.metadata import version

    from edgekit.cluster.shipping import install_hint

    hint = install_hint("numpy", shipped=[])
    assert hint == (
        f"install it there: pip install numpy=={version('numpy')} into the Python of "
        "`edgekit cluster join`"
    )


def test_a_node_loads_the_weights_file_the_driver_sent(tmp_path):
    import torch
    from user_models import tiny_cnn

    from edgekit.cluster.shipping import localized, with_source_options
    from edgekit.sources.load import load_model, reload_model
    from edgekit.targets.manifest import Manifest

    trained = tiny_cnn()
    with torch.no_grad():
        trained.fc.weight.mul_(2)  # not the factory's own initial weights
    on_driver = tmp_path / "driver" / "tiny.pt"
    on_driver.parent.mkdir()
    torch.save(trained.state_dict(), on_driver)
    source = load_model("user_models:tiny_cnn", weights=on_driver)
    model = {"spec": source.spec, "load_options": source.load_options}
    sent = on_driver.read_bytes()
    on_driver.unlink()  # another machine: no such file there

    on_node = reload_model(localized(model, sent, tmp_path / "node"))
    assert on_node.digest == source.digest
    assert Path(on_node.load_options["weights"]).read_bytes() == sent
    # the artifact that comes back names the driver's file, as a local run's manifest does
    manifest = with_source_options(
        Manifest({"source": on_node.to_manifest()}), model["load_options"]
    )
    assert manifest.source.load_options["weights"] == str(on_driver)
