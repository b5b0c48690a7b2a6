"""A board reached over SSH: how it is named (``ssh://[user@]host[:port]``, or a ``[devices.NAME]``
table of an edgekit.toml) and what edgekit needs to know of it. The host may be an alias of the
user's ``~/.ssh/config``: OpenSSH resolves it, with its user, port, key and known hosts."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from edgekit.errors import UserInputError

SCHEME = "ssh://"
SSH_CONFIG_ENV = "EDGEKIT_SSH_CONFIG"  # an ssh_config file for boards without their own
DEFAULT_PYTHON = "python3"
# relative to the login's home: a board's user owns it, and nothing outside it is touched
DEFAULT_WORKDIR = ".cache/edgekit-board"


@dataclass(frozen=True)
class Board:
    """One board. ``name`` is what rows call it: the address, or the config table's name."""

    name: str
    host: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    python: str = (
        DEFAULT_PYTHON  # the board's interpreter (3.11-3.13): a name on its PATH or a path
    )
    workdir: str = DEFAULT_WORKDIR  # the worker tree, pushed files and the runtimes' folder
    ssh_config: str | None = None  # an ssh_config file passed with -F instead of ~/.ssh/config

    @classmethod
    def parse(cls, address: str) -> Board:
        """``ssh://[user@]host[:port]``; anything else (a path, a query, a password) is refused
        by name."""
        if not address.startswith(SCHEME):
            raise UserInputError(f"device '{address}': a board is ssh://[user@]host[:port]")
        parts = urlsplit(address)
        try:
            port = parts.port
        except ValueError:
            raise UserInputError(f"device '{address}': the port is not a number 1-65535") from None
        if not parts.hostname:
            raise UserInputError(f"device '{address}': no host (ssh://[user@]host[:port])")
        if parts.password is not None:
            raise UserInputError(
                f"device '{address}': no passwords in the address; use a key (ssh-copy-id)"
            )
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise UserInputError(
                f"device '{address}': only ssh://[user@]host[:port]; set the board's python "
                "and work directory in a [devices.NAME] table of edgekit.toml"
            )
        return cls(address, parts.hostname, parts.username, port)

    @classmethod
    def from_table(cls, name: str, table: dict[str, Any], source: Path | str) -> Board:
        """A ``[devices.NAME]`` table: host (required), user, port, identity_file, python, workdir,
        ssh_config. A wrong key or type is one line naming the file and the key."""
        known = {f.name for f in fields(cls)} - {"name"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise UserInputError(
                f"{source}: [devices.{name}] has no key '{unknown[0]}' (choose from "
                f"{', '.join(sorted(known))})"
            )
        if not isinstance(table.get("host"), str) or not table["host"]:
            raise UserInputError(f'{source}: [devices.{name}] needs host = "..."')
        for key, value in table.items():
            wanted = int if key == "port" else str
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise UserInputError(
                    f"{source}: [devices.{name}] {key} must be a {wanted.__name__}, got {value!r}"
                )
        return cls(name, **table)

    def ssh_options(self) -> list[str]:
        """The command-line options of OpenSSH's client that this board sets."""
        options = []
        # OpenSSH reads ~/.ssh/config of the passwd entry's home, whatever HOME says
        config = self.ssh_config or os.environ.get(SSH_CONFIG_ENV)
        if config:
            options += ["-F", str(Path(config).expanduser())]
        if self.port is not None:
            options += ["-p", str(self.port)]
        if self.user:
            options += ["-l", self.user]
        if self.identity_file:
            options += [
                "-i",
                str(Path(self.identity_file).expanduser()),
                "-o",
                "IdentitiesOnly=yes",
            ]
        return options


# named boards of the config files a command was given: name -> Board
_NAMED: dict[str, Board] = {}


def add_boards(devices: dict[str, Any], source: Path | str) -> list[str]:
    """Make the ``[devices.NAME]`` tables of ``source`` devices by name; returns their names."""
    from edgekit.devices import DEVICE_MODULES, add_device

    names = []
    for name, table in devices.items():
        if not isinstance(table, dict):
            raise UserInputError(f"{source}: devices.{name} must be a table ([devices.{name}])")
        if name in DEVICE_MODULES and name not in _NAMED:
            raise UserInputError(f"{source}: [devices.{name}]: '{name}' is a built-in device")
        _NAMED[name] = Board.from_table(name, table, source)
        add_device(name, "edgekit.devices.ssh")
        names.append(name)
    return names


def board_for(name: str) -> Board:
    """The board a device name means: a named board, else an ``ssh://`` address."""
    return _NAMED[name] if name in _NAMED else Board.parse(name)
