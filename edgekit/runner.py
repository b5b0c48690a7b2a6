"""``edgekit run``: the whole matrix (targets x recipes x devices x threads) plus the baseline,
measured in one run, into a run directory with results.json and the report files.

A failed row (an export error, a crash, a timeout, a device that is not available) is recorded
with its reason and the run goes on."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from edgekit.bench import LatencyRecord, NoiseGuard, Protocol, bench_artifact, bench_baseline
from edgekit.errors import EdgekitError, UserInputError
from edgekit.fileio import write_json_atomic

RESULTS_SCHEMA_VERSION = 1
DEVICES = ("cpu", "gpu", "android", "arm64-emu")


@dataclass
class RunConfig:
    """Every option of ``edgekit run``; also what ``edgekit.toml`` holds under ``[run]``."""

    model: str = "digits-mobilenet"
    data: str = "digits"
    targets: list[str] = field(default_factory=lambda: ["tflite", "executorch", "onnx"])
    recipes: list[str] = field(default_factory=lambda: ["fp32", "fp16", "int8", "int8-dynamic"])
    devices: list[str] = field(default_factory=lambda: ["cpu", "gpu"])
    threads: list[int] = field(default_factory=lambda: [1])
    calibration_samples: int = 200
    max_drop: float = 1.0
    name: str | None = None
    runs_dir: str = "runs"
    serial: str | None = None
    arm64_cpu: str | None = None  # arm64-emu core (None: its default, cortex-a76)
    warmup: int = 10
    min_runs: int = 50
    min_seconds: float = 1.0
    noise_guard: bool = True
    accuracy_aware: bool = False  # int8: keep the most harmful layers float until within max_drop
    timeout: float = 600.0

    def validate(self) -> None:
        from edgekit.quantize.recipes import get_recipe
        from edgekit.targets import parse_targets

        parse_targets(",".join(self.targets))
        for recipe in self.recipes:
            get_recipe(recipe)
        for device in self.devices:
            if device not in DEVICES:
                raise UserInputError(
                    f"unknown device '{device}' (choose from {', '.join(DEVICES)})"
                )
        if not self.threads or min(self.threads) < 1:
            raise UserInputError(f"threads must be positive counts, got {self.threads}")

    @classmethod
    def from_toml(cls, path: Path) -> RunConfig:
        try:
            payload = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UserInputError(f"{path}: config file not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserInputError(f"{path}: not valid TOML ({exc})") from None
        section = payload.get("run", payload)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise UserInputError(f"{path}: unknown option(s) {', '.join(unknown)} under [run]")
        return cls(**section)

    def to_toml(self) -> str:
        lines = ["# edgekit run --config edgekit.toml", "[run]"]
        for key, value in asdict(self).items():
            if value is None:
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


@dataclass
class RunResult:
    run_dir: Path
    results: dict[str, Any]


Progress = Callable[[str], None]


def run_matrix(config: RunConfig, progress: Progress | None = None) -> RunResult:
    """Export, validate, evaluate and benchmark every combination; write the run directory."""
    from edgekit.accuracy import evaluate_artifact
    from edgekit.data import load_dataset
    from edgekit.export import export_artifact
    from edgekit.models import load_model

    config.validate()
    say = progress or (lambda message: None)
    source = load_model(config.model, quiet=True)
    dataset = load_dataset(config.data, source.preprocess)
    created = datetime.now(UTC)
    name = config.name or source.name
    run_dir = Path(config.runs_dir) / f"{created.strftime('%Y%m%d-%H%M%S')}-{name}"
    artifacts_dir = run_dir / "artifacts"
    artifacts_dir.mkdir(parents=True, exist_ok=False)
    protocol = Protocol(config.warmup, config.min_runs, config.min_seconds)
    guard = NoiseGuard(enabled=config.noise_guard)
    rows: list[dict[str, Any]] = []
    sample = dataset.evaluation.x[:1]

    say("measuring the machine's matmul peaks")
    peaks = _peaks(config.threads)
    for threads in config.threads:
        say(f"baseline: {source.name} fp32 in its own framework, {threads} thread(s)")
        baseline = bench_baseline(
            config.model, "auto", threads, protocol, guard, sample, config.timeout
        )
        rows.append(_row("baseline", baseline, None, None))

    exported = []
    for target in config.targets:
        for recipe in config.recipes:
            say(f"export {target}/{recipe}")
            try:
                if recipe == "int8" and config.accuracy_aware:
                    from edgekit.quantize.accuracy_aware import export_accuracy_aware

                    aware = export_accuracy_aware(
                        source,
                        dataset,
                        target,
                        config.max_drop,
                        artifacts_dir,
                        config.calibration_samples,
                        bench_protocol=protocol,
                        bench_guard=guard,
                    )
                    exported.append(aware.artifact)
                    continue
                result = export_artifact(
                    source, dataset, target, recipe, artifacts_dir, config.calibration_samples
                )
                exported.append(result.artifact)
            except EdgekitError as exc:
                rows.append(_failed_row(target, recipe, "export", exc))
    for artifact in exported:
        for device in config.devices:
            say(f"evaluate {artifact.label} on {device}")
            try:
                if device == "arm64-emu":
                    from edgekit.devices.arm64_emu import evaluate_arm64

                    accuracy = evaluate_arm64(
                        str(artifact.path), config.data, config.arm64_cpu
                    ).to_dict()
                else:
                    accuracy = evaluate_artifact(
                        str(artifact.path), config.data, device, source=source, dataset=dataset
                    ).to_dict()
                error = None
            except EdgekitError as exc:
                accuracy, error = None, exc
            for threads in config.threads:
                if error is not None:
                    rows.append(
                        _failed_row(
                            artifact.target, artifact.recipe, device, error, threads, artifact
                        )
                    )
                    continue
                say(f"bench {artifact.label} on {device}, {threads} thread(s)")
                if device == "android":
                    from edgekit.devices.android import bench_on_android

                    record = bench_on_android(artifact, config.serial, threads, protocol)
                elif device == "arm64-emu":  # labelled emulated; _with_derived gives no speed-up
                    from edgekit.devices.arm64_emu import bench_arm64

                    record = bench_arm64(
                        artifact,
                        threads,
                        protocol,
                        config.arm64_cpu,
                        timeout_s=config.timeout,
                        sample=sample,
                    )
                else:
                    record = bench_artifact(
                        artifact.path, device, threads, protocol, guard, sample, config.timeout
                    )
                rows.append(_row("artifact", record, artifact, accuracy))
    results = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "run": {
            "id": run_dir.name,
            "name": name,
            "created": created.isoformat(timespec="seconds"),
            "model": {
                "spec": source.spec,
                "name": source.name,
                "digest": source.digest,
                "macs": _macs(source),
            },
            "data": {
                "spec": config.data,
                "digest": dataset.digest,
                "evaluation_samples": len(dataset.evaluation),
            },
            "config": asdict(config),
            "machine": _machine(),
            "peaks": peaks,
        },
        "rows": _with_derived(rows, peaks, _macs(source)),
    }
    write_json_atomic(run_dir / "results.json", results)
    return RunResult(run_dir, results)


def _row(kind: str, record: LatencyRecord, artifact: Any, accuracy: dict | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": kind,
        "target": record.target or "baseline",
        "recipe": record.recipe or "fp32",
        "device": record.device,
        "threads": record.threads,
        "status": record.status,
        "error": record.error,
        "latency": record.stats,
        "samples_ms": record.samples_ms,
        "load_ms": record.load_ms,
        "first_ms": record.first_ms,
        "peak_rss_mb": record.peak_rss_mb,
        "foreign_cpu": record.foreign_cpu,
        "disturbed": record.disturbed,
        "attempts": record.attempts,
        "runtime": record.runtime,
        "warnings": list(record.warnings),
        "accuracy": accuracy,
    }
    if artifact is not None:
        manifest = artifact.manifest
        row.update(
            artifact=f"artifacts/{artifact.path.name}",
            size_bytes=manifest["file"]["size"],
            validation=manifest["validation"],
            coverage=manifest["coverage"],
            export_warnings=manifest.get("warnings", []),
            io_dtype=manifest["input"]["dtype"],
            keep_float=manifest.get("keep_float", []),
            accuracy_aware=manifest.get("accuracy_aware"),
        )
    return row


def _failed_row(
    target: str,
    recipe: str,
    stage: str,
    error: EdgekitError,
    threads: int | None = None,
    artifact: Any = None,
) -> dict[str, Any]:
    from edgekit.errors import DeviceUnavailable

    unavailable = isinstance(error, DeviceUnavailable)  # a device this machine lacks
    row = {
        "kind": "artifact",
        "target": target,
        "recipe": recipe,
        "device": stage if stage != "export" else None,
        "threads": threads,
        "status": "unavailable" if unavailable else "failed",
        "stage": "export" if stage == "export" else "run",
        "error": str(error),
        "latency": {},
        "samples_ms": [],
        "accuracy": None,
        "warnings": [],
    }
    if artifact is not None:
        row.update(
            artifact=f"artifacts/{artifact.path.name}",
            size_bytes=artifact.manifest["file"]["size"],
            coverage=artifact.manifest["coverage"],
            validation=artifact.manifest["validation"],
        )
    return row


def _with_derived(
    rows: list[dict[str, Any]], peaks: dict, macs: int | None
) -> list[dict[str, Any]]:
    """Speed-up against the baseline of the same thread count, and achieved GFLOP/s (GOP/s)."""
    baselines = {
        row["threads"]: row for row in rows if row["kind"] == "baseline" and row["status"] == "ok"
    }
    for row in rows:
        p50 = row.get("latency", {}).get("p50_ms")
        base = baselines.get(row.get("threads"))
        row["speedup"] = None
        row["gflops"] = None
        row["peak_fraction"] = None
        if p50 is None:
            continue
        real_device = row["device"] == "cpu" or (
            row["device"] == "gpu" and not row.get("runtime", {}).get("software_vulkan")
        )  # emulated and software-Vulkan latencies never enter speed-ups
        if base is not None and row["kind"] == "artifact" and real_device:
            row["speedup"] = base["latency"]["p50_ms"] / p50
        if macs:
            row["gflops"] = 2 * macs / (p50 / 1e3) / 1e9
            peak = peaks.get(str(row["threads"]), {})
            integer = row.get("recipe") == "int8"
            reference = peak.get("int8_gops" if integer else "fp32_gflops")
            if reference and row["device"] in ("cpu", "baseline"):
                row["peak_fraction"] = row["gflops"] / reference
    return rows


def _macs(source: Any) -> int | None:
    if source.framework != "torch":
        return None
    import torch

    from edgekit.architectures import count_macs

    return count_macs(source.module, torch.from_numpy(source.example_input()))


def _peaks(threads: list[int]) -> dict[str, dict[str, float]]:
    from edgekit.noise import wait_for_quiet
    from edgekit.peak import measure_peaks

    peaks = {}
    for count in threads:
        wait_for_quiet()
        peaks[str(count)] = measure_peaks(count)
    return peaks


def _machine() -> dict[str, Any]:
    import os
    import platform

    from edgekit.doctor import cpu_model
    from edgekit.versions import tool_versions

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "versions": tool_versions(),
    }
