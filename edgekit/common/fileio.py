"""Atomic writes and digests: an interrupted command never leaves a half-written file."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


JOURNAL_ENV = "EDGEKIT_TEMP_JOURNAL"


# the file system refused the bytes, not the converter the model: no other exporter can help
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def raise_disk_error(exc: BaseException, path: Path) -> None:
    """Re-raise a full disk or quota (or a folder turned read-only) met while writing ``path``
    as the OSError it is, naming the file: the CLI says it in one line. Other errors return."""
    if isinstance(exc, OSError) and exc.errno in DISK_ERRORS:
        raise OSError(exc.errno, os.strerror(exc.errno), str(exc.filename or path)) from exc


def journal(path: Path | str) -> None:
    """Record a temporary path the command creates, so that the supervisor can remove it when
    the command is killed before its own cleanup runs (``edgekit.supervise``)."""
    target = os.environ.get(JOURNAL_ENV)
    if target:
        with contextlib.suppress(OSError), open(target, "a") as handle:
            handle.write(f"{Path(path).resolve()}\n")


def read_journal(journal: str | Path) -> list[str]:
    """The paths ``journal`` recorded as temporary (lines starting with # are notes)."""
    try:
        with open(journal) as handle:
            return [line.rstrip("\n") for line in handle if line.strip()]
    except OSError:
        return []


def remove_paths(lines: list[str]) -> None:
    """Remove the recorded temporary files and folders that are still there, newest first."""
    paths = [line for line in lines if not line.startswith("#")]
    for path in reversed(paths):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


@contextlib.contextmanager
def temporary_directory(prefix: str = "edgekit-", directory: Path | None = None) -> Iterator[Path]:
    """A temporary directory, journalled, removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=directory) as name:
        journal(name)
        yield Path(name)


def ensure_writable_dir(directory: Path) -> Path:
    """Create ``directory`` if needed and prove we can write there, or raise a one-line error."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".edgekit-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UserInputError(f"{directory}: output directory is not writable ({reason})") from None
    return directory


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; rename it into place only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    journal(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the final file gets the usual mode
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_json_atomic(path: Path, payload: object) -> None:
    text = json.dumps(payload, indent=2, sort_keys=False, default=_json_default) + "\n"
    write_bytes_atomic(path, text.encode())


def _json_default(value: object) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def read_toml(path: Path | str) -> dict[str, Any]:
    """A TOML file's tables; a missing or malformed file is one line of bad input."""
    import tomllib

    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserInputError(f"{path}: config file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{path}: not valid TOML ({exc})") from None
