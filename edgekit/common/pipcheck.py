"""The environment edgekit runs in, checked: ``pip check`` (no exception), and exactly one build
of onnxruntime, which edgekit's extras make a choice (``cpu``: onnxruntime, ``cuda``:
onnxruntime-gpu; both are the import package ``onnxruntime``, and two in one environment
overwrite each other's files). ``python -m edgekit.common.pipcheck`` exits 1 with one line per
problem; ``make install`` and ``benchmarks/gpu_check.sh`` run it."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

DISTRIBUTION = "edgekit-bench"
# each extra and the build of the onnxruntime import package it brings
ONNXRUNTIME_EXTRAS = {"cpu": "onnxruntime", "cuda": "onnxruntime-gpu"}


def install_line(extra: str) -> str:
    """The pip command that adds ``extra`` to an installed edgekit."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def onnxruntime_builds() -> list[str]:
    """The onnxruntime distributions installed here (named as in ONNXRUNTIME_EXTRAS)."""
    found = []
    for name in ONNXRUNTIME_EXTRAS.values():
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def onnxruntime_problem(builds: list[str] | None = None) -> str | None:
    """One line saying what is wrong with the installed onnxruntime builds, or None when there
    is exactly one."""
    builds = onnxruntime_builds() if builds is None else builds
    choice = " or ".join(
        f"{install_line(extra)} ({name})" for extra, name in ONNXRUNTIME_EXTRAS.items()
    )
    if not builds:
        return f"onnxruntime is not installed: {choice}"
    if len(builds) > 1:
        return (
            f"{' and '.join(builds)} are both installed, and they overwrite each other's "
            f"`onnxruntime`: pip uninstall -y {' '.join(builds)}, then {choice}"
        )
    return None


def missing_runtime(exc: BaseException) -> str | None:
    """The one line for an error that is onnxruntime not installed (neither extra was chosen),
    for the command line to print instead of a traceback; None for any other error."""
    name = getattr(exc, "name", None) or ""
    if isinstance(exc, ModuleNotFoundError) and name.split(".")[0] == "onnxruntime":
        return onnxruntime_problem([])
    return None


def pip_check_problems() -> list[str]:
    """``pip check``'s complaints, one line each (none when every requirement is met)."""
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode == 0:
        return []
    return lines or [f"pip check failed: {(done.stderr.strip() or 'no output')[:200]}"]


def main() -> int:
    problems = pip_check_problems()
    onnxruntime = onnxruntime_problem()
    if onnxruntime is not None:
        problems.append(onnxruntime)
    for line in problems:
        print(line)
    if not problems:
        print(f"pip check: no broken requirements; onnxruntime: {onnxruntime_builds()[0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
