"""LiteRT's ``benchmark_model`` on a phone: its command line and the parser of what it prints."""

from __future__ import annotations

import re

from edgekit.targets.base import OfficialRunner


def command(runner: str, model: str, threads: int, runs: int, gpu: bool) -> list[str]:  # noqa: FBT001 (OfficialRunner.command is called positionally)
    return [
        runner,
        f"--graph={model}",
        f"--num_threads={threads}",
        "--warmup_runs=1",
        f"--num_runs={runs}",
        "--min_secs=0",
        f"--use_gpu={'true' if gpu else 'false'}",
        f"--use_xnnpack={'false' if gpu else 'true'}",
    ]


def parse(output: str) -> dict[str, float]:
    """Its ``Inference timings in us`` and ``count=... avg=...`` lines."""
    figures: dict[str, float] = {}
    timings = re.search(
        r"Inference timings in us: Init: ([\d.]+), First inference: ([\d.]+), "
        r"Warmup \(avg\): ([\d.e+]+), Inference \(avg\): ([\d.e+]+)",
        output,
    )
    if not timings:
        raise ValueError("benchmark_model output has no 'Inference timings in us' line")
    figures["load_ms"] = float(timings.group(1)) / 1e3
    figures["first_ms"] = float(timings.group(2)) / 1e3
    figures["mean_ms"] = float(timings.group(4)) / 1e3
    runs = [line for line in output.splitlines() if re.search(r"count=\d+ first=", line)]
    if runs:  # the last such line is the timed runs (the one before is warm-up)
        fields = dict(re.findall(r"(\w+)=([\d.e+]+)", runs[-1]))
        figures.update(
            count=float(fields["count"]),
            min_ms=float(fields["min"]) / 1e3,
            max_ms=float(fields["max"]) / 1e3,
            std_ms=float(fields.get("std", 0)) / 1e3,
        )
        median = fields.get("median", fields.get("p50"))  # newer releases print percentiles
        if median is not None:
            figures["p50_ms"] = float(median) / 1e3
    figures.update(_memory(output))
    return figures


def _memory(output: str) -> dict[str, float]:
    """What it says of its own memory (MB, its getrusage peak): the peak its monitor sampled
    (``Overall peak memory footprint (MB) via periodic monitoring``), the growth from its start
    (``Memory footprint delta from the start of the tool (MB): init= overall=``), and the older
    releases' ``Peak memory footprint (MB): init= overall=``, read as the peak where no monitor
    line is printed."""
    figures: dict[str, float] = {}
    delta = re.search(
        r"Memory footprint delta from the start of the tool \(MB\): "
        r"init=([\d.]+) overall=([\d.]+)",
        output,
    )
    if delta:
        figures["init_delta_mb"], figures["overall_delta_mb"] = map(float, delta.groups())
    older = re.search(r"Peak memory footprint \(MB\): init=[\d.]+ overall=([\d.]+)", output)
    monitored = re.search(
        r"Overall peak memory footprint \(MB\) via periodic monitoring: "
        r"([\d.]+)",
        output,
    )
    peak = monitored or older
    if peak:
        figures["peak_rss_mb"] = float(peak.group(1))
    return figures


RUNNER = OfficialRunner("EDGEKIT_BENCHMARK_MODEL", command, parse)


def official_runner() -> OfficialRunner:
    """The role ``official_runner`` (edgekit.targets.base.ROLES)."""
    return RUNNER
