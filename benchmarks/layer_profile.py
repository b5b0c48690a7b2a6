"""Where the time goes, checked: every target x recipe of each model profiled on the host CPU
through ``edgekit profile``'s API, and for each artifact

- the sum of its layer times against its whole-model p50 (target: within 10 %),
- its three most expensive layers against the three most expensive ops of the runtime's own
  profiler (each op's layer must be among the three),
- the explanation edgekit printed for it,

plus a file made the way users make it, onnxruntime's ``quantize_dynamic`` with its defaults
(ConvInteger), and the cost of profiling against benchmarking the same files (target: at most
3x). Writes benchmarks/PROFILE.md and benchmarks/profile.json.

    .venv/bin/python benchmarks/layer_profile.py [--models mobilenet_v2,resnet50,digits-mobilenet]"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import HERE, artifacts, header, write_json, write_markdown

from edgekit.analysis.profile import profile_artifacts
from edgekit.measure.bench import bench_artifacts
from edgekit.worker.latency import LatencyProtocol, NoiseGuard

SUM_TARGET = 0.10
COST_TARGET = 3.0
RECIPES = ("fp32", "int8", "fp16", "int8-dynamic")


def user_quantize_dynamic(fp32_onnx: Path, out: Path) -> Path:
    """What a user gets from onnxruntime's quantize_dynamic with its defaults: convolutions
    become ConvInteger, which onnxruntime runs without MLAS's fast int8 kernels."""
    from onnxruntime.quantization import quantize_dynamic

    path = out / f"{fp32_onnx.stem}-ort-quantize-dynamic.onnx"
    quantize_dynamic(str(fp32_onnx), str(path))
    return path


def native_top(profile) -> list[str]:
    """The layers of the three most expensive single ops the runtime's profiler timed."""
    return [op["layer"] for op in profile.top_ops[:3]]


def measure(model: str, log) -> dict:
    made, _, _ = artifacts(model, log)
    chosen = [a for a in made if a.recipe in RECIPES]
    with tempfile.TemporaryDirectory(prefix="edgekit-profile-bench-") as tmp:
        fp32_onnx = next(a for a in chosen if a.target == "onnx" and a.recipe == "fp32")
        users = user_quantize_dynamic(fp32_onnx.path, Path(tmp)) if model != "resnet50" else None
        started = time.perf_counter()
        bench_artifacts(
            chosen,
            device="cpu",
            threads=1,
            protocol=LatencyProtocol(rounds=10),
            guard=NoiseGuard(enabled=False),
            baseline=False,
        )
        bench_s = time.perf_counter() - started
        started = time.perf_counter()
        profiles = profile_artifacts(chosen, threads=1, progress=log)
        profile_s = time.perf_counter() - started
        extra = []
        if users is not None:
            # the user's file beside edgekit's fp32 .onnx, so the explanation compares the two
            from edgekit.artifacts.artifact import load_artifact
            from edgekit.artifacts.foreign import ForeignOptions

            theirs = load_artifact(users, foreign=ForeignOptions())
            extra = profile_artifacts([fp32_onnx.path, theirs], threads=1, progress=log)
        rows = []
        for profile in [*profiles, *extra[1:]]:
            ours = [layer.name for layer in sorted(profile.layers, key=lambda x: -x.ms)[:3]]
            native = native_top(profile)
            rows.append({
                "label": profile.label,
                "target": profile.target,
                "recipe": profile.recipe,
                "p50_ms": profile.total_ms,
                "layers_ms": profile.ops_ms,
                "coverage": profile.coverage,
                "top3": ours,
                "native_top3_layers": native,
                "top3_agree": all(layer in ours for layer in native),
                "explanation": profile.explanation,
                "speedup_vs_fp32": profile.speedup_vs_fp32,
                "method": profile.method,
            })  # fmt: skip
    return {"model": model, "bench_s": bench_s, "profile_s": profile_s,
            "cost_ratio": profile_s / bench_s, "rows": rows}  # fmt: skip


def table(results: list[dict]) -> list[str]:
    lines = []
    for result in results:
        lines += [
            f"## {result['model']}",
            "",
            f"Profiling cost {result['profile_s']:.0f} s against {result['bench_s']:.0f} s to "
            f"benchmark the same files: {result['cost_ratio']:.2f}x (target <= {COST_TARGET:g}x).",
            "",
            "| artifact | p50 ms | layers sum ms | sum / p50 | within 10 % | top-3 layers | "
            "top-3 ops' layers (runtime profiler) | agree |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in result["rows"]:
            cover = row["coverage"]
            within = "" if cover is None else ("yes" if abs(cover - 1) <= SUM_TARGET else "NO")
            lines.append(
                f"| {row['label']} | {_num(row['p50_ms'])} | {row['layers_ms']:.3f} | "
                f"{'' if cover is None else f'{100 * cover:.0f} %'} | {within} | "
                f"{', '.join(row['top3'])} | {', '.join(row['native_top3_layers'])} | "
                f"{'yes' if row['top3_agree'] else 'NO'} |"
            )
        lines.append("")
        for row in result["rows"]:
            if row["recipe"] != "fp32" and row["explanation"]:
                lines += [f"**{row['label']}**", "", *[f"- {x}" for x in row["explanation"]], ""]
    return lines


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50,digits-mobilenet")
    args = parser.parse_args()
    results = [measure(model, print) for model in args.models.split(",")]
    write_json(HERE / "profile.json", {"results": results})
    command = f"python benchmarks/layer_profile.py --models {args.models}"
    lines = header("Where the time goes: layer sums, top layers, explanations", command, [
        "- every artifact profiled on the host CPU at 1 thread; p50 from the same files timed "
        "interleaved (10 rounds); the runtime profilers: onnxruntime's, LiteRT's per-op "
        "profiler, ExecuTorch's ETDump",
    ])  # fmt: skip
    write_markdown(HERE / "PROFILE.md", [*lines, *table(results)])
    print("wrote benchmarks/PROFILE.md")


if __name__ == "__main__":
    main()
