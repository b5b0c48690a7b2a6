"""The result row: one artifact (or the baseline) on one device with a thread count, as the run
matrix writes it to results.json and as report, history and gates read it. The only place a
row's label is made."""

from __future__ import annotations

import json
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from edgekit.common.metrics import VersusHost
from edgekit.common.schema import (
    check_fields,
    json_of,
    matches,
    record_from,
    record_in,
    record_spec,
    required_fields,
    type_name,
)
from edgekit.common.stats import LevelFit
from edgekit.errors import UserInputError
from edgekit.records import (
    AccuracyRecord,
    ArtifactProfile,
    AwareLoop,
    ClassChange,
    Collapse,
    Coverage,
    FlippedImage,
    Flips,
    GoldenLink,
    MemoryRecord,
    SharedFlips,
    Step,
)

RESULTS_SCHEMA_VERSION = 3  # 3: latency_fit and pool in place of noise_band; 2 still reads
INTEGER_IO = ("int8", "uint8")


def precision_label(record: dict[str, Any]) -> str:
    """``int8``, or ``int8 (2 layers float)`` for an artifact with float islands (a manifest or
    a row: reads ``recipe`` and ``keep_float``)."""
    recipe = str(record.get("recipe", ""))
    kept = record.get("keep_float") or (record.get("details") or {}).get("keep_float") or []
    return f"{recipe} ({len(kept)} layer{'s' if len(kept) != 1 else ''} float)" if kept else recipe


# the one vocabulary of an artifact's inputs and outputs, for export --io and audit --expect-io
IO_WORDS = {"float": "float32", "float32": "float32", "int8": "int8"}


def parse_io(word: str, option: str) -> str:
    """``float`` (or ``float32``) -> ``float32``, ``int8`` -> ``int8``: the I/O dtype a word
    names; anything else is one line naming ``option``."""
    if word not in IO_WORDS:
        raise UserInputError(f"{option} {word}: expected float or int8 (float32 means float)")
    return IO_WORDS[word]


def io_suffix(io_dtype: str | None) -> str:
    return "-io8" if io_dtype in INTEGER_IO else ""


def artifact_label(target: str, recipe: str, io_dtype: str | None) -> str:
    """``tflite/int8-io8``: what an artifact is, independent of where it runs."""
    return f"{target}/{recipe}{io_suffix(io_dtype)}"


@dataclass
class Row:
    """One result row. Its measured parts are records (``AccuracyRecord``, ``Coverage``,
    ``MemoryRecord``, ``LevelFit``, ``AwareLoop``), built from their JSON once, on reading."""

    kind: str  # baseline | artifact
    target: str  # "baseline" for the baseline row
    recipe: str
    status: str  # ok | failed | unavailable
    device: str | None = None
    threads: int | None = None
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
    round_sessions: list[int] = field(default_factory=list)  # the session each round ran in
    block_runs: int | None = None
    load_ms: float | None = None
    first_ms: float | None = None
    peak_rss_mb: float | None = None
    memory: MemoryRecord | None = None  # in parts
    foreign_cpu: float | None = None
    steal: float | None = None
    disturbed: bool = False
    throttled: bool = False  # a round it used ran with a core slowed or a trip crossed
    rounds_throttled: int = 0
    conditions: dict[str, Any] | None = None  # MHz and °C over its blocks (worker.conditions)
    attempts: int = 0
    runtime: dict[str, Any] = field(default_factory=dict)
    traits: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    interleaved_with: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    accuracy: AccuracyRecord | None = None
    validation: dict[str, Any] | None = None
    coverage: Coverage | None = None
    export_warnings: list[str] = field(default_factory=list)
    accuracy_aware: AwareLoop | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None  # a list in JSON
    noise_band: float | None = None  # before schema 3: how far two sessions of one file differed
    latency_fit: LevelFit | None = None  # its level in its pool's fit
    pool: dict[str, Any] | None = None  # how its pool's measuring went (sessions, why it stopped)
    gflops: float | None = None
    peak_fraction: float | None = None
    peak_kind: str | None = None  # which measured peak the fraction divides by
    hints: list[str] = field(default_factory=list)  # why int8/fp16 does not pay, when it does not
    assumed: list[str] = field(default_factory=list)  # what was inferred about a foreign file
    audit: dict[str, Any] | None = None  # edgekit audit's summary of the file
    node: str | None = None  # the machine (cluster node) that measured the row
    bench_started: str | None = None  # the window of the row's benchmark pool (UTC, ISO)
    bench_finished: str | None = None

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
        return None if self.accuracy is None else self.accuracy.drop_points

    @property
    def drop_high(self) -> float | None:
        ci = None if self.accuracy is None else self.accuracy.drop_ci
        return None if not ci else ci[1]

    @property
    def latency_comparable(self) -> bool:
        """May this row's latency enter speed-ups, the Pareto front and the recommendation?"""
        return bool(self.traits.get("latency_comparable"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The row as results.json keeps it: each record as its own ``to_dict`` writes it
        (``Coverage`` adds its fractions)."""
        payload = asdict(self)
        for name in RECORD_FIELDS:
            record = getattr(self, name)
            payload[name] = None if record is None else json_of(record)
        return payload

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Row:
        """A row from its JSON (checked first: ``check_row``), its records built from their
        objects; a key this edgekit does not know is dropped."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in payload.items() if key in known}
        for name, record in RECORD_FIELDS.items():
            if isinstance(values.get(name), dict):
                values[name] = record_from(record, values[name])
        return cls(**values)


# the row's fields that hold a record, built from JSON by Row.from_dict and written by to_dict
RECORD_FIELDS: dict[str, type] = {
    name: record
    for name, kind in typing.get_type_hints(Row).items()
    if (record := record_in(kind)[0]) is not None
}


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
# every nested record is checked against its dataclass's own fields and types (record_spec): no
# table of the same fields is kept here. The required keys are what the oldest readable files
# (schema 2) already wrote, where that is fewer than the record's fields without a default.
ACCURACY = record_spec(AccuracyRecord)
VERSUS_HOST = record_spec(VersusHost)
COVERAGE = record_spec(Coverage)
RUN = {
    "id": str,
    "name": str,
    "created": str,
    "model": {"spec": str, "name": str, "digest": str, "macs": int | None},
    "data": {"spec": str | None, "digest": str | None, "evaluation_samples": int},
    "config": {"max_drop": float, "point_estimate": bool},
    "machine": dict[str, Any],
    "peaks": dict[str, dict[str, float]],
    "profiles": list[dict[str, Any]],
    "absent_devices": dict[str, dict[str, Any]],
    "flips_across": dict[str, dict[str, Any]],
    "golden": dict[str, dict[str, Any]],  # run --golden: per model (older runs have none)
}
GOLDEN = record_spec(GoldenLink)
# the loop's steps: a list here, each checked below with the keys every readable file has
# (older files wrote fewer than Step's fields without a default)
AWARE = {**record_spec(AwareLoop), "steps": list[dict[str, Any]]}
STEP = record_spec(Step)
FLIPS = record_spec(Flips)  # what the report reads of each artifact's flips
CLASS_CHANGE = record_spec(ClassChange)
COLLAPSE = record_spec(Collapse)
FLIPPED_IMAGE = record_spec(FlippedImage)
PROFILE = record_spec(ArtifactProfile)  # its layers: LayerTime objects
SHARED_FLIPS = record_spec(SharedFlips)  # each pair checked against FlipPair (check_fields)
MEMORY = record_spec(MemoryRecord)
# a record field is checked field by field below, with the keys the oldest readable files have
ROW_TYPES = {
    name: kind for name, kind in typing.get_type_hints(Row).items() if name not in RECORD_FIELDS
}
LATENCY_FIT = record_spec(LevelFit)


def check_each(
    items: list[Any], spec: dict[str, Any], where: str, required: tuple[str, ...] = ()
) -> None:
    for index, item in enumerate(items):
        check_fields(item, spec, f"{where}[{index}]", required)


def check_run(run: dict[str, Any], where: str) -> None:
    """A results.json's run object, with the profiles and shared flips the report reads."""
    check_fields(run, RUN, where, ("id", "model", "data", "config"))
    if not isinstance(run["config"], dict):
        raise UserInputError(f"{where}.config: must be an object, got {run['config']!r:.60}")
    for index, profile in enumerate(run.get("profiles") or []):
        check_fields(
            profile,
            PROFILE,
            f"{where}.profiles[{index}]",
            ("label", "method", "layers", "ops_ms", "total_ms"),
        )
    for model, shared in (run.get("flips_across") or {}).items():
        place = f"{where}.flips_across.{model}"
        check_fields(shared, SHARED_FLIPS, place, required_fields(SharedFlips))
    for model, bundle in (run.get("golden") or {}).items():
        check_fields(bundle, GOLDEN, f"{where}.golden.{model}")


def _check_accuracy(accuracy: dict[str, Any], where: str) -> None:
    check_fields(accuracy, ACCURACY, where, ("drop_points", "drop_ci"))
    if accuracy.get("flips"):
        check_fields(accuracy["flips"], FLIPS, f"{where}.flips", required_fields(Flips))
    check_each(
        accuracy.get("per_class") or [],
        CLASS_CHANGE,
        f"{where}.per_class",
        required_fields(ClassChange),
    )
    if accuracy.get("collapse"):
        check_fields(accuracy["collapse"], COLLAPSE, f"{where}.collapse", ("collapsed",))
    gallery = accuracy.get("gallery") or []
    check_each(gallery, FLIPPED_IMAGE, f"{where}.gallery", required_fields(FlippedImage))


def check_row(entry: Any, where: str) -> Row:
    """A results.json row, every field of its type, nested figures included."""
    if not isinstance(entry, dict) or any(key not in entry for key in REQUIRED_ROW_FIELDS):
        raise UserInputError(f"{where}: not a result row (needs {', '.join(REQUIRED_ROW_FIELDS)})")
    for key, value in entry.items():
        kind = ROW_TYPES.get(key)
        if kind is not None and not matches(value, kind):
            raise UserInputError(f"{where}.{key}: must be {type_name(kind)}, got {value!r:.60}")
    if entry.get("accuracy"):
        _check_accuracy(entry["accuracy"], f"{where}.accuracy")
    nested = (
        ("coverage", COVERAGE, ("total_ops", "fast_ops")),
        ("memory", MEMORY, ("status",)),
        ("latency_fit", LATENCY_FIT, tuple(LATENCY_FIT)),
    )
    for key, spec, required in nested:
        if entry.get(key):
            check_fields(entry[key], spec, f"{where}.{key}", required)
    versus = (entry.get("accuracy") or {}).get("versus_host")
    if versus:
        place = f"{where}.accuracy.versus_host"
        check_fields(versus, VERSUS_HOST, place, required_fields(VersusHost))
    if entry.get("accuracy_aware") is not None:
        aware = entry["accuracy_aware"]
        check_fields(aware, AWARE, f"{where}.accuracy_aware", required_fields(AwareLoop))
        for index, step in enumerate(aware["steps"]):
            check_fields(
                step,
                STEP,
                f"{where}.accuracy_aware.steps[{index}]",
                ("step", "keep_float", "drop_points", "drop_ci"),
            )
    return Row.from_dict(entry)


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
    if not isinstance(payload["rows"], list):
        raise UserInputError(f"{path}: 'rows' must be a list")
    check_run(payload["run"], f"{path}: run")
    rows = [
        check_row(entry, f"{path}: rows[{index}]") for index, entry in enumerate(payload["rows"])
    ]
    return Results(payload["run"], rows, version)
