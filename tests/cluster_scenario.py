"""A two-node Ray cluster on loopback, driven through the CLI as a user would, run by
tests/test_cluster.py inside a network namespace of its own (``unshare -n``), where 127.0.0.1
is the only address: Ray binds every interface it finds (ray-project/ray#26293), so nothing
here listens beyond loopback. Writes what each step saw to OUT/scenario.json.

The cluster run has two models: the default zoo model and a user's own (tests/cluster_user_model:
a module on the driver's PYTHONPATH only, never on the nodes'), as a user runs
``--model zoo:digits-mobilenet,driver_only_net:tiny_cnn``.

Steps that do not depend on each other overlap: the local run and the unreachable head's run
go on while the cluster starts (neither needs it), and the phone's second node joins while the
other-version node starts. Membership is polled through the GCS (Ray's own node table, what
``edgekit cluster status`` reads), not by a CLI process per poll.

    unshare -n python tests/cluster_scenario.py OUT"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cli_helpers import EDGEKIT, QUICK_BENCH
from stand_ins import stand_in_adb_env

# plumbing, not a measurement: without the noise guard the scenario may run beside other tests
PLUMBING = Path(tempfile.mkdtemp(prefix="ek-scenario-")) / "edgekit.toml"
PLUMBING.write_text("[run]\nnoise_guard = false\n")
MATRIX = ["--config", str(PLUMBING), "--target", "tflite", "--recipe", "fp32", "--no-profile",
          *QUICK_BENCH]  # fmt: skip
# a user's project: its model module (with a helper beside it), and a folder of other code
USER = Path(__file__).resolve().parent / "cluster_user_model"
USER_MODEL = "driver_only_net:tiny_cnn"
TWO_MODELS = ["--model", f"zoo:digits-mobilenet,{USER_MODEL}"]
# its model that needs a module from another folder, which edgekit does not ship
UNSHIPPED_MODEL = "driver_only_broken:tiny_cnn"


def loopback_up() -> None:
    """``ip link set lo up``, without needing iproute2: SIOCGIFFLAGS / SIOCSIFFLAGS."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, 0x8913, request))[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH", b"lo", flags | 0x1))


STEP_SECONDS: list[list] = []  # each command's wall time, written beside what it saw


def edgekit(*args: str, env: dict | None = None, check: bool = False) -> dict:
    started = time.monotonic()
    done = subprocess.run([EDGEKIT, *args], capture_output=True, text=True, env=env, timeout=600)
    STEP_SECONDS.append([" ".join(args[:2]), round(time.monotonic() - started, 1)])
    if check and done.returncode != 0:
        raise SystemExit(f"edgekit {' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return {"code": done.returncode, "out": done.stdout, "err": done.stderr}


def edgekit_beside(*args: str, env: dict) -> Callable[[], dict]:
    """``edgekit(*args)`` started now, running beside the next steps; call what this returns
    for its result. Its output goes to files (a pipe left unread could fill and stall it)."""
    started = time.monotonic()
    out, err = (PLUMBING.parent / f"beside-{len(BESIDE)}.{name}" for name in ("out", "err"))
    with out.open("w") as out_file, err.open("w") as err_file:
        process = subprocess.Popen([EDGEKIT, *args], stdout=out_file, stderr=err_file, env=env)
    BESIDE.append(process)

    def waited() -> None:  # its own wall time, not when the scenario looked
        process.wait()
        STEP_SECONDS.append(
            [" ".join(args[:2]) + " (beside)", round(time.monotonic() - started, 1)]
        )

    waiter = threading.Thread(target=waited, daemon=True)
    waiter.start()

    def result() -> dict:
        waiter.join(timeout=600)
        return {"code": process.returncode, "out": out.read_text(), "err": err.read_text()}

    return result


BESIDE: list[subprocess.Popen] = []  # stopped in main's finally, should a step fail before


def rows_of(result: dict) -> list[dict]:
    summary = json.loads(result["out"])
    return json.loads((Path(summary["run_dir"]) / "results.json").read_text())["rows"]


def _summary(result: dict) -> dict:
    finished = result["code"] in (0, 1) and result["out"].strip()
    rows = rows_of(result) if finished else []
    failed = json.loads(result["out"])["failed"] if finished else []  # the rows' labels
    return {"code": result["code"], "err": result["err"][-2000:], "rows": rows, "failed": failed}


def worker_pids(state: Path) -> list[int]:
    return [json.loads(p.read_text())["pid"] for p in state.glob("*.json")
            if json.loads(p.read_text())["role"] == "worker"]  # fmt: skip


def _wait_for_push(log: Path, limit_s: float = 60) -> bool:
    """Until the stand-in phone receives its first file: the android pool is running. Whether it
    did, for the test to check (a step that never reached the phone proves nothing about it)."""
    deadline = time.monotonic() + limit_s
    while "push" not in log.read_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def live_nodes(address: str) -> list[dict[str, float]]:
    """The edgekit resources of each live node, from the GCS's node table: what ``edgekit
    cluster status`` lists, without a CLI process and a Ray driver per look."""
    from ray._raylet import GcsClient
    from ray.core.generated.gcs_pb2 import GcsNodeInfo

    client = GcsClient(address=address)
    alive = client.get_all_node_info(timeout=5, state_filter=GcsNodeInfo.GcsNodeState.ALIVE)
    return [{k: v for k, v in node.resources_total.items() if k.startswith("edgekit_")}
            for node in alive.values()]  # fmt: skip


def wait_for_nodes(
    address: str,
    count: int,
    limit_s: float = 90,
    having: tuple[str, ...] = (),
    without: tuple[str, ...] = (),
) -> float:
    """Seconds until the head lists ``count`` live nodes (each of ``having`` advertised by one
    of them, none advertising any of ``without``): Ray notices a SIGKILLed node by its missed
    health checks, not at once."""
    started = time.monotonic()
    nodes: list[dict] = []
    while time.monotonic() - started < limit_s:
        try:
            nodes = live_nodes(address)
        except Exception as exc:  # the head not answering yet: look again
            nodes = [{"error": repr(exc)}]
        if (len(nodes) == count and all(any(k in n for n in nodes) for k in having)
                and not any(k in n for n in nodes for k in without)):  # fmt: skip
            return time.monotonic() - started
        time.sleep(0.1)
    raise SystemExit(
        f"the cluster at {address} did not reach {count} node(s) "
        f"{'with ' + ', '.join(having) if having else ''} in {limit_s} s: {nodes}"
    )


def main(out: Path) -> None:
    loopback_up()
    state = out / "state"
    base = {
        **os.environ,
        "EDGEKIT_CLUSTER_DIR": str(state),
        "RAY_USAGE_STATS_ENABLED": "0",
        # Ray's GCS notices a dead node by missed health checks (by default about 15 s or more
        # after a SIGKILL); on loopback a check answers in microseconds, so check often. The
        # names are RayConfig entries of the pinned Ray, each settable as RAY_<name>.
        "RAY_health_check_initial_delay_ms": "0",
        "RAY_health_check_period_ms": "500",
        # generous enough for a node on a machine busy with other tests
        "RAY_health_check_timeout_ms": "2000",
        "RAY_health_check_failure_threshold": "3",
    }
    adb = stand_in_adb_env(out / "phone")
    phone = {**base, **adb}
    # the nodes' environments (base, phone) lack the user's project: only the driver has it
    driver = {**base, "PYTHONPATH": str(USER / "project")}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    seen: dict = {"address": address}
    runs = ["--runs-dir", str(out / "runs"), "--history", str(out / "h.sqlite"), "--json"]
    # the local run has a folder and history of its own: it runs beside the cluster's runs
    local_runs = ["--runs-dir", str(out / "local-runs"), "--history", str(out / "local.sqlite"),
                  "--json"]  # fmt: skip
    try:
        # neither needs the cluster: they run while it starts (the local run reads the phone's
        # adb log's pushes too, and is over before the log is cleared below)
        unreachable = edgekit_beside("run", "--cluster", "127.0.0.1:1", *MATRIX, *runs, env=base)
        local_env = {**phone, "PYTHONPATH": driver["PYTHONPATH"]}
        local = edgekit_beside("run", "--device", "cpu,android", *TWO_MODELS, *MATRIX,
                               *local_runs, env=local_env)  # fmt: skip
        started = time.monotonic()
        edgekit("cluster", "start", "--head", "--port", str(port), "--num-cpus", "1", env=base,
                check=True)  # fmt: skip
        edgekit("cluster", "join", address, "--num-cpus", "1", env=phone, check=True)
        wait_for_nodes(address, 2, having=("edgekit_adb_emulator-5554",))
        seen["start_s"] = time.monotonic() - started
        seen["status"] = json.loads(edgekit("cluster", "status", address, "--json", env=base,
                                            check=True)["out"])  # fmt: skip
        # the matrix on the cluster (the same matrix's local run is under way beside it)
        clustered = edgekit("run", "--cluster", address, "--device", "cpu,android", *TWO_MODELS,
                            *MATRIX, *runs, env=driver)  # fmt: skip
        seen["cluster_run"] = _summary(clustered)
        # a model that needs code from beyond its folder: the nodes cannot import it
        both = os.pathsep.join([driver["PYTHONPATH"], str(USER / "elsewhere")])
        elsewhere = {**driver, "PYTHONPATH": both}
        unshipped = edgekit("run", "--cluster", address, "--device", "cpu,android", "--model",
                            UNSHIPPED_MODEL, *MATRIX, *runs, env=elsewhere)  # fmt: skip
        seen["cannot_import"] = _summary(unshipped)
        seen["local_run"] = _summary(local())
        seen["unreachable"] = unreachable()
        # Ctrl-C while the phone's pool runs: the tasks cancelled, no run directory left
        log, hold = Path(adb["ADB_LOG"]), Path(adb["ADB_RUNNER_HOLD"])
        log.write_text("")
        hold.touch()  # the phone's runner holds until Ctrl-C has landed: no race with the run
        before = set((out / "runs").iterdir())
        command = [EDGEKIT, "run", "--cluster", address, "--device", "cpu,android", *MATRIX]
        began = time.monotonic()
        running = subprocess.Popen([*command, *runs], env=base, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        pushed = _wait_for_push(log)
        running.send_signal(signal.SIGINT)
        _, err_text = running.communicate(timeout=60)
        hold.unlink()
        STEP_SECONDS.append(["run --cluster (Ctrl-C)", round(time.monotonic() - began, 1)])
        seen["interrupted"] = {"code": running.returncode, "err": err_text[-1500:],
                               "pushed": pushed,
                               "left": sorted(str(p) for p in set((out / "runs").iterdir())
                                              - before)}  # fmt: skip
        # a node killed while its pool runs: only its rows go down
        log.write_text("")
        hold.touch()  # the phone's runner holds until its node is killed
        command = [EDGEKIT, "run", "--cluster", address, "--device", "cpu,android", *MATRIX]
        began = time.monotonic()
        running = subprocess.Popen([*command, *runs], env=base, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        pushed = _wait_for_push(log)
        for pid in worker_pids(state):
            os.killpg(pid, signal.SIGKILL)
        out_text, err_text = running.communicate(timeout=300)
        hold.unlink()
        STEP_SECONDS.append(["run --cluster (node killed)", round(time.monotonic() - began, 1)])
        killed = {"code": running.returncode, "err": err_text[-3000:], "out": out_text[-2000:],
                  "out_head": out_text[:500], "pushed": pushed}  # fmt: skip
        if out_text.strip().startswith("{"):
            killed["rows"] = rows_of({"out": out_text})
            killed["run_dir"] = json.loads(out_text)["run_dir"]
        seen["killed_run"] = killed
        for path in state.glob("*.json"):  # the dead worker's record
            if json.loads(path.read_text())["role"] == "worker":
                path.unlink()
        seen["death_noticed_s"] = wait_for_nodes(address, 1)
        # bad input: a device no node has now, another edgekit version (and an unreachable
        # head, above)
        seen["no_such_device"] = edgekit("run", "--cluster", address, "--device", "android",
                                         *MATRIX, *runs, env=base)  # fmt: skip
        # Ray's sockets live in its temp dir and AF_UNIX paths stop at 107 bytes
        other_temp = tempfile.mkdtemp(prefix="ek-other-")
        other_started = time.monotonic()
        other = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), "start", "--block", "--address", address,
             "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--resources",
             json.dumps({"edgekit_node": 1, "edgekit_version_0.0.1": 1}),
             "--temp-dir", other_temp, "--dashboard-agent-listen-port=0",
             "--min-worker-port=0", "--max-worker-port=0", "--node-manager-port=0",
             "--include-log-monitor=false"], env=base, start_new_session=True,
            stdout=(out / "other.log").open("w"), stderr=subprocess.STDOUT)  # fmt: skip
        # a new phone node for the resumed run below, joining while the other node starts
        # (a node of another version is refused beside a phone node as much as without one)
        edgekit("cluster", "join", address, "--num-cpus", "1", env=phone, check=True)
        wait_for_nodes(address, 3, having=("edgekit_version_0.0.1", "edgekit_adb_emulator-5554"))
        seen["other_joined_s"] = time.monotonic() - other_started
        seen["other_version"] = edgekit("run", "--cluster", address, *MATRIX, *runs, env=base)
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
        # the other node gone (the head and the phone's node left): the killed run resumed,
        # only its missing rows run
        wait_for_nodes(address, 2, having=("edgekit_adb_emulator-5554",),
                       without=("edgekit_version_0.0.1",))  # fmt: skip
        if "run_dir" in killed:
            resumed = edgekit("run", "--resume", killed["run_dir"], "--cluster", address,
                              "--history", str(out / "h.sqlite"), "--json", env=base)  # fmt: skip
            seen["resumed"] = _summary(resumed)
    finally:
        for process in BESIDE:  # a step above failed while they ran
            if process.poll() is None:
                process.kill()
                process.wait()
        pids = [json.loads(p.read_text())["pid"] for p in state.glob("*.json")]
        stopped = edgekit("cluster", "stop", env=base)
        seen["step_seconds"] = STEP_SECONDS
        seen["stop"] = {"code": stopped["code"], "pids": pids,
                        "alive": [pid for pid in pids if _alive(pid)]}  # fmt: skip
        (out / "scenario.json").write_text(json.dumps(seen, indent=1))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
