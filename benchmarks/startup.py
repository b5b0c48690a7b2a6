"""How long a command takes from the shell, before and after a commit: ``edgekit export`` of the
default model (onnx, fp32) and a small ``edgekit run`` (onnx fp32 and int8 on the host CPU, its
exports from the run's export cache), each timed end to end as a user's shell runs it, the
edgekit at an older commit (default ab8c2ef, before the exit step of edgekit.common.shutdown
and the digits read without importing scikit-learn) and this checkout alternating, rep by rep.
Wall time and CPU time (the command's whole process tree). Writes benchmarks/STARTUP.md and
benchmarks/startup.json.

    .venv/bin/python benchmarks/startup.py [--commit ab8c2ef] [--reps 5]

Run it on a quiet machine: nothing else should run beside it."""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from before_after import old_env, old_tree
from common import HERE, header, write_json, write_markdown

from edgekit.worker.parent import child_env

EDGEKIT = str(Path(sys.executable).with_name("edgekit"))
QUICK = ["--min-seconds", "0.2", "--min-runs", "20", "--rounds", "4"]


def commands(scratch: Path) -> dict[str, list[str]]:
    config = scratch / "plumbing.toml"
    config.write_text("[run]\nnoise_guard = false\n")  # the commands' own time, not a figure
    return {
        "export": ["export", "--target", "onnx", "--recipe", "fp32", "-o", str(scratch / "out")],
        "run": ["run", "--config", str(config), "--target", "onnx", "--recipe", "fp32,int8",
                "--device", "cpu", "--no-profile", *QUICK, "--runs-dir", str(scratch / "runs"),
                "--history", str(scratch / "history.sqlite")],
    }  # fmt: skip


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, every process of the command's tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([EDGEKIT, *args], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(commit: str, reps: int, log) -> dict:
    tree = old_tree(commit)
    sides = {"before": old_env(tree), "after": dict(child_env(), EDGEKIT_CACHE="")}
    seen: dict = {}
    with tempfile.TemporaryDirectory(prefix="edgekit-startup-") as scratch:
        sides["after"]["EDGEKIT_CACHE"] = str(Path(scratch, "cache-after"))
        for name, args in commands(Path(scratch)).items():
            for env in sides.values():  # a first call of each side fills its caches
                timed(args, env)
            for rep in range(reps):
                for side, env in sides.items():
                    wall, cpu = timed(args, env)
                    seen.setdefault(name, {}).setdefault(side, []).append([wall, cpu])
                    log(f"{name} {side} rep {rep + 1}: {wall:.2f} s, CPU {cpu:.2f} s")
    return {"commit": commit, "reps": reps, "seen": seen}


def markdown(result: dict) -> list[str]:
    lines = header(
        "Commands from the shell, before and after",
        "python benchmarks/startup.py",
        [f"- before: edgekit at {result['commit']}; after: this checkout. Each command ran "
         f"{result['reps']} times per side, the sides alternating, after one call of each "
         "side that is not counted; medians, CPU over the command's whole process tree."],
    )  # fmt: skip
    lines += ["| command | before wall s | after wall s | after / before | before CPU s | "
              "after CPU s |", "|---|---|---|---|---|---|"]  # fmt: skip
    for name, sides in result["seen"].items():
        before, after = (np.median(np.array(sides[side]), axis=0) for side in ("before", "after"))
        lines.append(f"| `edgekit {name}` | {before[0]:.2f} | "
                     f"{after[0]:.2f} | {after[0] / before[0]:.2f} | {before[1]:.2f} | "
                     f"{after[1]:.2f} |")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="ab8c2ef")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    result = measure(args.commit, args.reps, lambda message: print(message, flush=True))
    write_json(HERE / "startup.json", result)
    write_markdown(HERE / "STARTUP.md", markdown(result))
    print("wrote benchmarks/STARTUP.md")


if __name__ == "__main__":
    main()
