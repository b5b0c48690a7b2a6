"""The result row: one artifact (or the baseline) on one device with a thread count, as the run
matrix writes it to results.json and as report, history and gates read it. The only place a
row's label is made."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError

RESULTS_SCHEMA_VERSION = 2
INTEGER_IO = ("int8", "uint8")


def precision_label(record: dict[str, Any]) -> str:
    """``int8``, or ``int8 (2 layers float)`` for an artifact with float islands (a manifest or
    a row: reads ``recipe`` and ``keep_float``)."""
    recipe = str(record.get("recipe", ""))
    details = record.get("details") or {}
    kept = record.get("keep_float") or details.get("keep_float") or []
    if not kept:
        return recipe
    return f"{recipe} ({len(kept)} layer{'s' if len(kept) != 1 else ''} float)"


def io_suffix(io_dtype: str | None) -> str:
    return "-io8" if io_dtype in INTEGER_IO else ""


def artifact_label(target: str, recipe: str, io_dtype: str | None) -> str:
    """``tflite/int8-io8``: what an artifact is, independent of where it runs."""
    return f"{target}/{recipe}{io_suffix(io_dtype)}"


@dataclass
class Row:
    kind: str  # baseline | artifact
    target: str  # "baseline" for the baseline row
    recipe: str
    device: str | None
    threads: int | None
    status: str  # ok | failed | unavailable
    stage: str = "run"  # export | run
    error: str | None = None
    model: str | None = None
    artifact: str | None = None  # path relative to the run directory
    io_dtype: str | None = None
    keep_float: list[str] = field(default_factory=list)
    size_bytes: int | None = None
    latency: dict[str, float] = field(default_factory=dict)
    samples_ms: list[float] = field(default_factory=list)
    rounds_ms: list[float] = field(default_factory=list)
    block_runs: int | None = None
    load_ms: float | None = None
    first_ms: float | None = None
    peak_rss_mb: float | None = None
    foreign_cpu: float | None = None
    steal: float | None = None
    disturbed: bool = False
    attempts: int = 0
    runtime: dict[str, Any] = field(default_factory=dict)
    traits: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    interleaved_with: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    accuracy: dict[str, Any] | None = None
    validation: dict[str, Any] | None = None
    coverage: dict[str, Any] | None = None
    export_warnings: list[str] = field(default_factory=list)
    accuracy_aware: dict[str, Any] | None = None
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    noise_band: float | None = None  # two sessions of one file differ by up to this fraction
    gflops: float | None = None
    peak_fraction: float | None = None
    peak_kind: str | None = None  # which measured peak the fraction divides by
    hints: list[str] = field(default_factory=list)  # why int8/fp16 does not pay, when it does not

    @property
    def precision(self) -> str:
        return precision_label({"recipe": self.recipe, "keep_float": self.keep_float})

    @property
    def name(self) -> str:
        """What was timed, as the interleaver labels it (``tflite/int8``, ``baseline/fp32``)."""
        if self.kind == "baseline":
            return "baseline/fp32"
        return artifact_label(self.target, self.recipe, self.io_dtype)

    @property
    def label(self) -> str:
        what = "baseline" if self.kind == "baseline" else f"{self.target}/{self.precision}"
        return f"{what}{io_suffix(self.io_dtype)} @ {self.device} x{self.threads}"

    @property
    def key(self) -> str:
        """The row's identity across runs (history, compare, latency gates)."""
        model = f"{self.model}:" if self.model else ""
        return (
            f"{model}{self.target}/{self.recipe}{io_suffix(self.io_dtype)}"
            f"@{self.device}x{self.threads}"
        )

    @property
    def p50(self) -> float | None:
        return self.latency.get("p50_ms")

    @property
    def drop(self) -> float | None:
        return None if not self.accuracy else self.accuracy["drop_points"]

    @property
    def drop_high(self) -> float | None:
        return None if not self.accuracy else self.accuracy["drop_ci"][1]

    @property
    def latency_comparable(self) -> bool:
        """May this row's latency enter speed-ups, the Pareto front and the recommendation?"""
        return bool(self.traits.get("latency_comparable"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Row:
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in payload.items() if key in known})


@dataclass
class Results:
    run: dict[str, Any]
    rows: list[Row]
    schema_version: int = RESULTS_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "run": self.run,
            "rows": [row.to_dict() for row in self.rows],
        }


REQUIRED_ROW_FIELDS = ("kind", "target", "recipe", "status")


def load_results(run_dir: Path) -> Results:
    """A run's results.json, checked: a file edgekit did not write is one line, not a traceback."""
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise UserInputError(f"{run_dir}: no results.json (is it a run directory?)")
    try:
        payload = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(payload, dict) or "rows" not in payload or "run" not in payload:
        raise UserInputError(f"{path}: not an edgekit results file (no run/rows)")
    version = payload.get("schema_version")
    if not isinstance(version, int) or not 2 <= version <= RESULTS_SCHEMA_VERSION:
        raise UserInputError(
            f"{path}: results schema {version!r} is not one this edgekit reads "
            f"(2 to {RESULTS_SCHEMA_VERSION}; re-run edgekit run)"
        )
    if not isinstance(payload["run"], dict) or not isinstance(payload["rows"], list):
        raise UserInputError(f"{path}: 'run' must be an object and 'rows' a list")
    rows = []
    for index, entry in enumerate(payload["rows"]):
        if not isinstance(entry, dict) or any(key not in entry for key in REQUIRED_ROW_FIELDS):
            raise UserInputError(
                f"{path}: row {index} is not a result row (needs {', '.join(REQUIRED_ROW_FIELDS)})"
            )
        try:
            rows.append(Row.from_dict(entry))
        except TypeError as exc:
            raise UserInputError(f"{path}: row {index}: {exc}") from None
    return Results(payload["run"], rows, version)
