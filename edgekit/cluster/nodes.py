"""Cluster nodes: ``ray start`` with the devices of this machine advertised as Ray custom
resources, the dashboard and usage reporting off, and the processes edgekit started remembered
by id, so ``edgekit cluster stop`` ends those and nothing else (``ray stop`` ends every Ray
process on the machine, by name).

Resources every edgekit node advertises: ``edgekit_node`` and ``edgekit_bench_slot`` (1 each:
a benchmark claims the slot and all the node's CPUs, so two timings never share a node),
``edgekit_version_<version>``, and each device's own (``Device.advertise``):
``edgekit_device_cpu`` with ``edgekit_fp_<fingerprint>``, ``edgekit_device_gpu`` with its kind,
one ``edgekit_adb_<serial>`` per phone, ``edgekit_device_arm64-emu`` where it is set up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from edgekit import __version__
from edgekit.errors import UserInputError

READY_LINE = "Ray runtime started"
START_TIMEOUT_S = 90.0
DEFAULT_PORT = 6379
OBJECT_STORE_MB = 1024  # Ray takes 30 % of RAM unless told; artifacts are a few MB


@dataclass
class NodeRecord:
    pid: int
    role: str  # head or worker
    address: str  # the head's GCS address this node belongs to
    temp_dir: str
    log: str
    resources: dict[str, float]
    started: float


def state_dir() -> Path:
    """Where started nodes are remembered ($EDGEKIT_CLUSTER_DIR, else ~/.edgekit/cluster)."""
    return Path(os.environ.get("EDGEKIT_CLUSTER_DIR", Path.home() / ".edgekit" / "cluster"))


def node_resources(extra: dict[str, float] | None = None) -> dict[str, float]:
    from edgekit.devices import device_names, get_device

    resources = {
        "edgekit_node": 1.0,
        "edgekit_bench_slot": 1.0,
        f"edgekit_version_{__version__}": 1.0,
    }
    for name in device_names():
        resources.update(get_device(name).advertise())
    resources.update(extra or {})
    return resources


def ray_executable() -> str:
    candidate = Path(sys.executable).with_name("ray")
    return str(candidate) if candidate.exists() else "ray"


def reachable(address: str, timeout: float = 5.0) -> None:
    """One line naming the address when nothing answers there (Ray itself waits minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserInputError(f"{address}: expected HOST:PORT, such as 10.0.0.5:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except OSError as exc:
        raise UserInputError(
            f"{address}: no Ray head answers there ({exc.strerror or exc})"
        ) from None


def start_node(
    *,
    head: bool,
    address: str | None = None,
    port: int = DEFAULT_PORT,
    node_ip: str = "127.0.0.1",
    num_cpus: int | None = None,
    extra_resources: dict[str, float] | None = None,
    temp_dir: Path | None = None,
) -> NodeRecord:
    """Start a head (``head=True``) or join ``address``; return once the node is up."""
    if not head:
        if not address:
            raise UserInputError("cluster join: give the head's ADDRESS (HOST:PORT)")
        reachable(address)
    resources = node_resources(extra_resources)
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    temp = (
        Path(temp_dir)
        if temp_dir
        else Path("/tmp") / f"edgekit-ray-{os.getpid()}-{int(time.time())}"
    )
    command = [
        ray_executable(),
        "start",
        "--block",
        "--node-ip-address",
        node_ip,
        "--resources",
        json.dumps(resources),
        "--temp-dir",
        str(temp),
        "--object-store-memory",
        str(OBJECT_STORE_MB << 20),
    ]
    if num_cpus is not None:
        command += ["--num-cpus", str(num_cpus)]
    if head:
        # the dashboard and usage reporting are the head's to switch off
        command += [
            "--head",
            "--port",
            str(port),
            "--include-dashboard=false",
            "--disable-usage-stats",
        ]
        address = f"{node_ip}:{port}"
    else:  # a second node on one machine needs its own ports for every agent
        command += [
            "--address",
            str(address),
            "--dashboard-agent-listen-port=0",
            "--min-worker-port=0",
            "--max-worker-port=0",
            "--node-manager-port=0",
            "--include-log-monitor=false",
        ]
    log = folder / f"node-{int(time.time() * 1000)}.log"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    # A SIGTERMed node (edgekit cluster stop) first asks to be drained and waits up to this
    # long for its raylet to leave; that is for Ray Serve's proxies, which edgekit has none of
    # (pinned Ray's ray/_private/node.py: "a value <= 0 disables draining and preserves
    # immediate teardown"). With Ray's 30 s default, stop used up its whole grace every time.
    env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
    with open(log, "w") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    _wait_ready(process, log)
    record = NodeRecord(
        process.pid,
        "head" if head else "worker",
        str(address),
        str(temp),
        str(log),
        resources,
        time.time(),
    )
    (folder / f"{process.pid}.json").write_text(json.dumps(asdict(record)))
    return record


def _wait_ready(process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if READY_LINE in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            reason = next(
                (line for line in reversed(lines) if "rror" in line),
                lines[-1] if lines else f"exit {process.returncode}",
            )
            raise UserInputError(f"ray start failed ({reason.strip()[:200]}); log: {log}")
        time.sleep(0.2)
    stop_process(process.pid)
    raise UserInputError(f"ray start did not come up within {START_TIMEOUT_S:.0f} s; log: {log}")


def started_nodes() -> list[NodeRecord]:
    records = []
    for path in sorted(state_dir().glob("*.json")):
        with contextlib.suppress(ValueError, TypeError, OSError):
            records.append(NodeRecord(**json.loads(path.read_text())))
    return records


def stop_process(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the node's process group (``ray start --block`` ends its node's processes),
    then SIGKILL what is left."""
    stop_processes([pid], grace_s)


def stop_processes(pids: list[int], grace_s: float = 10.0) -> None:
    """Every node's group SIGTERMed at once, then one shared grace period: Ray's own shutdown
    takes seconds per node, and nodes stopped one after another would add them up."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished:
            return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Exited, waiting for a parent that may never reap it (an orphan under a container's
    init): as good as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def stop_nodes(records: list[NodeRecord] | None = None) -> list[NodeRecord]:
    """Stop the nodes edgekit started (all of this machine's, by default)."""
    stopped = list(records if records is not None else started_nodes())
    stop_processes([record.pid for record in stopped])
    for record in stopped:
        (state_dir() / f"{record.pid}.json").unlink(missing_ok=True)
    return stopped
