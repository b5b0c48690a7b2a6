"""What one read of each exported file saves: an export reads its file for the op census, the
coverage and the audit. Before, coverage read the file on its own (tflite: an XNNPACK
interpreter; onnx: a profiled onnxruntime session; executorch: the program and its flatc
decode) beside the census's read; now coverage is derived from the census. For every target x
recipe of the default model, both ways are timed in the same rounds, alternating (the order
flips each round): "two reads" is the census plus ``coverage(path, manifest)`` reading the file
itself (the work the old coverage did), "one read" the census plus ``coverage(..., census)``.
Each row gives the median seconds of each way, the saving, and the export's own wall time.
Writes benchmarks/EXPORT_READS.md and benchmarks/export_reads.json.

    .venv/bin/python benchmarks/export_reads.py [--model digits-mobilenet] [--rounds 5]

Run it on a quiet machine: nothing else should run beside it."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from common import DATA, HERE, RECIPES, header, write_json, write_markdown

from edgekit.common.fileio import temporary_directory
from edgekit.errors import EdgekitError
from edgekit.export.pipeline import export_artifact
from edgekit.sources.data import load_dataset
from edgekit.sources.load import load_model
from edgekit.targets import get_target, target_names


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def rows(model: str, rounds: int, log) -> list[dict]:
    source = load_model(model, quiet=True)
    dataset = load_dataset(DATA[model], source.preprocess)
    found = []
    with temporary_directory("edgekit-export-reads-") as folder:
        for name in target_names():
            for recipe in RECIPES:
                try:  # exported here, so the export's own wall time is this machine's too
                    made = export_artifact(source, dataset, name, recipe, out_dir=folder,
                                           calibration_samples=32, validation_samples=16)  # fmt: skip
                except EdgekitError as exc:
                    log(f"{name}/{recipe}: not exported: {exc}")
                    continue
                found.append(_row(made.artifact, made.seconds, rounds, log))
    return found


def _row(artifact, export_s: float, rounds: int, log) -> dict:
    """Both ways of reading one exported file, alternating for ``rounds`` rounds."""
    target = get_target(artifact.target)
    path, manifest = artifact.path, artifact.manifest

    def two_reads() -> None:
        target.census(path, manifest)
        target.coverage(path, manifest)  # reads the file again for itself

    def one_read() -> None:
        target.coverage(path, manifest, target.census(path, manifest))

    one_read()  # imports and first-use costs out of the timings
    times: dict[str, list[float]] = {"two": [], "one": []}
    for round_ in range(rounds):
        order = [("two", two_reads), ("one", one_read)]
        for name, call in order if round_ % 2 == 0 else order[::-1]:
            times[name].append(timed(call))
    two, one = statistics.median(times["two"]), statistics.median(times["one"])
    log(f"{artifact.label}: {two:.2f} s -> {one:.2f} s (export {export_s:.1f} s)")
    return {"label": artifact.label, "two_reads_s": two, "one_read_s": one,
            "saved_s": two - one, "export_s": export_s, "rounds": rounds, "times": times}  # fmt: skip


def markdown(model: str, rounds: int, found: list[dict], command: str) -> list[str]:
    lines = header("What one read of each exported file saves", command, [
        f"- model: {model}; {rounds} rounds per file, the two ways alternating (median of each)",
        "- two reads: the census, then coverage reading the file itself (the work coverage did "
        "before it was derived from the census); one read: the census, coverage derived from it",
    ])  # fmt: skip
    lines += ["| artifact | two reads ms | one read ms | saved ms | export s (one read) |",
              "|---|---|---|---|---|"]  # fmt: skip
    for row in found:
        export = f"{row['export_s']:.1f}"
        lines.append(f"| {row['label']} | {row['two_reads_s'] * 1e3:.1f} | "
                     f"{row['one_read_s'] * 1e3:.1f} | {row['saved_s'] * 1e3:.1f} | {export} |")  # fmt: skip
    total = sum(row["saved_s"] for row in found)
    exports = sum(row["export_s"] for row in found)
    lines += ["", f"Saved in all: {total * 1e3:.0f} ms over {len(found)} exports, against their "
              f"{exports:.0f} s of export with one read ({total / (exports + total):.2%} of what "
              "they took with two)."]  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits-mobilenet")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    command = "python benchmarks/export_reads.py " + " ".join(sys.argv[1:])
    found = rows(args.model, args.rounds, lambda message: print(message, flush=True))
    write_json(HERE / "export_reads.json", {"model": args.model, "rows": found})
    write_markdown(HERE / "EXPORT_READS.md", markdown(args.model, args.rounds, found, command))
    print("wrote benchmarks/EXPORT_READS.md")


if __name__ == "__main__":
    main()
