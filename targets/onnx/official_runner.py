"""``onnxruntime_perf_test`` on a phone: its command line and the parser of what it prints."""

from __future__ import annotations

import re

from edgekit.targets.base import OfficialRunner


def command(runner: str, model: str, threads: int, runs: int, gpu: bool) -> list[str]:  # noqa: FBT001 (OfficialRunner.command is called positionally)
    return [runner, "-m", "times", "-r", str(runs), "-x", str(threads), "-I", model]


def parse(output: str) -> dict[str, float]:
    """Average, min/max and percentile latencies (it prints seconds)."""
    average = re.search(r"Average inference time cost: ([\d.e+-]+) ms", output)
    if not average:
        raise ValueError("onnxruntime_perf_test output has no 'Average inference time cost' line")
    figures = {"mean_ms": float(average.group(1))}
    for key, label in (
        ("min_ms", "Min"),
        ("max_ms", "Max"),
        ("p50_ms", "P50"),
        ("p90_ms", "P90"),
        ("p99_ms", "P99"),
    ):
        match = re.search(rf"{label} Latency: ([\d.e+-]+) s", output)
        if match:
            figures[key] = float(match.group(1)) * 1e3
    runs = re.search(r"Total inference requests: (\d+)", output)
    if runs:
        figures["count"] = float(runs.group(1))
    creation = re.search(r"Session creation time cost: ([\d.e+-]+) s", output)
    if creation:
        figures["load_ms"] = float(creation.group(1)) * 1e3
    peak = re.search(r"Peak working set size: (\d+) bytes", output)
    if peak:
        figures["peak_rss_mb"] = int(peak.group(1)) / 2**20
    return figures


# neither of onnxruntime's runners hands outputs back (read in the newest main of the code
# index, not at the 1.32.0 tag): onnxruntime/test/perftest/command_args_parser.cc declares every
# flag of onnxruntime_perf_test as an ABSL_FLAG, and none writes an output tensor (-I feeds
# random inputs, without it a test_data_set's; -p writes a profile, -u an optimized model);
# onnxruntime/test/onnx/main.cc, onnx_test_runner's getopt string "Ac:hj:Mn:r:e:t:a:xvo:d:i:pz",
# compares each test_data_set's outputs with its own -a/-t tolerances and reports pass/fail
# counts only
NO_GOLDEN = (
    "onnxruntime_perf_test writes timings only and onnx_test_runner prints pass/fail counts "
    "with its own tolerance, neither gives the output tensors"
)

RUNNER = OfficialRunner("EDGEKIT_ORT_PERF_TEST", command, parse, no_golden=NO_GOLDEN)


def official_runner() -> OfficialRunner:
    """The role ``official_runner`` (edgekit.targets.base.ROLES)."""
    return RUNNER
