"""The ``edgekit`` command line: a thin layer over the Python API.

Every user error is one line on stderr and a non-zero exit (2 for bad input, 1 for a failed
validation or gate); ``--debug`` shows the traceback instead."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ start-up chatter

import typer
from rich.console import Console
from rich.table import Table

from edgekit.errors import EdgekitError

app = typer.Typer(
    help="Export an image classifier to TFLite, ExecuTorch and ONNX, quantize it, and measure it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
zoo_app = typer.Typer(help="The built-in models: list, train, show.", no_args_is_help=True)
app.add_typer(zoo_app, name="zoo")
device_app = typer.Typer(help="Emulated devices: set one up.", no_args_is_help=True)
app.add_typer(device_app, name="device")
# piped output (CI logs, files) gets wide tables instead of rich's 80-column default
console = Console() if sys.stdout.isatty() else Console(width=180)
err_console = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=180)

ModelOption = Annotated[
    str, typer.Option("--model", "-m", help="zoo name, module:factory, .pt2 or .keras")
]
DataOption = Annotated[
    str, typer.Option("--data", "-d", help="digits, a class-folder directory or .npz")
]
WeightsOption = Annotated[
    Path | None, typer.Option("--weights", help="state-dict file for a module:factory model")
]
ShapeOption = Annotated[
    str | None, typer.Option("--input-shape", help="C,H,W when the model does not declare it")
]


def _shape(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    try:
        channels, height, width = (int(part) for part in text.split(","))
    except ValueError:
        raise EdgekitError(f"--input-shape '{text}': expected C,H,W such as 3,224,224") from None
    return channels, height, width


@zoo_app.command("list")
def zoo_list() -> None:
    """List the zoo's models."""
    from edgekit.zoo import ZOO

    table = Table("name", "input", "classes", "weights", "description")
    for entry in ZOO.values():
        pre = entry.preprocess
        shape = f"{pre.channels}x{pre.input_size[0]}x{pre.input_size[1]}"
        weights = f"trained on {entry.trained_on}" if entry.trained_on else "random"
        table.add_row(entry.name, shape, str(pre.num_classes), weights, entry.description)
    console.print(table)


@zoo_app.command("train")
def zoo_train(name: Annotated[str, typer.Argument()] = "digits-mobilenet") -> None:
    """Train (or load from the cache) a trained zoo model and print its accuracy."""
    _print_model_accuracy(name)


@zoo_app.command("show")
def zoo_show(name: Annotated[str, typer.Argument()] = "digits-mobilenet") -> None:
    """Show a zoo model's preprocessing config, size and compute."""
    import torch

    from edgekit.architectures import count_macs
    from edgekit.zoo import ZOO

    if name not in ZOO:
        raise EdgekitError(f"{name}: no such zoo model (have: {', '.join(ZOO)})")
    entry = ZOO[name]
    module = entry.build()
    params = sum(p.numel() for p in module.parameters())
    macs = count_macs(module.eval(), torch.zeros(entry.preprocess.input_shape()))
    payload = {
        "name": name,
        "description": entry.description,
        "trained_on": entry.trained_on,
        "parameters": params,
        "macs": macs,
        "preprocess": entry.preprocess.to_dict(),
    }
    payload["preprocess"]["class_names"] = payload["preprocess"]["class_names"][:12]
    console.print_json(json.dumps(payload))


def _print_model_accuracy(spec: str, data: str = "digits") -> None:
    import numpy as np

    from edgekit.data import load_dataset
    from edgekit.models import load_model

    source = load_model(spec)
    dataset = load_dataset(data, source.preprocess)
    split = dataset.evaluation
    top1 = float(np.mean(source.predict(split.x).argmax(1) == split.y))
    console.print(
        f"{source.name} on {dataset.name} (evaluation split, {len(split)} images): "
        f"top-1 {100 * top1:.2f} %  [weights {source.digest[:12]}]"
    )


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False,
) -> None:
    """Which runtimes, delegates, GPUs and adb devices this machine has."""
    from edgekit.doctor import diagnose

    facts = diagnose()
    if as_json:
        print(json.dumps(facts, indent=2))
        return
    console.print(
        f"[bold]edgekit doctor[/]  Python {facts['python']} on {facts['machine']}, "
        f"{facts['cpu']} ({facts['cores']} cores)"
    )
    versions = Table("package", "version", title="versions")
    for name, version in facts["versions"].items():
        versions.add_row(name, version)
    console.print(versions)
    targets = Table("target", "export", "run", "problems", title="targets")
    for name, state in facts["targets"].items():
        targets.add_row(
            name, _yes(state["export"]), _yes(state["run"]), "; ".join(state["problems"])
        )
    console.print(targets)
    xnn = facts["xnnpack"]
    console.print(
        f"XNNPACK: executorch runtime {_yes(xnn.get('executorch_xnnpack'))} "
        f"(backends: {', '.join(xnn.get('executorch_backends', []))}); "
        f"LiteRT default delegate: {xnn.get('litert_default_delegate')}"
    )
    cuda = facts["cuda"]
    console.print(
        f"CUDA GPU: {cuda.get('device') if cuda['available'] else 'none'}; "
        f"onnxruntime providers: {', '.join(facts['onnxruntime_providers'])}"
    )
    vulkan = facts["vulkan"]
    label = "none" if not vulkan["available"] else ", ".join(vulkan["devices"]) or "ICD present"
    if vulkan.get("software_only"):
        label += " (software Vulkan: GPU-delegate latency here is not a GPU's)"
    console.print(f"Vulkan: {label}")
    adb = facts["adb"]
    if adb["path"] is None:
        console.print("adb: not on PATH")
    else:
        devices = ", ".join(f"{d['serial']} ({d['state']})" for d in adb["devices"]) or "no devices"
        console.print(f"adb: {adb['path']}: {devices}")


def _yes(flag: object) -> str:
    return "[green]yes[/]" if flag else "[red]no[/]"


@app.command()
def export(
    target: Annotated[
        str, typer.Option("--target", "-t", help="tflite, executorch, onnx, or all")
    ] = "tflite",
    recipe: Annotated[
        str | None, typer.Option("--recipe", "-r", help="fp32, fp16, int8, int8-dynamic, or all")
    ] = None,
    int8: Annotated[bool, typer.Option("--int8", help="short for --recipe int8")] = False,
    fp16: Annotated[bool, typer.Option("--fp16", help="short for --recipe fp16")] = False,
    int8_dynamic: Annotated[
        bool, typer.Option("--int8-dynamic", help="short for --recipe int8-dynamic")
    ] = False,
    model: ModelOption = "digits-mobilenet",
    data: DataOption = "digits",
    weights: WeightsOption = None,
    input_shape: ShapeOption = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="output directory")] = Path(
        "edgekit-artifacts"
    ),
    calibration_samples: Annotated[int, typer.Option("--calibration-samples")] = 200,
    io: Annotated[
        str, typer.Option("--io", help="float32, or int8 for a full-integer tflite")
    ] = "float32",
    keep_float: Annotated[
        str | None,
        typer.Option("--keep-float", help="torch module paths to keep float: block6.project,head"),
    ] = None,
    max_drop: Annotated[
        float | None,
        typer.Option(
            "--max-drop", help="int8: keep the most harmful layers float until the drop <= POINTS"
        ),
    ] = None,
    max_steps: Annotated[
        int, typer.Option("--max-steps", help="float islands --max-drop may add")
    ] = 4,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Export (and quantize) a model, validate it against the source, write artifact + manifest."""
    from edgekit.data import load_dataset
    from edgekit.errors import UnsupportedExport
    from edgekit.export import export_artifact
    from edgekit.models import load_model
    from edgekit.quantize.recipes import parse_recipes
    from edgekit.targets import parse_targets

    chosen = [
        name
        for name, flag in (("int8", int8), ("fp16", fp16), ("int8-dynamic", int8_dynamic))
        if flag
    ]
    if recipe is not None:
        chosen.append(recipe)
    if len(chosen) > 1:
        raise EdgekitError(f"choose one recipe, got {', '.join(chosen)}")
    recipes = parse_recipes(chosen[0] if chosen else "fp32")
    targets = parse_targets(target)
    source = load_model(model, weights=weights, input_shape=_shape(input_shape))
    dataset = load_dataset(data, source.preprocess)
    keep = tuple(part for part in _csv(keep_float or ""))
    if max_drop is not None:
        if [spec.name for spec in recipes] != ["int8"]:
            raise EdgekitError("--max-drop needs --int8")
        if keep:
            raise EdgekitError("--max-drop chooses the float layers itself; drop --keep-float")
        _export_accuracy_aware(
            source, dataset, targets, max_drop, output, calibration_samples, max_steps, as_json
        )
        return
    results, failures = [], []
    for target_name in targets:
        for spec in recipes:
            try:
                result = export_artifact(
                    source, dataset, target_name, spec.name, output, calibration_samples, io, keep
                )
            except UnsupportedExport as exc:
                if len(targets) * len(recipes) == 1:
                    raise
                failures.append((target_name, spec.name, str(exc)))
                continue
            results.append(result)
    if as_json:
        print(
            json.dumps(
                {
                    "artifacts": [
                        {"path": str(r.artifact.path), **r.artifact.manifest} for r in results
                    ],
                    "unsupported": [
                        {"target": t, "recipe": r, "reason": why} for t, r, why in failures
                    ],
                },
                indent=2,
            )
        )
    else:
        _print_exports(results, failures)
    if failures and not results:
        raise EdgekitError("nothing exported: " + "; ".join(why for _, _, why in failures))
    if failures and len(targets) > 1:
        done = sorted({r.artifact.target for r in results})
        err_console.print(f"[yellow]exported with: {', '.join(done)}[/]")


def _export_accuracy_aware(
    source: object,
    dataset: object,
    targets: list[str],
    max_drop: float,
    output: Path,
    calibration_samples: int,
    max_steps: int,
    as_json: bool,
) -> None:
    from edgekit.quantize.accuracy_aware import export_accuracy_aware, precision_label

    for target_name in targets:
        aware = export_accuracy_aware(
            source, dataset, target_name, max_drop, output, calibration_samples, max_steps=max_steps
        )
        manifest = aware.artifact.manifest
        if as_json:
            print(json.dumps({"path": str(aware.artifact.path), **manifest}, indent=2))
            continue
        table = Table(
            "step",
            "kept float",
            "top-1",
            "drop [95% CI]",
            "int8 ops",
            "p50 ms",
            title=f"{target_name}: int8 within {max_drop:g} points",
        )
        for step in aware.steps:
            low, high = step.drop_ci
            table.add_row(
                str(step.step),
                ", ".join(step.keep_float) or "-",
                f"{100 * step.top1:.2f} %",
                f"{step.drop_points:+.2f} [{low:+.2f}, {high:+.2f}]",
                "-" if step.int8_fraction is None else f"{100 * step.int8_fraction:.0f} %",
                "-" if step.p50_ms is None else f"{step.p50_ms:.3f}",
            )
        console.print(table)
        verdict = "within budget" if aware.within_budget else "[red]over budget[/]"
        console.print(f"wrote {aware.artifact.path} ({precision_label(manifest)}, {verdict})")
        for warning in aware.warnings:
            err_console.print(f"[bold yellow]warning[/] {warning}")


def _print_exports(results: list, failures: list) -> None:
    table = Table(
        "artifact", "size", "SQNR dB", "agree", "max |diff|", "fast path", "int8 ops", "s"
    )
    for result in results:
        manifest = result.artifact.manifest
        figures = manifest["validation"]
        coverage = manifest["coverage"]
        int8 = coverage.get("int8_fraction")
        table.add_row(
            result.artifact.label,
            f"{manifest['file']['size'] / 1024:.0f} KB",
            f"{figures['sqnr_db']:.1f}",
            f"{figures['top1_agreement']:.3f}",
            f"{figures['max_abs_diff']:.2g}",
            f"{coverage['fast_ops']}/{coverage['total_ops']}",
            "-" if int8 is None else f"{100 * int8:.0f} %",
            f"{result.seconds:.1f}",
        )
    console.print(table)
    for result in results:
        console.print(f"wrote {result.artifact.path} (+ .json manifest)", soft_wrap=True)
    for result in results:
        for warning in result.warnings:
            err_console.print(f"[bold yellow]warning[/] {result.artifact.path.name}: {warning}")
    for target, recipe, why in failures:
        err_console.print(f"[red]not exported[/] {target}/{recipe}: {why}")


CpuOption = Annotated[
    str | None,
    typer.Option(
        "--cpu",
        help="arm64-emu core: cortex-a76 (default), cortex-a53, cortex-a55, cortex-a710, "
        "neoverse-n1, neoverse-v1",
    ),
]
XnnpackOption = Annotated[
    bool, typer.Option("--xnnpack/--no-xnnpack", help="arm64-emu .tflite: XNNPACK or builtin")
]


@device_app.command("setup")
def device_setup(
    name: Annotated[str, typer.Argument(help="arm64-emu")],
    cpu: CpuOption = None,
    with_pte: Annotated[
        bool, typer.Option("--with-pte", help="also run .pte (trixie userland, ~150 MB)")
    ] = False,
) -> None:
    """Build an emulated device into the cache (idempotent, ~1.5 min and ~300 MB)."""
    if name != "arm64-emu":
        raise EdgekitError(f"unknown device '{name}' (have: arm64-emu)")
    from edgekit.devices.arm64_emu import setup_device

    def say(message: str) -> None:
        err_console.print(message, markup=False, highlight=False)

    setup_device(cpu, with_pte, progress=say)


ArtifactsArgument = Annotated[
    list[Path] | None, typer.Argument(help="artifact files (.tflite, .pte, .onnx)")
]
DeviceOption = Annotated[str, typer.Option("--device", help="cpu, gpu or arm64-emu")]
HistoryOption = Annotated[
    Path | None, typer.Option("--history", help="sqlite file (default ~/.edgekit/history.sqlite)")
]


@app.command("eval")
def eval_command(
    artifacts: ArtifactsArgument = None,
    data: DataOption = "digits",
    device: DeviceOption = "cpu",
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="with no artifact: evaluate this source model"),
    ] = None,
    threads: Annotated[int, typer.Option("--threads")] = 1,
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = True,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Accuracy of artifacts against the baseline on the evaluation split (or of a source model)."""
    from edgekit.accuracy import evaluate_artifact, evaluate_source

    if not artifacts:
        result = evaluate_source(model or "digits-mobilenet", data)
        if as_json:
            print(json.dumps(result, indent=2))
        else:
            top5 = f", top-5 {100 * result['top5']:.2f} %" if "top5" in result else ""
            console.print(
                f"{result['model']} on {result['dataset']} (evaluation split, "
                f"{result['samples']} images): top-1 {100 * result['top1']:.2f} %{top5}"
            )
        return
    if device == "arm64-emu":
        from edgekit.devices.arm64_emu import evaluate_arm64

        records = [evaluate_arm64(str(p), data, cpu, xnnpack, threads) for p in artifacts]
    else:
        records = [evaluate_artifact(str(path), data, device, threads) for path in artifacts]
    if as_json:
        print(json.dumps([record.to_dict() for record in records], indent=2))
        return
    _print_accuracy(records)
    _print_arm_vs_x86(records)


def _print_arm_vs_x86(records: list) -> None:
    rows = [r for r in records if getattr(r, "arm_vs_x86", None)]
    if not rows:
        return
    table = Table(
        "artifact",
        "kernels",
        "CPU model",
        "max |ARM-x86|",
        "mean |ARM-x86|",
        "argmax agree",
        "outputs differing",
        title="arm64-emu: aarch64 kernels against the host's x86 kernels",
    )
    for r in rows:
        f = r.arm_vs_x86
        table.add_row(
            r.label,
            f["kernels"],
            str(r.emulation["cpu_model"]),
            f"{f['max_abs_diff']:.3g}",
            f"{f['mean_abs_diff']:.3g}",
            f"{f['argmax_agreement']:.4f}",
            f"{f['outputs_differing']}/{f['outputs']}",
        )
    console.print(table)


def _print_accuracy(records: list) -> None:
    table = Table(
        "artifact",
        "device",
        "top-1",
        "baseline",
        "drop (points) [95% CI]",
        "McNemar p",
        "agree",
        "SQNR dB",
        "max |diff|",
        title=f"evaluation split of {records[0].dataset}",
    )
    for r in records:
        low, high = r.drop_ci
        table.add_row(
            r.label,
            r.device,
            f"{100 * r.top1:.2f} %",
            f"{100 * r.baseline_top1:.2f} %",
            f"{r.drop_points:+.2f} [{low:+.2f}, {high:+.2f}]",
            f"{r.mcnemar['p_value']:.3g}",
            f"{r.agreement:.4f}",
            f"{r.sqnr_db:.1f}",
            f"{r.max_abs_diff:.3g}",
        )
    console.print(table)
    for r in records:
        if r.changed_classes:
            changes = ", ".join(
                f"{c['class']}: {c['baseline_correct']}->{c['artifact_correct']}/{c['images']}"
                for c in r.changed_classes[:10]
            )
            console.print(
                f"  {r.label} changed classes (baseline->artifact correct/images): {changes}"
            )


@app.command()
def check(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="artifacts, or one run directory")
    ] = None,
    data: DataOption = "digits",
    device: DeviceOption = "cpu",
    max_drop: Annotated[float | None, typer.Option("--max-drop", help="points of top-1")] = None,
    min_agreement: Annotated[float | None, typer.Option("--min-agreement", help="fraction")] = None,
    min_sqnr: Annotated[float | None, typer.Option("--min-sqnr", help="dB")] = None,
    point_estimate: Annotated[
        bool, typer.Option("--point-estimate", help="gate the drop itself, not its CI upper bound")
    ] = False,
    max_latency_regression: Annotated[
        float | None, typer.Option("--max-latency-regression", help="percent of p50 (run dirs)")
    ] = None,
    max_arm_x86_diff: Annotated[
        float | None, typer.Option("--max-arm-x86-diff", help="arm64-emu: max |ARM - x86| logit")
    ] = None,
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = True,
    against: Annotated[
        str, typer.Option("--against", help="last, or a run id from history")
    ] = "last",
    history: HistoryOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Exit 1 when accuracy drop, agreement, SQNR or latency breaks a bound; 2 on bad input."""
    from edgekit.errors import GateFailed
    from edgekit.gates import accuracy_gates, latency_gates, run_accuracy_gates

    if not paths:
        raise EdgekitError("check: give one or more artifacts, or a run directory")
    bounds = (max_drop, min_agreement, min_sqnr, max_latency_regression, max_arm_x86_diff)
    if all(bound is None for bound in bounds):
        raise EdgekitError(
            "check: give at least one bound (--max-drop, --min-agreement, --min-sqnr, "
            "--max-latency-regression)"
        )
    results = []
    if len(paths) == 1 and paths[0].is_dir():
        from edgekit.history import resolve_run
        from edgekit.report import load_results

        run = load_results(paths[0])
        results += run_accuracy_gates(run, max_drop, min_agreement, min_sqnr, point_estimate)
        if max_latency_regression is not None:
            earlier = resolve_run(against, history, exclude=run["run"]["id"])
            results += latency_gates(run, earlier, max_latency_regression, history)
    else:
        if max_latency_regression is not None:
            raise EdgekitError("--max-latency-regression compares runs: give a run directory")
        from edgekit.accuracy import evaluate_artifact

        for path in paths:
            if device == "arm64-emu":
                from edgekit.devices.arm64_emu import arm_x86_gate, evaluate_arm64

                record = evaluate_arm64(str(path), data, cpu, xnnpack)
                if max_arm_x86_diff is not None:
                    results.append(arm_x86_gate(record, max_arm_x86_diff))
            else:
                record = evaluate_artifact(str(path), data, device)
            results += accuracy_gates(record, max_drop, min_agreement, min_sqnr, point_estimate)
    if not results:
        raise EdgekitError("check: nothing to gate (no measured rows)")
    failed = [r for r in results if not r.passed]
    if as_json:
        print(json.dumps({"passed": not failed, "gates": [r.to_dict() for r in results]}, indent=2))
    else:
        table = Table("artifact", "device", "gate", "measured", "bound", "result")
        for r in results:
            verdict = "[green]PASS[/]" if r.passed else "[bold red]FAIL[/]"
            table.add_row(
                r.artifact, r.device, r.gate, f"{r.measured:.3f}", f"{r.bound:.3f}", verdict
            )
        console.print(table)
        for r in results:
            if r.detail:
                console.print(f"  {r.artifact}: {r.detail}")
    if failed:
        raise GateFailed(f"{len(failed)} of {len(results)} gate(s) failed")


def _threads(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise EdgekitError(f"--threads '{text}': expected positive counts such as 1 or 1,2")
    return values


@app.command()
def bench(
    artifacts: ArtifactsArgument = None,
    device: Annotated[str, typer.Option("--device", help="cpu, gpu, android or arm64-emu")] = "cpu",
    cpu: CpuOption = None,
    xnnpack: XnnpackOption = True,
    threads: Annotated[str, typer.Option("--threads", help="thread counts, e.g. 1,2")] = "1",
    serial: Annotated[str | None, typer.Option("--serial", help="adb serial (android)")] = None,
    warmup: Annotated[int, typer.Option("--warmup")] = 10,
    min_runs: Annotated[int, typer.Option("--min-runs")] = 50,
    min_seconds: Annotated[float, typer.Option("--min-seconds")] = 1.0,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="measure the source model too")
    ] = True,
    noise_guard: Annotated[bool, typer.Option("--noise-guard/--no-noise-guard")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds per measurement")] = 600.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Latency of artifacts on a device, each in an isolated child, against the baseline."""
    from edgekit.artifact import load_artifact
    from edgekit.bench import NoiseGuard, Protocol, bench_artifact, bench_baseline

    if not artifacts:
        raise EdgekitError("bench: give one or more artifacts")
    protocol = Protocol(warmup=warmup, min_runs=min_runs, min_seconds=min_seconds)
    guard = NoiseGuard(enabled=noise_guard)
    loaded = [load_artifact(path) for path in artifacts]
    records = []
    for count in _threads(threads):
        if device == "android":
            from edgekit.devices.android import bench_on_android

            records += [bench_on_android(a, serial, count, protocol) for a in loaded]
        elif device == "arm64-emu":
            from edgekit.devices.arm64_emu import bench_arm64

            records += [
                bench_arm64(a, count, protocol, cpu, xnnpack, timeout_s=timeout) for a in loaded
            ]
        else:
            if device not in ("cpu", "gpu"):
                raise EdgekitError(f"unknown device '{device}' (cpu, gpu, android or arm64-emu)")
            records += [
                bench_artifact(a.path, device, count, protocol, guard, timeout_s=timeout)
                for a in loaded
            ]
        if baseline:
            for spec in dict.fromkeys(a.manifest["source"]["spec"] for a in loaded):
                records.append(
                    bench_baseline(spec, "auto", count, protocol, guard, timeout_s=timeout)
                )
    if as_json:
        print(json.dumps([r.to_dict() for r in records], indent=2))
    else:
        _print_latency(records)
    if all(r.status != "ok" for r in records):
        raise EdgekitError("bench: every measurement failed")


def _print_latency(records: list) -> None:
    baselines = {
        r.threads: r for r in records if r.label.startswith("baseline") and r.status == "ok"
    }
    table = Table(
        "artifact",
        "device",
        "thr",
        "p50 ms",
        "p90 ms",
        "mean±std",
        "CV",
        "min",
        "max",
        "load ms",
        "first ms",
        "RSS MB",
        "vs baseline",
        "others' CPU",
        title="latency",
    )
    for r in records:
        if r.status != "ok":
            table.add_row(r.label, r.device, str(r.threads), f"[red]failed: {r.error}[/]")
            continue
        s = r.stats
        base = baselines.get(r.threads)
        speedup = "" if base is None or r is base else f"{base.stats['p50_ms'] / s['p50_ms']:.2f}x"
        if r.device == "arm64-emu":  # emulated latency is never a speed-up
            speedup = "emulated"
        foreign = (
            "-" if r.foreign_cpu is None else f"{r.foreign_cpu:.2f}" + (" !" if r.disturbed else "")
        )
        table.add_row(
            r.label,
            r.device,
            str(r.threads),
            f"{s['p50_ms']:.3f}",
            f"{s['p90_ms']:.3f}",
            f"{s['mean_ms']:.3f}±{s['std_ms']:.3f}",
            f"{s['cv']:.1%}",
            f"{s['min_ms']:.3f}",
            f"{s['max_ms']:.3f}",
            f"{r.load_ms:.0f}",
            f"{r.first_ms:.2f}",
            f"{r.peak_rss_mb:.0f}",
            speedup,
            foreign,
        )
    console.print(table)
    for r in records:
        where = r.runtime.get("device") if r.label.startswith("baseline") else None
        if where:
            console.print(f"  baseline ran on: {where}")
        for warning in r.warnings:
            err_console.print(
                f"[yellow]warning[/] {r.label} ({r.device}, {r.threads} thr): {warning}"
            )


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@app.command()
def run(
    model: Annotated[str | None, typer.Option("--model", "-m")] = None,
    data: Annotated[str | None, typer.Option("--data", "-d")] = None,
    targets: Annotated[str | None, typer.Option("--targets", help="all or a list")] = None,
    recipes: Annotated[str | None, typer.Option("--recipes", help="all or a list")] = None,
    devices: Annotated[
        str | None, typer.Option("--devices", help="cpu,gpu,android,arm64-emu")
    ] = None,
    threads: Annotated[str | None, typer.Option("--threads", help="e.g. 1,2")] = None,
    max_drop: Annotated[float | None, typer.Option("--max-drop", help="budget in points")] = None,
    name: Annotated[str | None, typer.Option("--name")] = None,
    runs_dir: Annotated[str | None, typer.Option("--runs-dir")] = None,
    serial: Annotated[str | None, typer.Option("--serial")] = None,
    min_runs: Annotated[int | None, typer.Option("--min-runs")] = None,
    min_seconds: Annotated[float | None, typer.Option("--min-seconds")] = None,
    accuracy_aware: Annotated[
        bool | None,
        typer.Option(
            "--accuracy-aware/--plain-int8",
            help="int8 keeps harmful layers float to fit --max-drop",
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="edgekit.toml")] = None,
    write_config: Annotated[
        Path | None,
        typer.Option("--write-config", help="write these options to a TOML file and stop"),
    ] = None,
    history: HistoryOption = None,
) -> None:
    """Export, validate, evaluate and benchmark the whole matrix; write a run directory + report."""
    from dataclasses import replace

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from edgekit.history import record_run
    from edgekit.quantize.recipes import parse_recipes
    from edgekit.report import build_report
    from edgekit.runner import RunConfig, run_matrix
    from edgekit.targets import parse_targets

    base = RunConfig.from_toml(config) if config else RunConfig()
    given = {
        "model": model,
        "data": data,
        "name": name,
        "runs_dir": runs_dir,
        "serial": serial,
        "max_drop": max_drop,
        "accuracy_aware": accuracy_aware,
        "min_runs": min_runs,
        "min_seconds": min_seconds,
        "targets": None if targets is None else parse_targets(targets),
        "recipes": None if recipes is None else [r.name for r in parse_recipes(recipes)],
        "devices": None if devices is None else _csv(devices),
        "threads": None if threads is None else _threads(threads),
    }
    settings = replace(base, **{key: value for key, value in given.items() if value is not None})
    settings.validate()
    if write_config is not None:
        from edgekit.fileio import write_bytes_atomic

        write_bytes_atomic(write_config, settings.to_toml().encode())
        console.print(f"wrote {write_config}")
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:
        task = progress.add_task("starting", total=None)

        def say(message: str) -> None:
            progress.update(task, description=message)
            progress.console.log(message)

        result = run_matrix(settings, say)
        progress.update(task, description="report")
        paths = build_report(result.run_dir)
    record_run(result.results, result.run_dir, history)
    from edgekit.recommend import recommend

    advice = recommend(result.results["rows"], settings.max_drop)
    failed = [row for row in result.results["rows"] if row["status"] == "failed"]
    missing = [row for row in result.results["rows"] if row["status"] == "unavailable"]
    console.print(f"[bold]recommendation:[/] {advice.summary}")
    if failed:
        console.print(f"{len(failed)} row(s) failed (reasons in the report)")
    if missing:
        console.print(
            f"{len(missing)} row(s) need a device this machine lacks (listed in the report)"
        )
    console.print(f"report: {paths['md']}  and  {paths['html']}")


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="a run directory")]) -> None:
    """Rebuild report.md, report.html, report.json and plots from results.json alone."""
    from edgekit.report import build_report

    paths = build_report(run_dir)
    console.print(f"report: {paths['md']}  and  {paths['html']}")


@app.command("history")
def history_command(
    history: HistoryOption = None,
    limit: Annotated[int, typer.Option("--limit")] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List the runs in the history database, newest first."""
    from edgekit.history import list_runs

    runs = list_runs(history, limit)
    if as_json:
        print(json.dumps(runs, indent=2))
        return
    table = Table("run", "created", "model", "data", "commit", "rows ok")
    for entry in runs:
        table.add_row(
            entry["id"],
            entry["created"],
            entry["model"],
            entry["data"],
            entry["git_commit"] or "",
            f"{entry['ok']}/{entry['rows']}",
        )
    console.print(table)


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="run id, run directory, or last")],
    run_b: Annotated[str, typer.Argument(help="run id or run directory")],
    history: HistoryOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Deltas of every row between two runs (B against A)."""
    from edgekit.history import compare_runs, resolve_run

    second = resolve_run(run_b, history)
    first = resolve_run(run_a, history, exclude=second)
    deltas = compare_runs(first, second, history)
    if as_json:
        print(json.dumps({"a": first, "b": second, "rows": deltas}, indent=2))
        return
    table = Table(
        "row",
        "p50 A ms",
        "p50 B ms",
        "p50 change",
        "top-1 A",
        "top-1 B",
        "top-1 change",
        title=f"{second} against {first}",
    )
    for entry in deltas:
        a, b = entry["a"] or {}, entry["b"] or {}
        change = entry.get("p50_change_pct")
        top1 = entry.get("top1_change_points")
        table.add_row(
            entry["key"],
            _num(a.get("p50_ms"), "{:.3f}"),
            _num(b.get("p50_ms"), "{:.3f}"),
            "" if change is None else f"{change:+.1f} %",
            _num(a.get("top1") and 100 * a["top1"], "{:.2f}"),
            _num(b.get("top1") and 100 * b["top1"], "{:.2f}"),
            "" if top1 is None else f"{top1:+.2f}",
        )
    console.print(table)


def _num(value: float | None, pattern: str) -> str:
    return "" if value is None else pattern.format(value)


from edgekit.cli_quantize import register as _register_quantize_debug  # noqa: E402

_register_quantize_debug(app)


def main() -> None:
    """Entry point: run the app, turning edgekit's errors into one line and an exit code."""
    import click

    debug = "--debug" in sys.argv[1:]
    if debug:
        sys.argv.remove("--debug")
    else:
        warnings.filterwarnings("ignore")
    try:
        code = typer.main.get_command(app).main(standalone_mode=False, prog_name="edgekit")
    except EdgekitError as exc:
        if debug:
            raise
        err_console.print(f"edgekit: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
