"""A test board on loopback: Debian's sshd on 127.0.0.1 whose login runs the arm64 userland that
``edgekit device setup arm64-emu --with-pte`` builds (trixie's CPython 3.13 under QEMU user
mode). The board's Python really is aarch64 and takes aarch64 wheels; its shell is the host's,
which is how edgekit tells it is emulated. Run it in a network namespace of its own, where
127.0.0.1 is the only address (tests/board_scenario.py; needs root for unshare and sshd):

    python scripts/loopback_board.py DIR -- edgekit run --device ssh://board ...

First, with this machine's network, it fills edgekit's wheelhouse for the board (CPython 3.13,
aarch64: what ``edgekit device setup`` would download); then it runs itself again under
``unshare -n``, where ``device setup`` finds the wheels without a network.

writes DIR/ssh_config (Host board: the address, the key made for it, its host key) and runs the
command with EDGEKIT_SSH_CONFIG set to it, so that ``ssh://board`` is that alias."""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
HOST = "board"  # the ssh_config alias: how a user names a board


def loopback_up() -> None:
    """``ip link set lo up`` in a fresh network namespace, without iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, 0x8913, request))[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH", b"lo", flags | 0x1))


def userland() -> tuple[Path, Path]:
    """QEMU and the trixie sysroot of the emulated ARM64 device (set up with --with-pte)."""
    from edgekit.devices.arm64_emu.emulator import PTE, load_device

    emulator = load_device()
    return emulator.qemu, emulator.root / f"sysroot-{PTE.name}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_board(folder: Path, *, port: int | None = None, python: str = "python3.13") -> Path:
    """Keys, sshd_config, the login and the board's ``python3`` under ``folder``; returns the
    ssh_config file a client uses (``ssh -F FILE board``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for key in ("host_key", "user_key"):
        if not (folder / key).exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)],
                check=True,
            )
    qemu, sysroot = userland()
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "python3"
    wrapper.write_text(
        "#!/bin/sh\n# the board's Python: trixie's aarch64 CPython under QEMU user mode\n"
        f'QEMU_CPU=cortex-a76 exec {qemu} -L {sysroot} {sysroot}/usr/bin/{python} "$@"\n'
    )
    wrapper.chmod(0o755)
    login = folder / "login.sh"
    # a board's login: its own PATH (its python3 first), the command in a plain sh, in home
    login.write_text(
        "#!/bin/sh\n"
        f"export PATH={bin_dir}:/usr/bin:/bin HOME={folder / 'home'}\n"
        'cd "$HOME" && exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
    )
    login.chmod(0o755)
    (folder / "home").mkdir(exist_ok=True)
    port = port or free_port()
    (folder / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1:{port}\n"
        f"HostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'user_key.pub'}\n"
        f"PidFile {folder / 'sshd.pid'}\n"
        f"ForceCommand {login}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nMaxSessions 64\n"
        "MaxStartups 64\n"
    )
    known = folder / "known_hosts"
    public = (folder / "host_key.pub").read_text().split()
    known.write_text(f"[127.0.0.1]:{port} {public[0]} {public[1]}\n")
    config = folder / "ssh_config"
    config.write_text(
        f"Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n"
        f"  User {os.environ.get('USER', 'root')}\n"
        f"  IdentityFile {folder / 'user_key'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n"
    )
    return config


def start_sshd(folder: Path) -> subprocess.Popen:
    """sshd in the foreground (-D), logging to ``folder``/sshd.log; waits until it listens."""
    Path("/run/sshd").mkdir(exist_ok=True)  # its privilege-separation directory
    server = subprocess.Popen(
        [SSHD, "-D", "-f", str(folder / "sshd_config"), "-E", str(folder / "sshd.log")]
    )
    port = int((folder / "sshd_config").read_text().split(":")[1].split()[0])
    for _ in range(100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        if server.poll() is not None:
            raise RuntimeError(f"sshd exited: {(folder / 'sshd.log').read_text()[-500:]}")
        time.sleep(0.05)
    raise RuntimeError("sshd did not listen within 5 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.inside:
        from edgekit.devices.ssh.setup import fill_wheelhouse

        fill_wheelhouse("aarch64", (3, 13), lambda line: print(line, file=sys.stderr))
        again = ["unshare", "-n", sys.executable, __file__, "--inside", str(args.folder)]
        return subprocess.run([*again, *args.command], check=False).returncode
    if shutil.which(SSHD.rsplit("/", 1)[1]) is None and not Path(SSHD).exists():
        print("loopback_board: Debian's openssh-server is not installed", file=sys.stderr)
        return 2
    loopback_up()
    config = make_board(args.folder.resolve())
    server = start_sshd(args.folder.resolve())
    try:
        command = [part for part in args.command if part != "--"]
        env = dict(os.environ, EDGEKIT_SSH_CONFIG=str(config))
        return subprocess.run(command, env=env, check=False).returncode if command else 0
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
