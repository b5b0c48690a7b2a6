"""The run history: every run's rows in sqlite (``~/.edgekit/history.sqlite`` or ``--history``),
so ``edgekit compare`` and ``edgekit check --against last`` can see earlier runs.

WAL mode and a busy timeout make two runs writing at once safe: each run is one transaction."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created TEXT NOT NULL,
    model TEXT NOT NULL,
    model_digest TEXT NOT NULL,
    data TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    git_commit TEXT
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
    PRIMARY KEY (run_id, row_key)
);
"""


def default_history_path() -> Path:
    return Path(os.environ.get("EDGEKIT_HISTORY", Path.home() / ".edgekit" / "history.sqlite"))


def connect(path: Path | None = None) -> sqlite3.Connection:
    path = Path(path or default_history_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=30.0)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA busy_timeout=30000")
    connection.executescript(SCHEMA)
    return connection


def row_key(row: dict[str, Any]) -> str:
    io = "-io8" if row.get("io_dtype") in ("int8", "uint8") else ""
    return f"{row['target']}/{row['recipe']}{io}@{row.get('device')}x{row.get('threads')}"


def record_run(results: dict[str, Any], run_dir: Path, path: Path | None = None) -> str:
    """Store a run's rows; returns its id."""
    run = results["run"]
    connection = connect(path)
    try:
        with connection:  # one transaction per run
            connection.execute(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run["id"],
                    run["name"],
                    run["created"],
                    run["model"]["spec"],
                    run["model"]["digest"],
                    run["data"]["spec"],
                    str(Path(run_dir).resolve()),
                    _git_commit(),
                ),
            )
            for row in results["rows"]:
                latency = row.get("latency") or {}
                accuracy = row.get("accuracy") or {}
                connection.execute(
                    "INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run["id"],
                        row_key(row),
                        row["status"],
                        latency.get("p50_ms"),
                        latency.get("p90_ms"),
                        accuracy.get("top1"),
                        accuracy.get("drop_points"),
                        (accuracy.get("drop_ci") or [None, None])[1],
                        accuracy.get("agreement"),
                        accuracy.get("sqnr_db"),
                        row.get("size_bytes"),
                        json.dumps({k: v for k, v in row.items() if k != "samples_ms"}),
                    ),
                )
    finally:
        connection.close()
    return run["id"]


def list_runs(path: Path | None = None, limit: int = 20) -> list[dict[str, Any]]:
    connection = connect(path)
    try:
        cursor = connection.execute(
            "SELECT r.id, r.name, r.created, r.model, r.data, r.git_commit, COUNT(x.row_key), "
            "SUM(x.status = 'ok') FROM runs r LEFT JOIN rows x ON x.run_id = r.id "
            "GROUP BY r.id ORDER BY r.created DESC, r.id DESC LIMIT ?",
            (limit,),
        )
        keys = ("id", "name", "created", "model", "data", "git_commit", "rows", "ok")
        return [dict(zip(keys, values, strict=True)) for values in cursor.fetchall()]
    finally:
        connection.close()


def resolve_run(reference: str, path: Path | None = None, exclude: str | None = None) -> str:
    """``last`` (the newest run other than ``exclude``), a run id, or a run directory."""
    connection = connect(path)
    try:
        if reference == "last":
            row = connection.execute(
                "SELECT id FROM runs WHERE id != ? ORDER BY created DESC, id DESC LIMIT 1",
                (exclude or "",),
            ).fetchone()
            if row is None:
                raise UserInputError(
                    "history: no earlier run to compare with (run edgekit run first)"
                )
            return row[0]
        candidate = Path(reference).name if Path(reference).is_dir() else reference
        row = connection.execute("SELECT id FROM runs WHERE id = ?", (candidate,)).fetchone()
        if row is None:
            raise UserInputError(f"history: no run '{reference}' (see edgekit history)")
        return row[0]
    finally:
        connection.close()


def run_rows(run_id: str, path: Path | None = None) -> dict[str, dict[str, Any]]:
    connection = connect(path)
    try:
        cursor = connection.execute(
            "SELECT row_key, status, p50_ms, p90_ms, top1, drop_points, drop_high, agreement, "
            "sqnr_db, size_bytes FROM rows WHERE run_id = ?",
            (run_id,),
        )
        keys = (
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
        )
        return {values[0]: dict(zip(keys, values, strict=True)) for values in cursor.fetchall()}
    finally:
        connection.close()


def compare_runs(run_a: str, run_b: str, path: Path | None = None) -> list[dict[str, Any]]:
    """Per row key present in either run: the figures of both and B's change against A."""
    rows_a, rows_b = run_rows(run_a, path), run_rows(run_b, path)
    deltas = []
    for key in sorted(set(rows_a) | set(rows_b)):
        a, b = rows_a.get(key), rows_b.get(key)
        entry: dict[str, Any] = {"key": key, "a": a, "b": b}
        if a and b and a["p50_ms"] and b["p50_ms"]:
            entry["p50_change_pct"] = 100.0 * (b["p50_ms"] - a["p50_ms"]) / a["p50_ms"]
        if a and b and a["top1"] is not None and b["top1"] is not None:
            entry["top1_change_points"] = 100.0 * (b["top1"] - a["top1"])
        deltas.append(entry)
    return deltas


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
