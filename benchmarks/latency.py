"""Latency side by side, in one run, every ratio interleaved: digits-mobilenet, MobileNetV2-224
and ResNet-50-224 for every target x recipe on the host CPU at 1 and 2 threads, with the torch
eager fp32 baseline in the same rounds, and LiteRT's own benchmark tool alternated with edgekit
on the same .tflite files. Writes benchmarks/RESULTS.md and benchmarks/results.json.

    .venv/bin/python benchmarks/latency.py [--models mobilenet_v2] [--threads 1] [--no-tool]
                                           [--sessions 4] [--session-gap SECONDS]
                                           [--json OUT] [--markdown OUT]

Run it on a quiet machine: nothing else should run beside it (a helper, a build)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from common import DATA, HERE, artifacts, header, machine, write_json, write_markdown

from edgekit.devices import get_device
from edgekit.measure.bench import baseline_timer, measure_interleaved
from edgekit.measure.peak import MachinePeaks, arithmetic_of, shares_of
from edgekit.report.peaks import peak_of, peak_source, peaks_text, percent
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol, LatencyRecord, NoiseGuard

PROTOCOL = LatencyProtocol(
    warmup=10,
    min_runs=50,
    min_seconds=1.0,
    rounds=12,
    block_seconds=0.1,
    sessions=4,
    budget_s=180.0,
)
TOOL_PROTOCOL = LatencyProtocol(
    warmup=5, min_runs=50, min_seconds=1.0, rounds=8, block_seconds=0.15
)
GUARD = NoiseGuard(threshold=0.15, retries=1, settle_max_s=60.0)
TOOL_MODELS = ("mobilenet_v2", "resnet50")  # the tool rounds to 0.01 ms: too coarse below 1 ms


class ToolTimer(BlockTimer):
    """LiteRT's own benchmark tool (in the ai-edge-litert wheel): one block is one run of it,
    its own median of ``runs`` timed invokes (CompiledModel, CPU accelerator: XNNPACK)."""

    def __init__(self, path: Path, threads: int) -> None:
        self.label, self.path, self.threads = "LiteRT tool", path, threads
        first = self._run(5)
        self.warm_ms = max(first["median_ms"], 0.01)
        self.runtime = {"runtime": "ai_edge_litert.tools.benchmark_litert_model"}
        self.load_ms = self.first_ms = None

    def _run(self, runs: int) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "result.json"
            command = [
                sys.executable,
                "-m",
                "ai_edge_litert.tools.benchmark_litert_model",
                f"--model={self.path}",
                f"--num_threads={self.threads}",
                f"--num_runs={max(runs, 10)}",
                "--warmup_runs=5",
                f"--result_json={out}",
            ]
            done = subprocess.run(command, capture_output=True, text=True, timeout=900)
            if done.returncode != 0 or not out.is_file():
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"LiteRT's tool failed: {tail[:200]}")
            return json.loads(out.read_text())["latency"]

    def block(self, runs: int) -> Block:
        latency = self._run(runs)
        return Block(None, latency["avg_ms"], latency["median_ms"])


def pool(model: str, threads: int, log, protocol: LatencyProtocol = PROTOCOL) -> dict:
    """Every artifact of ``model`` and the torch eager baseline, interleaved."""
    made, source, dataset = artifacts(model, log)
    device = get_device("cpu")
    sample = dataset.evaluation.x[:1]
    timers, records = [], []
    for artifact in made:
        timers.append(device.timer(artifact, threads, sample, protocol, 600.0))
        records.append(LatencyRecord.for_artifact(artifact, "cpu", threads))
    info = made[0].manifest.source.to_dict()
    timers.append(baseline_timer(info, threads, sample, protocol, 600.0, cuda=False))
    records.append(LatencyRecord("torch eager/fp32", "cpu", threads, "failed"))
    eager = len(records) - 1
    log(f"{model} x{threads}: {len(timers)} sides interleaved")
    result = measure_interleaved(timers, records, protocol, GUARD)
    rows = []
    for side, (artifact, record) in enumerate(zip([*made, None], records, strict=True)):
        row = {
            "label": record.label,
            "threads": threads,
            "status": record.status,
            "error": record.error,
            "stats": record.stats,
            "rounds": len(result.rounds_used),
            "foreign_cpu": record.foreign_cpu,
            "steal": record.steal,
            "warnings": record.warnings,
        }
        if artifact is not None:
            row.update(
                target=artifact.target,
                recipe=artifact.recipe,
                coverage=artifact.manifest.coverage,
                export_warnings=artifact.manifest.warnings,
                # the peak it divides by: the arithmetic its file computes in
                arithmetic=arithmetic_of(
                    artifact.recipe,
                    *shares_of(artifact.manifest.audit),
                ),
            )
            if record.status == "ok" and records[eager].status == "ok":
                ratio, ci = result.ratio(eager, side)
                row["over_eager"], row["over_eager_ci"] = ratio, list(ci)
        rows.append(row)
    by_label = {row["label"]: side for side, row in enumerate(rows)}
    for row in rows:
        fp32 = by_label.get(f"{row.get('target')}/fp32")
        if row.get("recipe") in ("int8", "int8-dynamic", "fp16") and fp32 is not None:
            ratio, ci = result.ratio(fp32, by_label[row["label"]])  # fp32 time / this
            row["over_fp32"], row["over_fp32_ci"] = ratio, list(ci)
    return {
        "model": model,
        "threads": threads,
        "rows": rows,
        "macs": _macs(source),
        "measuring": result.summary(),  # sessions, both levels' spread, why it stopped
    }


def tool_comparison(model: str, threads: int, log) -> list[dict]:
    made, _, dataset = artifacts(model, log)
    device, found = get_device("cpu"), []
    for artifact in [a for a in made if a.target == "tflite"]:
        sample = dataset.evaluation.x[:1]
        timers = [
            device.timer(artifact, threads, sample, TOOL_PROTOCOL, 600.0),
            ToolTimer(artifact.path, threads),
        ]
        records = [
            LatencyRecord.for_artifact(artifact, "cpu", threads),
            LatencyRecord("LiteRT tool", "cpu", threads, "failed"),
        ]
        log(f"{model} {artifact.label} x{threads}: edgekit against LiteRT's tool, interleaved")
        result = measure_interleaved(timers, records, TOOL_PROTOCOL, GUARD)
        ratio, ci = result.ratio(0, 1)
        found.append(
            {
                "model": model,
                "label": artifact.label,
                "threads": threads,
                "edgekit_p50": records[0].stats.get("p50_ms"),
                "tool_median": records[1].stats.get("p50_ms"),
                "ratio": ratio,
                "ratio_ci": list(ci),
                "rounds": len(result.rounds_used),
            }
        )
    return found


def _macs(source) -> int:
    import torch

    from edgekit.sources.architectures import count_macs

    return count_macs(source.module, torch.from_numpy(source.example_input()))


def _arithmetic(row: dict) -> str:
    """The peak a row divides by (a results.json from before rows recorded it: as then)."""
    int8 = (row.get("coverage") or {}).get("int8_fraction")
    return row.get("arithmetic") or arithmetic_of(row.get("recipe", "fp32"), int8)


def _rate(entry: dict, row: dict) -> float:
    return 2 * entry["macs"] / 1e9 / (row["stats"]["p50_ms"] / 1e3)


def _peak_key(entry: dict, row: dict) -> str:
    return f"{entry['model']}:{row['label']}@cpux{entry['threads']}"


def raise_peaks(results: dict, peaks: MachinePeaks) -> None:
    """Every row faster than the machine's (cached) peak raises it, so no row reads above
    100 %; then the results keep the peaks as raised and what gave each."""
    for entry in results["pools"]:
        for row in entry["rows"]:
            if row["status"] == "ok":
                label = f"{row['label']} row ({entry['model']})"
                rate, key = _rate(entry, row), _peak_key(entry, row)
                peaks.share(entry["threads"], _arithmetic(row), rate, key, label)
    results["peaks"], results["peak_kernels"] = peaks.figures(), peaks.kernels()


def run(
    models: list[str],
    threads: list[int],
    tool: bool,
    log=print,
    protocol: LatencyProtocol = PROTOCOL,
) -> dict:
    results = {
        "machine": machine(),
        "protocol": protocol.to_dict(),
        "peaks": {},
        "pools": [],
        "tool": [],
    }
    peaks = MachinePeaks.load(threads, log)  # the peaks `edgekit run` divides by too
    for model in models:
        for count in threads:
            results["pools"].append(pool(model, count, log, protocol))
            if tool and model in TOOL_MODELS:
                results["tool"] += tool_comparison(model, count, log)
    raise_peaks(results, peaks)
    return results


def _of_peak(results: dict, entry: dict, row: dict) -> str:
    """``87 % fp32``; the row that raised the peak says so (never above 100 %)."""
    arithmetic = _arithmetic(row)
    peak = peak_of(results["peaks"].get(str(entry["threads"]), {}), arithmetic)
    if not peak:
        return f"no {arithmetic} peak"
    source = peak_source(results.get("peak_kernels"), entry["threads"], arithmetic)
    raised = ", raised the peak" * (source.get("raised_by") == _peak_key(entry, row))
    return f"{percent(_rate(entry, row) / peak)} {arithmetic}{raised}"


def tool_verdict(low: float, high: float) -> str:
    """Whether edgekit's timing is within 3 % of LiteRT's tool: shown only when the whole
    interval lies inside +-3 %; an interval that reaches past it decides nothing."""
    if max(abs(low - 1), abs(high - 1)) <= 0.03:
        return "yes"
    if low > 1.03 or high < 0.97:
        return "no"
    return "not shown: the interval reaches past +-3 %"


def _ci(value: float | None, ci: list | None) -> str:
    return "" if value is None else f"{value:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]"


def markdown(results: dict) -> list[str]:
    protocol = LatencyProtocol(**{**PROTOCOL.to_dict(), **results.get("protocol", {})})
    spread = (
        f", {protocol.session_gap_s:.0f} s apart (the sessions span the machine's drift over "
        "minutes)"
        if protocol.session_gap_s
        else ""
    )
    lines = header(
        "Latency benchmarks",
        "python benchmarks/latency.py",
        [
            "- matmul peaks" + peaks_text(results["peaks"], results.get("peak_kernels")),
            f"- protocol: every artifact of a model and torch eager ran interleaved, each in its "
            f"own child process: {protocol.warmup} warm-up invokes, then at least "
            f"{protocol.rounds} rounds in which each side timed one block (~"
            f"{protocol.block_seconds * 1e3:.0f} ms) of single invokes. The rounds ran in "
            f"{protocol.sessions} sessions{spread}: every side was reopened in a new process "
            "between them, and sessions were added until every interval was within "
            f"{100 * (protocol.precision or 0):g} % of its ratio or {protocol.budget_s:g} s ran "
            "out. Every ratio's 95 % interval comes from the two-level fit (rounds within "
            "sessions, sessions within sides; edgekit.common.two_levels.fit_two_levels).",
            "- % of peak: the achieved rate over the machine's peak of the arithmetic that runs "
            "(int8 where an int8 recipe runs most compute ops in int8, fp16 where most MACs "
            "compute in float16, as ExecuTorch's fp16 does, fp32 otherwise), named in the cell. "
            + (
                "A peak is the best of several GEMM kernels (onnxruntime MLAS, XNNPACK through "
                "LiteRT and ExecuTorch) at several sizes, measured once per machine and cached; "
                "a row faster than it raised it and reads 100 %."
                if results.get("peak_kernels")
                else "These peaks are one MLAS GEMM each (results from before peaks were the "
                "best of several kernels): a row above its peak reads 100 %."
            ),
        ],
    )
    for entry in results["pools"]:
        gop = 2 * entry["macs"] / 1e9
        lines += [
            f"## {entry['model']} at {entry['threads']} thread(s) ({gop:.3f} GFLOP)",
            "",
            "| artifact | p50 ms | p90 ms | CV | speed-up over torch eager [95% CI] | "
            "speed-up over its fp32 [95% CI] | GFLOP/s | % of peak | others' CPU | notes |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in entry["rows"]:
            if row["status"] != "ok":
                lines.append(
                    f"| {row['label']} | | | | | | | | | {row['status']}: {row['error']} |"
                )
                continue
            stats = row["stats"]
            rate = gop / (stats["p50_ms"] / 1e3)
            notes = row["warnings"] + [
                w for w in row.get("export_warnings", []) if w.startswith("FALLBACK")
            ]
            lines.append(
                f"| {row['label']} | {stats['p50_ms']:.3f} | {stats['p90_ms']:.3f} | "
                f"{stats['cv']:.1%} | {_ci(row.get('over_eager'), row.get('over_eager_ci'))} | "
                f"{_ci(row.get('over_fp32'), row.get('over_fp32_ci'))} | "
                f"{rate:.1f} | {_of_peak(results, entry, row)} | "
                f"{row['foreign_cpu'] or 0:.2f} | "
                f"{'; '.join(notes)} |"
            )
        lines.append("")
    if results["tool"]:
        lines += [
            "## edgekit against LiteRT's own benchmark tool, interleaved",
            "",
            "edgekit times the Interpreter with XNNPACK (set_tensor + invoke + get_tensor);"
            " the tool times CompiledModel on pre-made buffers. Target: within 3 %.",
            "",
            "| model | artifact | thr | edgekit p50 ms | tool median ms | edgekit / tool "
            "[95% CI] | within 3 % |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in results["tool"]:
            low, high = row["ratio_ci"]
            verdict = tool_verdict(low, high)
            lines.append(
                f"| {row['model']} | {row['label']} | {row['threads']} | "
                f"{row['edgekit_p50']:.3f} | {row['tool_median']:.3f} | "
                f"{row['ratio']:.3f} [{low:.3f}, {high:.3f}] | {verdict} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DATA))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--no-tool", action="store_true")
    parser.add_argument("--sessions", type=int, default=PROTOCOL.sessions)
    parser.add_argument("--session-gap", type=float, default=0.0,
                        help="seconds before each new session (sessions spread over minutes)")  # fmt: skip
    parser.add_argument("--json", default=str(HERE / "results.json"))
    parser.add_argument("--markdown", default=str(HERE / "RESULTS.md"))
    parser.add_argument(
        "--tables-only", action="store_true", help="rewrite --markdown from --json, measure nothing"
    )
    args = parser.parse_args()
    if args.tables_only:
        tables = markdown(json.loads(Path(args.json).read_text()))
        write_markdown(Path(args.markdown), tables)
        return
    threads = [int(t) for t in args.threads.split(",")]
    log = lambda message: print(message, flush=True)  # noqa: E731
    protocol = replace(PROTOCOL, sessions=args.sessions, session_gap_s=args.session_gap)
    models = [m for m in args.models.split(",") if m]
    results = run(models, threads, not args.no_tool, log, protocol)
    write_json(Path(args.json), results)
    if args.markdown != "-":
        write_markdown(Path(args.markdown), markdown(results))
        print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
