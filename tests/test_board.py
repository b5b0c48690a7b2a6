"""An edge board over SSH, as a user meets one: ``edgekit device setup``, ``run``, ``eval``,
``check`` and ``bench`` against ``ssh://board``, and the faults of a board on a desk (not
reachable, a key it refuses, no Python, a hang, Ctrl-C, the cable pulled mid-run). The board is
Debian's sshd on loopback in a network namespace of its own whose login runs an aarch64 CPython
under QEMU (scripts/loopback_board.py): real ssh, real aarch64 wheels and outputs, QEMU's speed.

Marked ``board``: it needs openssh-server (scripts/install-openssh-server.sh), ``unshare -n``
and the ExecuTorch userland of the emulated ARM64 device (``edgekit device setup arm64-emu
--with-pte``); CI requires it (EDGEKIT_TEST_REQUIRE)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import error_lines

from edgekit.devices import get_device
from edgekit.devices.ssh.board import Board
from edgekit.devices.ssh.connection import _ssh_failure
from edgekit.devices.ssh.fingerprint import Fingerprint
from edgekit.errors import UserInputError

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow]


def _board_missing() -> str | None:
    from edgekit.devices.arm64_emu.emulator import DeviceUnavailable, load_device

    if not Path("/usr/sbin/sshd").exists():
        return "Debian's openssh-server is not installed (scripts/install-openssh-server.sh)"
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if done.returncode != 0:
        return f"unshare -n is not permitted here: {done.stderr.strip()}"
    try:
        if not load_device().facts.get("pte"):
            return "the arm64 ExecuTorch userland is not set up (device setup arm64-emu --with-pte)"
    except DeviceUnavailable as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> dict:
    why = _board_missing()
    if why:
        pytest.skip(why)
    out, folder = tmp_path_factory.mktemp("board-out"), tmp_path_factory.mktemp("board")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "loopback_board.py"), str(folder), "--",
         sys.executable, str(ROOT / "tests" / "board_scenario.py"), str(out)],
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    found = out / "scenario.json"
    assert found.exists(), done.stderr[-3000:]
    steps = json.loads(found.read_text())
    assert done.returncode == 0, (done.stderr[-3000:], steps)
    return steps


@pytest.mark.board
def test_setup_installs_the_runtimes_once_and_says_what_it_did(scenario):
    first, again = scenario["setup"], scenario["setup_again"]
    assert first["rc"] == 0 and again["rc"] == 0
    assert "aarch64" in first["stderr"] and "emulated" in first["stderr"]
    assert "ready" in first["stderr"]
    assert "already installed" in again["stderr"]
    doctor = json.loads(scenario["doctor"]["stdout"])
    assert doctor["ready"] and doctor["machine"] == "aarch64" and doctor["emulated"]
    assert doctor["runtimes"]["onnxruntime"] and doctor["runtimes"]["executorch-numpy-runtime"]


@pytest.mark.board
def test_a_run_on_the_board_gives_latency_accuracy_and_drop_from_the_board(scenario):
    assert scenario["run"]["rc"] == 0, scenario["run"]["stderr"]
    rows = [row for row in scenario["first_rows"] if row["kind"] == "artifact"]
    assert {row["target"] for row in rows} == {"tflite", "executorch", "onnx"}
    for row in rows:
        assert row["status"] == "ok" and row["device"] == "ssh://board"
        assert row["latency"]["p50_ms"] > 0
        assert row["accuracy"]["top1"] > 0.5 and row["accuracy"]["drop_ci"]
        assert row["accuracy"]["per_class"] and "flips" in row["accuracy"]
        board = row["runtime"]["board"]  # the board's own fingerprint, not the host's
        assert board["machine"] == "aarch64" and board["cores"] >= 1 and board["kernel"]
        assert board["runtimes"]["numpy"] and board["python"].startswith("3.13")
        assert row["traits"]["where"] == "remote" and not row["traits"]["latency_comparable"]
    assert not [row for row in scenario["first_rows"] if row["kind"] == "baseline"]


@pytest.mark.board
def test_a_second_run_pushes_nothing(scenario):
    assert "ssh://board: pushed 0" not in scenario["run"]["stderr"]
    assert "ssh://board: pushed" in scenario["run"]["stderr"]
    assert scenario["run_again"]["rc"] == 0
    assert "ssh://board: pushed nothing" in scenario["run_again"]["stderr"]


@pytest.mark.board
def test_eval_check_and_bench_measure_on_the_board(scenario):
    evaluated = json.loads(scenario["eval"]["stdout"])
    record = evaluated[0] if isinstance(evaluated, list) else evaluated
    assert record["device"] == "ssh://board" and record["top1"] > 0.9
    assert scenario["check"]["rc"] == 0, scenario["check"]["stderr"]
    assert scenario["bench"]["rc"] == 0, scenario["bench"]["stderr"]
    benched = json.loads(scenario["bench"]["stdout"])
    records = benched if isinstance(benched, list) else benched["records"]
    assert {r["device"] for r in records} == {"ssh://board"} and len(records) == 2


@pytest.mark.board
@pytest.mark.parametrize("suffix", ["tflite", "onnx", "pte"])
def test_a_golden_bundle_made_here_passes_on_the_board(scenario, suffix):
    made, checked = scenario[f"golden_{suffix}"], scenario[f"golden_check_{suffix}"]
    assert made["rc"] == 0, made["stderr"]
    assert checked["rc"] == 0, checked["stderr"]
    result = json.loads(checked["stdout"])
    # the board staged the decoded images as the bundle did and its aarch64 outputs agree
    assert result["passed"] and result["inputs_match"] and result["same_file"]
    assert result["device"].startswith("ssh://") and len(result["per_image_max_abs_diff"]) == 8


@pytest.mark.board
def test_tune_searches_on_the_board_and_writes_its_winner_for_it(scenario):
    step = scenario["tune"]
    assert step["rc"] == 0, step["stderr"]
    assert step["manifest"]["tuned"]["device"] == "ssh://board"
    assert step["workers_after"] == []


@pytest.mark.board
def test_an_unreachable_board_and_a_refused_key_are_one_line_exit_2(scenario):
    for name, words in (("unreachable", "unreachable"), ("refused", "authentication refused")):
        step = scenario[name]
        assert step["rc"] == 2, step["stderr"]
        errors = error_lines(step["stderr"])
        assert len(errors) == 1 and words in errors[0]


@pytest.mark.board
def test_a_board_without_python_names_the_fix(scenario):
    step = scenario["no_python"]
    errors = error_lines(step["stderr"])
    assert step["rc"] == 2 and len(errors) == 1
    assert "no Python '/opt/no-such/python3'" in errors[0]
    assert "edgekit device setup bare" in errors[0]


@pytest.mark.board
def test_a_hanging_board_is_answered_by_the_timeout_and_left_clean(scenario):
    step = scenario["hang"]
    assert step["rc"] == 1 and "timed out after 10 s" in step["stderr"]
    assert step["workers_after"] == []


@pytest.mark.board
def test_ctrl_c_ends_the_board_s_workers_before_edgekit_exits(scenario):
    step = scenario["ctrl_c"]
    assert step["fired"] and step["rc"] == 130
    # by construction, not by a clock: when edgekit has exited, nothing of it runs on the board
    # (how long that took is the scenario's record, board_clear_after_s, not a test's bound)
    assert step["workers_after"] == []


@pytest.mark.board
def test_a_dropped_connection_keeps_the_measured_rows_and_resume_finishes(scenario):
    dropped, resumed = scenario["dropped"], scenario["resume"]
    assert dropped["fired"] and dropped["rc"] == 1, dropped["stderr"]
    by_threads = {row["threads"]: row for row in dropped["rows"] if row["kind"] == "artifact"}
    assert by_threads[1]["status"] == "ok"
    assert by_threads[2]["status"] != "ok" and "ssh://board" in by_threads[2]["error"]
    assert resumed["rc"] == 0, resumed["stderr"]
    artifact_rows = [row for row in resumed["rows"] if row["kind"] == "artifact"]
    after = {row["threads"]: row for row in artifact_rows}
    assert len(artifact_rows) == 2  # the row of 1 thread is kept, not measured again
    assert after[1]["latency"] == by_threads[1]["latency"]
    assert after[2]["status"] == "ok"
    assert dropped["workers_after"] == [] and resumed["workers_after"] == []


# -- without a board: names, tables and OpenSSH's words ------------------------------------------


def test_a_board_address_is_ssh_user_host_port():
    board = Board.parse("ssh://pi@raspberrypi.local:2222")
    assert (board.host, board.user, board.port) == ("raspberrypi.local", "pi", 2222)
    assert board.ssh_options()[:4] == ["-p", "2222", "-l", "pi"] or "-F" in board.ssh_options()
    assert Board.parse("ssh://pi5").host == "pi5"  # an alias of ~/.ssh/config
    assert get_device("ssh://pi5").name == "ssh://pi5"


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("ssh://", "no host"),
        ("ssh://pi:secret@pi5", "no passwords"),
        ("ssh://pi5:99999", "port"),
        ("ssh://pi5/home", "only ssh://"),
    ],
)
def test_a_wrong_address_is_one_line_naming_it(address, words):
    with pytest.raises(UserInputError, match=words):
        Board.parse(address)


def test_a_board_table_is_checked_key_by_key(tmp_path):
    source = tmp_path / "edgekit.toml"
    board = Board.from_table(
        "pi5", {"host": "10.0.0.5", "port": 22, "python": "python3.11"}, source
    )
    assert board.name == "pi5" and board.python == "python3.11"
    with pytest.raises(UserInputError, match=r"edgekit.toml: \[devices.pi5\] has no key 'hots'"):
        Board.from_table("pi5", {"hots": "x"}, source)
    with pytest.raises(UserInputError, match="port must be a int"):
        Board.from_table("pi5", {"host": "x", "port": "22"}, source)


@pytest.mark.parametrize(
    ("stderr", "words"),
    [
        ("root@127.0.0.1: Permission denied (publickey).", "authentication refused"),
        ("ssh: connect to host 10.0.0.9 port 22: No route to host", "unreachable"),
        ("Host key verification failed.", "host key is unknown or changed"),
    ],
)
def test_openssh_s_own_words_become_one_line(stderr, words):
    board = Board.parse("ssh://pi5")
    assert words in str(_ssh_failure(board, stderr))


def _fingerprint(**changes) -> Fingerprint:
    facts = dict(board="ssh://pi5", cpu_model="Raspberry Pi 5", cores=4, kernel="6.6",
                 machine="aarch64", shell_machine="aarch64", python="3.11.2")  # fmt: skip
    return Fingerprint(**{**facts, **changes})


def test_a_32_bit_arm_board_or_an_old_python_is_refused_by_name():
    assert _fingerprint().refusal() is None and not _fingerprint().emulated
    assert "armv7l board is not supported" in _fingerprint(machine="armv7l").refusal()
    assert "Python 3.9.2 on the board" in _fingerprint(python="3.9.2").refusal()
    assert _fingerprint(shell_machine="x86_64").emulated


def test_in_a_cluster_a_board_s_pool_runs_on_the_driver_s_node():
    from edgekit.cluster.executor import ClusterExecutor
    from edgekit.run.config import RunConfig

    cluster = object.__new__(ClusterExecutor)  # its node table only: no Ray here
    cluster.here = "driver"
    cluster.nodes = [{"NodeID": "other", "Resources": {"edgekit_device_cpu": 1.0}},
                     {"NodeID": "driver", "Resources": {"edgekit_device_cpu": 1.0}}]  # fmt: skip
    config = RunConfig(devices=["ssh://pi5"])
    assert cluster.node_for("ssh://pi5", config)["NodeID"] == "driver"
