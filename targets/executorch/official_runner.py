"""ExecuTorch's ``executor_runner`` on a phone: its command line and the parser of its output."""

from __future__ import annotations

import re

from edgekit.targets.base import OfficialRunner


def command(runner: str, model: str, threads: int, runs: int, gpu: bool) -> list[str]:  # noqa: FBT001 (OfficialRunner.command is called positionally)
    return [runner, f"--model_path={model}", f"--num_executions={runs}", f"--cpu_threads={threads}"]


def parse(output: str) -> dict[str, float]:
    """``Model executed successfully N time(s) in T ms.``: a mean, no spread."""
    match = re.search(r"Model executed successfully (\d+) time\(s\) in ([\d.]+) ms", output)
    if not match:
        raise ValueError("executor_runner output has no 'Model executed successfully' line")
    count, total = int(match.group(1)), float(match.group(2))
    return {"count": float(count), "mean_ms": total / count}


RUNNER = OfficialRunner("EDGEKIT_EXECUTOR_RUNNER", command, parse)


def official_runner() -> OfficialRunner:
    """The role ``official_runner`` (edgekit.targets.base.ROLES)."""
    return RUNNER
