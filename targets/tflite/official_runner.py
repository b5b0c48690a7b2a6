"""LiteRT's ``benchmark_model`` on a phone: its command line and the parser of what it prints."""

from __future__ import annotations

import re

from edgekit.targets.base import OfficialRunner
from edgekit.targets.session import TensorSpec

# benchmark_model reads an input tensor's raw bytes from a file named per input layer and writes
# every output's raw bytes, one after the other, to one file (LiteRT 2.3.0, litert/version.bzl;
# the same code, 9 lines earlier, in v2.2.0), tflite/tools/benchmark/benchmark_tflite_model.cc:
# --input_layer_value_files "name:path" (flag at :765, split at :500, read as raw bytes that must
# be the tensor's size at :1001-1050); a name there must be in --input_layer, with one
# --input_layer_shape per name (:444-456, :366); names are matched to the model's inputs by
# position, a different name is only warned about (:1229-1236), so edgekit names it "input";
# --output_filepath (flag at :820, written by OutputSaver at :207-218 when the runs end)
INPUT_NAME = "input"


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


def golden_command(
    runner: str, model: str, tensor: str, output: str, given: TensorSpec
) -> list[str]:
    """One run on the raw input file ``tensor``; the outputs' raw bytes go to ``output``."""
    return [
        runner,
        f"--graph={model}",
        "--num_threads=1",
        "--warmup_runs=1",
        "--num_runs=1",
        "--min_secs=0",
        "--use_xnnpack=true",
        f"--input_layer={INPUT_NAME}",
        f"--input_layer_shape={','.join(str(d) for d in given.shape)}",
        f"--input_layer_value_files={INPUT_NAME}:{tensor}",
        f"--output_filepath={output}",
    ]


def golden_output(output: str) -> str:
    return output  # the file named by --output_filepath itself


RUNNER = OfficialRunner(
    "EDGEKIT_BENCHMARK_MODEL",
    command,
    parse,
    golden_command=golden_command,
    golden_output=golden_output,
)


def official_runner() -> OfficialRunner:
    """The role ``official_runner`` (edgekit.targets.base.ROLES)."""
    return RUNNER
