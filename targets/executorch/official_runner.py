"""ExecuTorch's ``executor_runner`` on a phone: its command line and the parser of its output."""

from __future__ import annotations

import re

from edgekit.targets.base import OfficialRunner
from edgekit.targets.session import TensorSpec

# executor_runner reads each input's raw bytes from the files --inputs lists and writes output i
# as raw bytes to "<--output_file>-<i>.bin" (ExecuTorch main at version.txt 1.5.0, the same file
# as v1.4.1), examples/portable/executor_runner/executor_runner.cpp: --inputs (flag at :68, the
# files read whole at :143-180 and :392-410), --output_file (flag at :69-72, written at
# :802-818 after the runs), --print_output=none (flag at :80-83, :317) keeps the log short


def command(runner: str, model: str, threads: int, runs: int, gpu: bool) -> list[str]:  # noqa: FBT001 (OfficialRunner.command is called positionally)
    return [runner, f"--model_path={model}", f"--num_executions={runs}", f"--cpu_threads={threads}"]


def parse(output: str) -> dict[str, float]:
    """``Model executed successfully N time(s) in T ms.``: a mean, no spread."""
    match = re.search(r"Model executed successfully (\d+) time\(s\) in ([\d.]+) ms", output)
    if not match:
        raise ValueError("executor_runner output has no 'Model executed successfully' line")
    count, total = int(match.group(1)), float(match.group(2))
    return {"count": float(count), "mean_ms": total / count}


def golden_command(
    runner: str, model: str, tensor: str, output: str, given: TensorSpec
) -> list[str]:
    """One run on the raw input file ``tensor``; output 0's raw bytes go to ``output``-0.bin."""
    return [
        runner,
        f"--model_path={model}",
        f"--inputs={tensor}",
        f"--output_file={output}",
        "--print_output=none",
        "--num_executions=1",
        "--cpu_threads=1",
    ]


def golden_output(output: str) -> str:
    return f"{output}-0.bin"


RUNNER = OfficialRunner(
    "EDGEKIT_EXECUTOR_RUNNER",
    command,
    parse,
    golden_command=golden_command,
    golden_output=golden_output,
)


def official_runner() -> OfficialRunner:
    """The role ``official_runner`` (edgekit.targets.base.ROLES)."""
    return RUNNER
