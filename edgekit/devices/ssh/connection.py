"""One board's connection: OpenSSH's own client, one multiplexed master per process
(``ControlMaster``), every remote step a command over it. Files go to the board once, by content
digest; workers are started with a token whose pidfile lets edgekit end them however the run
ends (closed, timed out, interrupted, or a later run finding one its dropped connection left)."""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import os
import shlex
import shutil
import socket
import subprocess
import tarfile
import tempfile
from pathlib import Path

from edgekit.common.fileio import journal, sha256_file
from edgekit.devices.ssh.board import Board
from edgekit.errors import DeviceUnavailable

CONNECT_TIMEOUT_S = 10
COMMAND_TIMEOUT_S = 120.0
# a board that stops answering (cable out, rebooted) is noticed within 3 x 5 s
ALIVE = ("-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3")
_TOKENS = itertools.count()


class BoardUnreachable(DeviceUnavailable):
    """The board did not take a connection (unreachable, refused, authentication)."""


def _ssh_failure(board: Board, stderr: str) -> BoardUnreachable:
    """One line from OpenSSH's own words for why it could not connect (its exit status 255)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Warning: Permanently added")]
    said = lines[-1] if lines else "ssh exited with 255 and said nothing"
    if any("Permission denied" in line for line in lines):
        return BoardUnreachable(
            f"{board.name}: authentication refused ({said}); give the board your key "
            "(ssh-copy-id) or set identity_file"
        )
    if any("Host key verification failed" in line for line in lines):
        return BoardUnreachable(
            f"{board.name}: its host key is unknown or changed ({said}); connect once with ssh "
            "to check and accept it"
        )
    return BoardUnreachable(f"{board.name}: unreachable ({said})")


class Connection:
    """Commands and files to one board over a multiplexed OpenSSH connection."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.pushed: list[tuple[str, int]] = []  # (remote path, bytes) pushed by this process
        self._known: set[str] = set()  # remote paths known to exist
        self._control: str | None = None
        self._workers: set[str] = set()
        self.measured = False  # a worker ran on the board: its push summary is worth saying
        # tokens name this machine and process: a later run ends only its own leftovers
        self._prefix = f"{socket.gethostname()}-{os.getpid()}"

    # -- the client ---------------------------------------------------------------------------

    def argv(self, remote: str) -> list[str]:
        """``ssh`` with this board's options and the master connection, running ``remote`` (a
        shell command on the board, in the work directory)."""
        if self._control is None:
            # a short folder: a unix socket's path is at most 108 bytes
            self._control = tempfile.mkdtemp(prefix="ek-ssh-", dir="/tmp")
            journal(self._control)
            atexit.register(self.close)
        workdir = shlex.quote(self.board.workdir)
        command = f"mkdir -p {workdir} && cd {workdir} && {remote}"
        return [
            "ssh",
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            *ALIVE,
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self._control}/%C",
            "-o", "ControlPersist=60",
            "-o", "LogLevel=ERROR",
            *self.board.ssh_options(),
            self.board.host,
            command,
        ]  # fmt: skip

    def run(
        self,
        remote: str,
        *,
        stdin: bytes | io.BufferedReader | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S,
        what: str = "a command",
    ) -> subprocess.CompletedProcess:
        """Run ``remote`` on the board; an unreachable board or a refused login raises
        BoardUnreachable, a timeout DeviceUnavailable. The caller reads the exit status."""
        if shutil.which("ssh") is None:
            raise DeviceUnavailable(
                f"{self.board.name}: OpenSSH's client (ssh) is not installed on this machine"
            )
        options = {"input": stdin} if isinstance(stdin, bytes) or stdin is None else {}
        try:
            done = subprocess.run(
                self.argv(remote),
                capture_output=True,
                timeout=timeout_s,
                check=False,
                stdin=None if "input" in options else stdin,
                **options,
            )
        except subprocess.TimeoutExpired:
            raise DeviceUnavailable(
                f"{self.board.name}: {what} did not answer within {timeout_s:.0f} s"
            ) from None
        if done.returncode == 255:
            raise _ssh_failure(self.board, done.stderr.decode(errors="replace"))
        return done

    def check(self, remote: str, what: str, **kw: object) -> str:
        """``run`` that also refuses a non-zero exit, naming ``what`` and the board's last line."""
        done = self.run(remote, what=what, **kw)
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
            raise DeviceUnavailable(
                f"{self.board.name}: {what} failed (exit {done.returncode}: {lines[-1][:200]})"
            )
        return done.stdout.decode(errors="replace")

    def close(self) -> None:
        """End this process's workers still on the board, then the master connection, and say
        what this process pushed (a second run of the same files pushes nothing)."""
        if self._control is None:
            return
        import sys

        size = sum(size for _path, size in self.pushed)
        said = f"{len(self.pushed)} file(s), {size / 2**20:.1f} MB" if self.pushed else "nothing"
        if self.measured or self.pushed:
            print(f"{self.board.name}: pushed {said}", file=sys.stderr)
        with contextlib.suppress(DeviceUnavailable, OSError):
            if self._workers:
                self.end_workers(sorted(self._workers))
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={self._control}/%C", "-O", "exit",
                 *self.board.ssh_options(), self.board.host],
                capture_output=True, timeout=10, check=False,
            )  # fmt: skip
        shutil.rmtree(self._control, ignore_errors=True)
        self._control = None

    # -- files --------------------------------------------------------------------------------

    def missing(self, paths: list[str]) -> list[str]:
        """Which of ``paths`` (relative to the work directory) the board lacks."""
        unknown = [path for path in paths if path not in self._known]
        if not unknown:
            return []
        quoted = " ".join(shlex.quote(path) for path in unknown)
        out = self.check(f'for p in {quoted}; do [ -e "$p" ] || echo "$p"; done', "a file check")
        absent = set(out.split())
        self._known.update(path for path in unknown if path not in absent)
        return [path for path in unknown if path in absent]

    def push_file(self, local: Path | str, remote: str) -> None:
        """Write ``local`` to ``remote`` on the board atomically (a part file, then a rename)."""
        folder = shlex.quote(str(Path(remote).parent))
        part, final = shlex.quote(f"{remote}.part"), shlex.quote(remote)
        with open(local, "rb") as handle:
            self.check(
                f"mkdir -p {folder} && cat > {part} && mv -f {part} {final}",
                f"pushing {Path(local).name}",
                stdin=handle,
                timeout_s=600,
            )
        self._known.add(remote)
        self.pushed.append((remote, Path(local).stat().st_size))

    def blob(self, local: Path | str) -> str:
        """``local`` on the board, pushed only if its content is not there yet: its path,
        ``blobs/<digest>/<name>``."""
        remote = f"blobs/{sha256_file(Path(local))[:24]}/{Path(local).name}"
        if self.missing([remote]):
            self.push_file(local, remote)
        return remote

    def tree(self, folder: Path, digest: str) -> str:
        """The files under ``folder`` on the board as ``trees/<digest>``, sent as one tar stream
        into a part folder, then renamed."""
        remote = f"trees/{digest}"
        if not self.missing([f"{remote}/.complete"]):
            return remote
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(folder, arcname=".")
        part = f"trees/.part-{digest}"
        self.check(
            f"rm -rf {part} && mkdir -p {part} && tar -xf - -C {part} && touch {part}/.complete "
            f"&& rm -rf {remote} && mv {part} {remote}",
            "pushing the worker's files",
            stdin=buffer.getvalue(),
        )
        self._known.add(f"{remote}/.complete")
        self.pushed.append((remote, len(buffer.getvalue())))
        return remote

    def fetch(self, remote: str, *, remove: bool = False) -> bytes:
        """The bytes of a file on the board (removed after, with ``remove``)."""
        quoted = shlex.quote(remote)
        then = f" && rm -f {quoted}" if remove else ""
        done = self.run(f"cat {quoted}{then}", what=f"fetching {Path(remote).name}")
        if done.returncode != 0:
            raise DeviceUnavailable(f"{self.board.name}: {remote} did not come back")
        return done.stdout

    # -- workers ------------------------------------------------------------------------------

    def new_token(self) -> str:
        token = f"{self._prefix}-{next(_TOKENS)}"
        self.measured = True
        self._workers.add(token)
        return token

    def worker_argv(self, token: str, env: dict[str, str], script: str, python: str) -> list[str]:
        """``ssh`` running ``python script token`` on the board, its pid in ``pids/<token>``:
        ``exec`` keeps the shell's pid, so the pidfile names the worker itself."""
        assigned = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        return self.argv(
            f"mkdir -p pids outputs && echo $$ > pids/{token} && exec env {assigned} "
            f"{python} {shlex.quote(script)} {token}"
        )

    def end_workers(self, tokens: list[str]) -> None:
        """TERM, then KILL after 3 s, every worker of ``tokens`` still running on the board
        (checked by its command line: a pid the board reused is left alone)."""
        if not tokens:
            return
        quoted = " ".join(shlex.quote(token) for token in tokens)
        # running: the pids of those workers still alive (one shell function, asked three times)
        self.run(
            f"running() {{ for t in {quoted}; do f=pids/$t; [ -f $f ] && p=$(cat $f) && "
            'grep -qa "$t" /proc/$p/cmdline 2>/dev/null && echo $p; done; }; '
            "kill -TERM $(running) 2>/dev/null; i=0; "
            'while [ -n "$(running)" ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; '
            f"kill -KILL $(running) 2>/dev/null; for t in {quoted}; do rm -f pids/$t; done; true",
            what="ending the workers",
            timeout_s=30,
        )
        self._workers.difference_update(tokens)

    def forget(self, token: str) -> None:
        """A worker that ended by itself (its own pidfile gone with it)."""
        self._workers.discard(token)

    def end_leftovers(self) -> list[str]:
        """End workers an earlier process of this machine left on the board (its connection
        dropped before it could): their edgekit process is no longer running here."""
        host = socket.gethostname()
        out = self.check(f"mkdir -p pids && ls pids | grep '^{host}-' || true", "listing workers")
        stale = []
        for token in out.split():
            pid = token.removeprefix(f"{host}-").split("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                stale.append(token)
        self.end_workers(stale)
        return stale
