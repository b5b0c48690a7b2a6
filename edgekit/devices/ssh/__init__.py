"""Linux boards over SSH (``--device ssh://[user@]host[:port]``, or a ``[devices.NAME]`` table):
a Raspberry Pi, a Jetson, an i.MX or RK3588 board, any Linux machine with a Python 3.11-3.13.

The board runs what the emulated ARM64 device's guest runs, the targets' own session modules
with numpy and the runtimes and without torch or edgekit, reached over OpenSSH instead of QEMU:
each worker is ``ssh board python launcher.py`` speaking the host worker's protocol on its
stdin and stdout. The worker's files and each artifact are pushed once, by content digest;
outputs come back, so accuracy, drops and flips are the board's own. ``edgekit device setup``
makes the board ready (``setup.py``)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.artifacts.runtime_options import tuned_options
from edgekit.devices import register
from edgekit.devices.arm64_emu.emulator import guest_tree, request_for
from edgekit.devices.base import Device, DeviceTraits
from edgekit.devices.ssh.board import Board, board_for
from edgekit.devices.ssh.connection import Connection
from edgekit.devices.ssh.fingerprint import ENV_DIR, RUNTIMES, Fingerprint, read_fingerprint
from edgekit.errors import DeviceUnavailable
from edgekit.targets import get_target, target_names
from edgekit.worker.latency import BlockTimer, LatencyProtocol
from edgekit.worker.parent import WorkerProcess, WorkerTimer, sample_for, trivial_fields

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

TIMEOUT_S = 900.0
EMULATED_NOTE = (
    "emulated board: its Python runs under an emulator on another architecture; its outputs "
    "are the board's, its speed is not (never compare with native)"
)


class BoardProcess(WorkerProcess):
    """A worker on the board: a kill (a timeout, Ctrl-C) ends the remote process too, not only
    the local ssh client."""

    def __init__(self, connection: Connection, token: str, *args: Any) -> None:
        self._connection, self._token = connection, token
        super().__init__(*args)

    def kill(self) -> None:
        super().kill()
        self._end_remote()

    def _exit_reason(self) -> str:
        if self._process.wait() != 255:
            return super()._exit_reason()
        self._stderr.seek(0)
        said = self._stderr.read().decode(errors="replace").strip().splitlines()
        board = self._connection.board.name
        return f"{board}: the SSH connection ended ({(said or ['no reason given'])[-1][:200]})"

    def close(self) -> None:
        super().close()
        if self._process.returncode == 0:  # it ended by itself, its pidfile with it
            self._connection.forget(self._token)
        else:
            self._end_remote()

    def _end_remote(self) -> None:
        # a board that is gone: the next run's end_leftovers ends the worker
        with contextlib.suppress(DeviceUnavailable):
            self._connection.end_workers([self._token])


class BoardTimer(WorkerTimer):
    """A session held on the board."""

    def __init__(self, device: SshDevice, label: str, request: dict, sample: Any, **kw: Any):
        self._device = device
        super().__init__(label, request, sample, **kw)

    def start_worker(self, request: dict, timeout_s: float, command: Any, env: Any) -> Any:
        return self._device.worker(dict(request), timeout_s)

    def again(self) -> BoardTimer:
        request, sample, timeout_s, _command, _env = self._how
        return BoardTimer(self._device, self.label, request, sample, timeout_s=timeout_s)


@register
class SshDevice(Device):
    name = "ssh"
    per_name = True  # one device per board: get_device passes the name it was asked by
    tunable = True  # edgekit tune searches a board's runtime options on the board
    summary = "a Linux board over SSH: ssh://[user@]host[:port] or a [devices.NAME] table"
    how_to_add = "edgekit device setup ssh://[user@]host[:port]"

    def __init__(self, address: str = "", **options: Any) -> None:
        super().__init__(**options)
        self.board: Board = board_for(address)
        self.name = self.board.name  # rows and pools name the board, never "ssh"
        self._connection: Connection | None = None
        self._fingerprint: Fingerprint | None = None
        self._tree: str | None = None

    # -- the board ----------------------------------------------------------------------------

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            self._connection = Connection(self.board)
        return self._connection

    def fingerprint(self) -> Fingerprint:
        """The board's facts, read once (the first contact: an unreachable board or a refused
        login raises here, one line, exit 2); leftovers of a dropped earlier run are ended."""
        if self._fingerprint is None:
            self.connection.end_leftovers()
            self._fingerprint = read_fingerprint(self.connection)
        return self._fingerprint

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        emulated = (runtime or {}).get("board", {}).get("emulated")
        if emulated is None:
            try:
                emulated = self.fingerprint().emulated
            except DeviceUnavailable:
                emulated = False  # the command meets the reason where it uses the board
        note = EMULATED_NOTE if emulated else f"board over SSH ({self.board.name})"
        # a board's figures are its own pool, never ranked with the host's
        return DeviceTraits(latency_comparable=not emulated, note=note, where="remote")

    def unavailable_reason(self, artifact: Artifact) -> str | None:
        found = self.fingerprint()
        refusal = found.refusal()
        if refusal:
            raise DeviceUnavailable(refusal)
        if found.env is None:
            raise DeviceUnavailable(
                f"{self.board.name}: not set up (run 'edgekit device setup {self.board.name}')"
            )
        target = get_target(artifact.target)
        by_module = {module: dist for dist, module in RUNTIMES.items()}
        absent = [
            m for m in target.guest_modules if found.runtimes.get(by_module.get(m, m)) is None
        ]
        if absent:
            names = ", ".join(by_module.get(m, m) for m in absent)
            why = found.env.get("skipped", {})
            reasons = "; ".join(
                why[by_module.get(m, m)] for m in absent if by_module.get(m, m) in why
            )
            return (
                f"{self.board.name}: {target.runtime} needs {names} on the board, which setup "
                f"did not install ({reasons or 'run edgekit device setup again'})"
            )
        return None

    def facts(self) -> dict[str, Any]:
        try:
            found = self.fingerprint()
        except DeviceUnavailable as exc:
            return {"ready": False, "reason": str(exc), "board": self.name}
        ready = found.refusal() is None and found.env is not None
        reason = found.refusal() or (None if ready else "not set up (edgekit device setup)")
        return {"ready": ready, **({"reason": reason} if reason else {}), **found.to_dict()}

    # -- workers ------------------------------------------------------------------------------

    def _worker_tree(self) -> str:
        """Every target's session module with what it imports and the launcher, on the board
        once per content (``trees/<digest>``)."""
        if self._tree is None:
            import tempfile

            with tempfile.TemporaryDirectory(prefix="edgekit-board-") as tmp:
                folder = Path(tmp) / "tree"
                for name in target_names():
                    guest_tree(get_target(name).session_module, folder)
                (folder / "launcher.py").write_bytes(
                    Path(__file__).with_name("launcher.py").read_bytes()
                )
                digest = hashlib.sha256()
                for path in sorted(folder.rglob("*.py")):
                    digest.update(
                        str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes()
                    )
                self._tree = self.connection.tree(folder, digest.hexdigest()[:24])
        return self._tree

    def worker(self, request: dict[str, Any], timeout_s: float) -> BoardProcess:
        """A worker on the board for ``request``, its local files swapped for their pushed
        copies."""
        self.fingerprint()
        for key in ("artifact", "trivial", "input"):
            if request.get(key):
                request[key] = self.connection.blob(request[key])
        tree = self._worker_tree()
        token = self.connection.new_token()
        env = {
            "PYTHONPATH": f"{tree}:{ENV_DIR}",
            "PYTHONNOUSERSITE": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3",
        }
        # ssh passes no environment: the tests' crash and hang switch goes in the command
        env.update({k: v for k, v in os.environ.items() if k == "EDGEKIT_TEST_CRASH"})
        command = self.connection.worker_argv(token, env, f"{tree}/launcher.py", self.board.python)
        return BoardProcess(self.connection, token, request, timeout_s, command)

    def _request(self, artifact: Artifact, threads: int) -> dict[str, Any]:
        """The worker's request: the runtime options ``edgekit tune`` chose for this board,
        under the device's own settings."""
        target = get_target(artifact.target)
        accepted = target.session_options
        settings = {k: v for k, v in self.settings.items() if k in accepted}
        options = {**tuned_options(artifact.manifest, self.name), **settings}
        return request_for(artifact, target.session_module, threads, options)

    def _runtime(self, runtime: dict[str, Any]) -> dict[str, Any]:
        board = self.fingerprint().to_dict()
        return dict(runtime, board=board, cpu_model=board["cpu_model"])

    def predict(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1
    ) -> tuple[np.ndarray, dict]:
        import io
        import tempfile

        with tempfile.TemporaryDirectory(prefix="edgekit-board-") as tmp:
            inputs = Path(tmp) / "x.npy"
            np.save(inputs, np.ascontiguousarray(x, dtype=np.float32))
            request = self._request(artifact, threads)
            request.update(mode="predict", input=str(inputs))
            request["output"] = f"outputs/{self.connection.new_token()}.npy"
            worker = self.worker(request, TIMEOUT_S)
            try:
                reply = worker.receive()
            finally:
                worker.close()
            logits = np.load(io.BytesIO(self.connection.fetch(request["output"], remove=True)))
        return logits, self._runtime(reply["runtime"])

    def timer(
        self,
        artifact: Artifact,
        threads: int,
        sample: np.ndarray | None,
        protocol: LatencyProtocol,
        timeout_s: float,
    ) -> BlockTimer:
        sample = sample_for(artifact, sample)
        request = self._request(artifact, threads)
        request.update(warmup=protocol.warmup, **trivial_fields(artifact.target))
        timer = BoardTimer(self, artifact.label, request, sample, timeout_s=timeout_s)
        timer.runtime = self._runtime(timer.runtime)
        return timer

    def setup(self, progress: Callable[[str], None], **options: Any) -> None:
        from edgekit.devices.ssh.setup import setup_board

        self._fingerprint = setup_board(self.connection, self.fingerprint(), progress=progress)
