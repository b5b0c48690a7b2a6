"""A two-node Ray cluster on loopback, driven through the CLI as a user would, run by
tests/test_cluster.py inside a network namespace of its own (``unshare -n``), where 127.0.0.1
is the only address: Ray binds every interface it finds (ray-project/ray#26293), so nothing
here listens beyond loopback. Writes what each step saw to OUT/scenario.json.

The cluster run has two models: the default zoo model and a user's own (tests/cluster_user_model:
a module on the driver's PYTHONPATH only, never on the nodes'), as a user runs
``--model zoo:digits-mobilenet,driver_only_net:tiny_cnn``.

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
import time
from pathlib import Path

from stand_ins import stand_in_adb_env

EDGEKIT = str(Path(sys.executable).with_name("edgekit"))
QUICK = ["--rounds", "3", "--min-runs", "5", "--min-seconds", "0.05"]
# plumbing, not a measurement: without the noise guard the scenario may run beside other tests
PLUMBING = Path(tempfile.mkdtemp(prefix="ek-scenario-")) / "edgekit.toml"
PLUMBING.write_text("[run]\nnoise_guard = false\n")
MATRIX = ["--config", str(PLUMBING), "--target", "tflite", "--recipe", "fp32", "--no-profile",
          *QUICK]  # fmt: skip
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


def _wait_for_push(log: Path, limit_s: float = 60) -> None:
    """Until the stand-in phone receives its first file: the android pool is running."""
    deadline = time.monotonic() + limit_s
    while "push" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_for_nodes(
    address: str, count: int, env: dict, limit_s: float = 90, having: str | None = None
) -> float:
    """Seconds until the head lists ``count`` live nodes (one of them advertising ``having``):
    Ray notices a SIGKILLed node by its missed health checks, not at once."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        status = edgekit("cluster", "status", address, "--json", env=env)
        nodes = json.loads(status["out"]) if status["code"] == 0 else []
        if len(nodes) == count and (having is None or any(having in n["edgekit"] for n in nodes)):
            return time.monotonic() - started
        time.sleep(1)
    raise SystemExit(
        f"the cluster at {address} did not reach {count} node(s) "
        f"{'with ' + having if having else ''} in {limit_s} s: {nodes}"
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
    phone = {**base, **adb, "PATH": f"{adb.pop('PATH_PREFIX')}{os.pathsep}{os.environ['PATH']}"}
    phone.pop("PATH_PREFIX", None)
    # the nodes' environments (base, phone) lack the user's project: only the driver has it
    driver = {**base, "PYTHONPATH": str(USER / "project")}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    seen: dict = {"address": address}
    runs = ["--runs-dir", str(out / "runs"), "--history", str(out / "h.sqlite"), "--json"]
    try:
        started = time.monotonic()
        edgekit("cluster", "start", "--head", "--port", str(port), "--num-cpus", "1", env=base,
                check=True)  # fmt: skip
        edgekit("cluster", "join", address, "--num-cpus", "1", env=phone, check=True)
        wait_for_nodes(address, 2, base, having="edgekit_adb_emulator-5554")
        seen["start_s"] = time.monotonic() - started
        seen["status"] = json.loads(edgekit("cluster", "status", address, "--json", env=base,
                                            check=True)["out"])  # fmt: skip
        # the matrix on the cluster, and the same matrix run locally
        clustered = edgekit("run", "--cluster", address, "--device", "cpu,android", *TWO_MODELS,
                            *MATRIX, *runs, env=driver)  # fmt: skip
        seen["cluster_run"] = _summary(clustered)
        local = edgekit("run", "--device", "cpu,android", *TWO_MODELS, *MATRIX, *runs,
                        env={**phone, "PYTHONPATH": driver["PYTHONPATH"]})  # fmt: skip
        seen["local_run"] = _summary(local)
        # a model that needs code from beyond its folder: the nodes cannot import it
        both = os.pathsep.join([driver["PYTHONPATH"], str(USER / "elsewhere")])
        elsewhere = {**driver, "PYTHONPATH": both}
        unshipped = edgekit("run", "--cluster", address, "--device", "cpu,android", "--model",
                            UNSHIPPED_MODEL, *MATRIX, *runs, env=elsewhere)  # fmt: skip
        seen["cannot_import"] = _summary(unshipped)
        # Ctrl-C while the phone's pool runs: the tasks cancelled, no run directory left
        log = Path(adb["ADB_LOG"])
        log.write_text("")
        before = set((out / "runs").iterdir())
        command = [EDGEKIT, "run", "--cluster", address, "--device", "cpu,android", *MATRIX]
        running = subprocess.Popen([*command, *runs], env=base, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        _wait_for_push(log)
        running.send_signal(signal.SIGINT)
        _, err_text = running.communicate(timeout=60)
        seen["interrupted"] = {"code": running.returncode, "err": err_text[-1500:],
                               "left": sorted(str(p) for p in set((out / "runs").iterdir())
                                              - before)}  # fmt: skip
        # a node killed while its pool runs: only its rows go down
        log = Path(adb["ADB_LOG"])
        log.write_text("")
        command = [EDGEKIT, "run", "--cluster", address, "--device", "cpu,android", *MATRIX]
        running = subprocess.Popen([*command, *runs], env=base, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        _wait_for_push(log)
        for pid in worker_pids(state):
            os.killpg(pid, signal.SIGKILL)
        out_text, err_text = running.communicate(timeout=300)
        killed = {"code": running.returncode, "err": err_text[-3000:], "out": out_text[-2000:],
                  "out_head": out_text[:500]}  # fmt: skip
        if out_text.strip().startswith("{"):
            killed["rows"] = rows_of({"out": out_text})
            killed["run_dir"] = json.loads(out_text)["run_dir"]
        seen["killed_run"] = killed
        for path in state.glob("*.json"):  # the dead worker's record
            if json.loads(path.read_text())["role"] == "worker":
                path.unlink()
        seen["death_noticed_s"] = wait_for_nodes(address, 1, base)
        # bad input: a device no node has now, an unreachable head, another edgekit version
        seen["no_such_device"] = edgekit("run", "--cluster", address, "--device", "android",
                                         *MATRIX, *runs, env=base)  # fmt: skip
        seen["unreachable"] = edgekit("run", "--cluster", "127.0.0.1:1", *MATRIX, *runs, env=base)
        # Ray's sockets live in its temp dir and AF_UNIX paths stop at 107 bytes
        other_temp = tempfile.mkdtemp(prefix="ek-other-")
        other = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), "start", "--block", "--address", address,
             "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--resources",
             json.dumps({"edgekit_node": 1, "edgekit_version_0.0.1": 1}),
             "--temp-dir", other_temp, "--dashboard-agent-listen-port=0",
             "--min-worker-port=0", "--max-worker-port=0", "--node-manager-port=0",
             "--include-log-monitor=false"], env=base, start_new_session=True,
            stdout=(out / "other.log").open("w"), stderr=subprocess.STDOUT)  # fmt: skip
        seen["other_joined_s"] = wait_for_nodes(address, 2, base, having="edgekit_version_0.0.1")
        seen["other_version"] = edgekit("run", "--cluster", address, *MATRIX, *runs, env=base)
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
        wait_for_nodes(address, 1, base)
        # a new phone node, and the killed run resumed: only its missing rows run
        edgekit("cluster", "join", address, "--num-cpus", "1", env=phone, check=True)
        wait_for_nodes(address, 2, base, having="edgekit_adb_emulator-5554")
        if "run_dir" in killed:
            resumed = edgekit("run", "--resume", killed["run_dir"], "--cluster", address,
                              "--history", str(out / "h.sqlite"), "--json", env=base)  # fmt: skip
            seen["resumed"] = _summary(resumed)
    finally:
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
