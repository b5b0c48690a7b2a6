"""Every option of ``edgekit run``; also what ``edgekit.toml`` holds under ``[run]``, checked
against the types below (a wrong type or an unknown key is one line naming the file and key)."""

from __future__ import annotations

import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from edgekit.common.budget import DropBudget
from edgekit.common.schema import matches, type_name
from edgekit.devices import DEFAULT_DEVICES, parse_devices
from edgekit.errors import UserInputError
from edgekit.targets import target_names
from edgekit.worker.latency import LatencyProtocol, NoiseGuard, check_session_gap


@dataclass
class RunConfig:
    model: str = "digits-mobilenet"
    data: str = "digits"
    weights: str | None = None  # a module:factory model's state-dict file (one model only)
    targets: list[str] = field(default_factory=target_names)
    recipes: list[str] = field(default_factory=lambda: ["fp32", "fp16", "int8", "int8-dynamic"])
    devices: list[str] = field(default_factory=lambda: list(DEFAULT_DEVICES))
    threads: list[int] = field(default_factory=lambda: [1])
    calibration_samples: int = 200
    max_drop: float = 1.0
    name: str | None = None
    runs_dir: str = "runs"
    serial: str | None = None  # android: the adb serial
    arm64_cpu: str | None = None  # arm64-emu core (None: its default, cortex-a76)
    warmup: int = 10
    min_runs: int = 50
    min_seconds: float = 1.0
    rounds: int = 9  # planned interleaved rounds per device pool, at least
    sessions: int = 3  # planned sessions of every side (reopened between them)
    session_gap: float = 0.0  # seconds before each new session (sessions spread over minutes)
    # the stopping rule: sessions are added until every interval is within this fraction of its
    # ratio (None: the planned sessions only), or another would not fit in bench_budget_s
    precision: float | None = 0.05
    bench_budget_s: float = 90.0
    noise_guard: bool = True
    accuracy_aware: bool = False  # int8: keep the most harmful layers float until within max_drop
    point_estimate: bool = False  # decide on the drop itself, not its interval's upper bound
    timeout: float = 600.0
    data_for: dict[str, str] = field(default_factory=dict)  # model spec -> its dataset
    profile: bool = True  # the report's per-layer section: host-CPU artifacts, first thread count
    profile_runs: int = 30  # profiled invokes per artifact
    export_cache: bool = True  # reuse an export of the same inputs on this machine (export_cache)
    tune: bool = False  # search each artifact's fastest runtime options before measuring it
    tune_budget_s: float = (
        120.0  # seconds for every artifact's search together (tune: equal shares)
    )
    golden: bool = False  # a golden bundle per recommended artifact, linked from the report

    def model_specs(self) -> list[str]:
        """The run's models: ``model`` holds one or several, comma-separated."""
        return [spec.strip() for spec in self.model.split(",") if spec.strip()]

    def validate(self) -> None:
        from edgekit.quantize.recipes import get_recipe
        from edgekit.targets import parse_targets

        parse_targets(",".join(self.targets))
        specs = self.model_specs()
        if not specs:
            raise UserInputError("model: give at least one model")
        if len(set(specs)) != len(specs):
            raise UserInputError(f"model: a model is named twice in '{self.model}'")
        if self.weights is not None and len(specs) != 1:
            raise UserInputError(f"weights: applies to one model, not {len(specs)}")
        unknown = sorted(set(self.data_for) - set(specs))
        if unknown:
            raise UserInputError(f"data_for: {unknown[0]} is not one of the run's models")
        for recipe in self.recipes:
            get_recipe(recipe)
        parse_devices(",".join(self.devices) or " ")
        self.check_values()

    def check_values(self) -> None:
        """Every count, share and budget within its range (what a config file alone can get
        wrong; ``from_toml`` names the file)."""
        if not self.threads or min(self.threads) < 1:
            raise UserInputError(f"threads must be positive counts, got {self.threads}")
        counts = ("calibration_samples", "warmup", "min_runs", "rounds", "sessions", "profile_runs")
        for name in counts:
            if getattr(self, name) < (0 if name == "warmup" else 1):
                raise UserInputError(f"{name} must be positive, got {getattr(self, name)}")
        check_session_gap(self.session_gap, self.sessions)
        if self.precision is not None and not 0.0 < self.precision < 1.0:
            raise UserInputError(f"precision must be above 0 and below 1, got {self.precision}")
        if self.bench_budget_s <= 0:
            raise UserInputError(f"bench_budget_s must be > 0 seconds, got {self.bench_budget_s}")
        if self.tune_budget_s <= 0:
            raise UserInputError(f"tune_budget_s must be > 0 seconds, got {self.tune_budget_s}")
        if self.max_drop < 0 or self.min_seconds < 0 or self.timeout <= 0:
            raise UserInputError("max_drop and min_seconds must be >= 0, timeout > 0")

    def protocol(self) -> LatencyProtocol:
        """The latency protocol of this run's device pools."""
        return LatencyProtocol(
            self.warmup,
            self.min_runs,
            self.min_seconds,
            rounds=self.rounds,
            sessions=self.sessions,
            session_gap_s=self.session_gap,
            precision=self.precision,
            budget_s=self.bench_budget_s,
        )

    @property
    def budget(self) -> DropBudget:
        """The accuracy budget of this run: ``max_drop`` points, held to the drop's upper bound
        (or, ``point_estimate``, the drop)."""
        return DropBudget.of(self.max_drop, point_estimate=self.point_estimate)

    def guard(self) -> NoiseGuard:
        """The noise guard of this run's timing (off with ``noise_guard = false``)."""
        return NoiseGuard(enabled=self.noise_guard)

    def device_options(self, device: str) -> dict[str, Any]:
        """The options of ``device`` this config sets (serial, arm64 CPU model)."""
        from edgekit.devices import device_class

        given = {"serial": self.serial, "cpu": self.arm64_cpu}
        return {k: v for k, v in given.items() if k in device_class(device).options}

    @classmethod
    def from_toml(cls, path: Path) -> RunConfig:
        from edgekit.common.fileio import read_toml

        config = cls(**checked(run_section(read_toml(path), path), path))
        try:
            config.check_values()
        except UserInputError as exc:
            raise UserInputError(f"{path}: {exc}") from None
        return config

    def to_toml(self) -> str:
        lines = ["# edgekit run --config edgekit.toml", "[run]"]
        for key, value in asdict(self).items():
            if value is None and key == "precision":  # its default is a number: say "off"
                lines.append('precision = "off"')
            if value is None:
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        return "\n".join(lines) + "\n"


def run_section(payload: dict[str, Any], path: Path) -> dict[str, Any]:
    """The run's options in a config file: its [run] table, or its top level."""
    # [model] describes model files another tool made (edgekit.artifacts.foreign), [devices.X]
    # the boards (edgekit.devices.ssh.board), not the run
    others = ("model", "devices")
    section = payload.get("run", {k: v for k, v in payload.items() if k not in others})
    if not isinstance(section, dict):
        raise UserInputError(f"{path}: [run] must be a table")
    return section


def options_named(path: Path) -> set[str]:
    """The run options a config file sets; the rest keep their defaults."""
    from edgekit.common.fileio import read_toml

    return set(run_section(read_toml(path), path))


def checked(section: dict[str, Any], path: Path) -> dict[str, Any]:
    """``section`` with every key known and every value of its field's type."""
    hints = typing.get_type_hints(RunConfig)
    known = {f.name for f in fields(RunConfig)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise UserInputError(f"{path}: unknown option(s) {', '.join(unknown)} under [run]")
    # TOML has no null: "off" is None in a field that may be None (precision = "off")
    section = {
        key: None if value == "off" and matches(None, hints[key]) else value
        for key, value in section.items()
    }
    for key, value in section.items():
        if not matches(value, hints[key]):
            raise UserInputError(f"{path}: '{key}' must be {type_name(hints[key])}, got {value!r}")
    return {key: float(v) if hints[key] is float else v for key, v in section.items()}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table
        return (
            "{" + ", ".join(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)
