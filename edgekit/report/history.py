"""The run history: every run's rows in sqlite (``~/.edgekit/history.sqlite`` or ``--history``),
so ``edgekit compare`` and ``edgekit check --against last`` can see earlier runs.

WAL mode and a busy timeout make two runs writing at once safe: each run is one transaction.
Every run and row keeps its machine fingerprint; latency figures of different fingerprints are
not compared unless the caller says ``across_machines``, and then every such figure is labelled."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from edgekit.common.machine import differing_fields
from edgekit.errors import UserInputError
from edgekit.records import AccuracyRecord, MemoryRecord
from edgekit.results import Results

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created TEXT NOT NULL,
    model TEXT NOT NULL,
    model_digest TEXT NOT NULL,
    data TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    git_commit TEXT,
    fingerprint_id TEXT,
    machine TEXT
);
CREATE TABLE IF NOT EXISTS rows (
    run_id TEXT NOT NULL REFERENCES runs(id),
    row_key TEXT NOT NULL,
    status TEXT NOT NULL,
    p50_ms REAL,
    p90_ms REAL,
    top1 REAL,
    drop_points REAL,
    drop_high REAL,
    agreement REAL,
    sqnr_db REAL,
    size_bytes INTEGER,
    record TEXT NOT NULL,
    fingerprint_id TEXT,
    fingerprint TEXT,
    artifact_path TEXT,
    peak_mb REAL,
    model_mb REAL,
    PRIMARY KEY (run_id, row_key)
);
"""
# columns added after the first schema: (table, column, type); added to older files on open
ADDED = (
    ("runs", "fingerprint_id", "TEXT"),
    ("runs", "machine", "TEXT"),
    ("rows", "fingerprint_id", "TEXT"),
    ("rows", "fingerprint", "TEXT"),
    ("rows", "artifact_path", "TEXT"),
    ("rows", "peak_mb", "REAL"),  # the process's peak and the model's own share of it
    ("rows", "model_mb", "REAL"),
)


def default_history_path() -> Path:
    return Path(os.environ.get("EDGEKIT_HISTORY", Path.home() / ".edgekit" / "history.sqlite"))


def _wal(connection: sqlite3.Connection) -> None:
    """WAL mode. Switching to it needs the database to itself, and SQLite answers "locked" at
    once, without its busy handler, while another process creates the same database: retry."""
    for _ in range(100):
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.05)
    connection.execute("PRAGMA journal_mode=WAL")


def connect(path: Path | None = None) -> sqlite3.Connection:
    path = Path(path or default_history_path())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=30.0)
        connection.execute("PRAGMA busy_timeout=30000")
        _wal(connection)
        connection.executescript(SCHEMA)
        for table, column, kind in ADDED:
            present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                with contextlib.suppress(sqlite3.OperationalError):  # another run added it
                    connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    except sqlite3.DatabaseError as exc:
        raise UserInputError(
            f"{path}: not a readable edgekit history database ({exc}); move it aside "
            f"(mv {path} {path}.bad) and edgekit starts a new one"
        ) from None
    except OSError as exc:
        raise UserInputError(f"{path}: cannot open the history ({exc.strerror})") from None
    return connection


def record_run(results: Results, run_dir: Path, path: Path | None = None) -> str:
    """Store a run's rows in one transaction; returns its id."""
    run = results.run
    machine = run.get("machine") or {}
    connection = connect(path)
    try:
        with connection:
            connection.execute(
                "INSERT OR REPLACE INTO runs (id, name, created, model, model_digest, data, "
                "run_dir, git_commit, fingerprint_id, machine) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run["id"],
                    run["name"],
                    run["created"],
                    run["model"]["spec"],
                    run["model"]["digest"],
                    run["data"]["spec"],
                    str(Path(run_dir).resolve()),
                    _git_commit(),
                    machine.get("id"),
                    json.dumps(machine),
                ),
            )
            for row in results.rows:
                record = {k: v for k, v in row.to_dict().items() if k != "samples_ms"}
                artifact = str((Path(run_dir) / row.artifact).resolve()) if row.artifact else None
                connection.execute(
                    "INSERT OR REPLACE INTO rows (run_id, row_key, status, p50_ms, p90_ms, top1, "
                    "drop_points, drop_high, agreement, sqnr_db, size_bytes, record, "
                    "fingerprint_id, fingerprint, artifact_path, peak_mb, model_mb) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        run["id"],
                        row.key,
                        row.status,
                        row.p50,
                        row.latency.get("p90_ms"),
                        *_accuracy_figures(row.accuracy),
                        row.size_bytes,
                        json.dumps(record),
                        row.fingerprint.get("id"),
                        json.dumps(row.fingerprint),
                        artifact,
                        *_memory_figures(row.memory),
                    ),
                )
    except sqlite3.DatabaseError as exc:
        raise UserInputError(f"{path or default_history_path()}: cannot write ({exc})") from None
    finally:
        connection.close()
    return run["id"]


def _query(path: Path | None, sql: str, args: tuple = ()) -> list[tuple]:
    connection = connect(path)
    try:
        return connection.execute(sql, args).fetchall()
    except sqlite3.DatabaseError as exc:
        raise UserInputError(
            f"{path or default_history_path()}: not a readable edgekit history database ({exc})"
        ) from None
    finally:
        connection.close()


def list_runs(path: Path | None = None, limit: int = 20) -> list[dict[str, Any]]:
    found = _query(
        path,
        "SELECT r.id, r.name, r.created, r.model, r.data, r.git_commit, r.fingerprint_id, "
        "r.machine, COUNT(x.row_key), SUM(x.status = 'ok') FROM runs r "
        "LEFT JOIN rows x ON x.run_id = r.id GROUP BY r.id ORDER BY r.created DESC, r.id DESC "
        "LIMIT ?",
        (limit,),
    )
    runs = []
    for values in found:
        keys = ("id", "name", "created", "model", "data", "git_commit")
        run = dict(zip(keys, values[:6], strict=True))
        run["fingerprint_id"] = values[6]
        run["machine"] = json.loads(values[7]) if values[7] else None
        run["rows"], run["ok"] = values[8], values[9]
        runs.append(run)
    return runs


def resolve_run(reference: str, path: Path | None = None, exclude: str | None = None) -> str:
    """``last`` (the newest run other than ``exclude``), a run id, or a run directory."""
    if reference == "last":
        found = _query(
            path,
            "SELECT id FROM runs WHERE id != ? ORDER BY created DESC, id DESC LIMIT 1",
            (exclude or "",),
        )
        if not found:
            raise UserInputError("history: no earlier run to compare with (run edgekit run first)")
        return found[0][0]
    candidate = Path(reference).name if Path(reference).is_dir() else reference
    if not _query(path, "SELECT id FROM runs WHERE id = ?", (candidate,)):
        raise UserInputError(f"history: no run '{reference}' (see edgekit history)")
    return candidate


ROW_KEYS = (
    "key",
    "status",
    "p50_ms",
    "p90_ms",
    "top1",
    "drop_points",
    "drop_high",
    "agreement",
    "sqnr_db",
    "size_bytes",
    "fingerprint",
    "artifact_path",
    "peak_mb",
    "model_mb",
)


def run_rows(run_id: str, path: Path | None = None) -> dict[str, dict[str, Any]]:
    found = _query(
        path,
        "SELECT row_key, status, p50_ms, p90_ms, top1, drop_points, drop_high, agreement, "
        "sqnr_db, size_bytes, fingerprint, artifact_path, peak_mb, model_mb FROM rows "
        "WHERE run_id = ?",
        (run_id,),
    )
    rows = {}
    for values in found:
        row = dict(zip(ROW_KEYS, values, strict=True))
        row["fingerprint"] = json.loads(row["fingerprint"]) if row["fingerprint"] else None
        rows[row["key"]] = row
    return rows


def machine_mismatch(first: dict | None, second: dict | None, what: str) -> str | None:
    """One line naming the fingerprint fields that differ, or None when comparable."""
    fields = differing_fields(first, second)
    if not fields:
        return None
    return (
        f"{what} ran on different machines ({', '.join(fields)} differ); latency from "
        "different machines is not a comparison (pass --across-machines to show it labelled)"
    )


def compare_runs(
    run_a: str, run_b: str, path: Path | None = None, *, across_machines: bool = False
) -> list[dict[str, Any]]:
    """Per row key present in either run: the figures of both and B's change against A.
    Rows whose fingerprints differ are refused (UserInputError naming the fields) unless
    ``across_machines``; then their latency change carries ``across_machines`` and the fields."""
    rows_a, rows_b = run_rows(run_a, path), run_rows(run_b, path)
    deltas = []
    for key in sorted(set(rows_a) | set(rows_b)):
        a, b = rows_a.get(key), rows_b.get(key)
        entry: dict[str, Any] = {"key": key, "a": a, "b": b}
        if a and b and a["p50_ms"] and b["p50_ms"]:
            fields = differing_fields(a["fingerprint"], b["fingerprint"])
            if fields and not across_machines:
                raise UserInputError(
                    machine_mismatch(
                        a["fingerprint"], b["fingerprint"], f"{run_a} and {run_b} ({key})"
                    )
                )
            entry["p50_change_pct"] = 100.0 * (b["p50_ms"] - a["p50_ms"]) / a["p50_ms"]
            if fields:
                entry["across_machines"] = fields
        if a and b and a["top1"] is not None and b["top1"] is not None:
            entry["top1_change_points"] = 100.0 * (b["top1"] - a["top1"])
        if a and b and a["model_mb"] and b["model_mb"] is not None:
            # memory needs no interval across moments: the same file holds the same pages
            entry["model_mb_change_pct"] = 100.0 * (b["model_mb"] - a["model_mb"]) / a["model_mb"]
        deltas.append(entry)
    return deltas


def _memory_figures(memory: MemoryRecord | None) -> tuple[float | None, float | None]:
    if memory is None or memory.status != "ok":
        return None, None
    return memory.process_peak_mb, memory.model_mb


def _accuracy_figures(accuracy: AccuracyRecord | None) -> tuple[float | None, ...]:
    """top1, drop_points, the drop's upper bound, agreement, sqnr_db: the history's columns."""
    if accuracy is None:
        return None, None, None, None, None
    high = None if accuracy.drop_ci is None else accuracy.drop_ci[1]
    return accuracy.top1, accuracy.drop_points, high, accuracy.agreement, accuracy.sqnr_db


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None
