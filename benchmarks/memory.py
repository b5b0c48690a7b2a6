"""What each artifact needs in memory, in parts: every target x recipe of MobileNetV2 and
ResNet-50 (random weights), each in a memory probe of its own (``edgekit.measure.memory``:
the runtime's floor with its trivial model, the model's own share as file + planned + residual,
what stays after release, and the resident set's slope over the invokes). Then whether the
model's share scales from MobileNetV2 to ResNet-50 as their files do. Writes
benchmarks/MEMORY.md and benchmarks/memory.json.

    .venv/bin/python benchmarks/memory.py [--models mobilenet_v2,resnet50] [--invokes 10000] [--seconds 30]"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from common import HERE, artifacts, header, machine, write_json, write_markdown

from edgekit.devices import get_device
from edgekit.measure.memory import LEAK_FLOOR_KB_PER_1K, measure_memory


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def scaling(rows: list[dict], small: str, large: str) -> list[str]:
    """Per artifact kind: the large model's share over the small one's, beside their files'."""
    by = {(r["model"], r["label"]): r for r in rows if r["status"] == "ok"}
    lines = []
    for (model, label), row in by.items():
        other = by.get((large, label))
        if model != small or other is None or not row["model_mb"]:
            continue
        shares, files = other["model_mb"] / row["model_mb"], other["file_mb"] / row["file_mb"]
        lines.append(f"| {label} | {shares:.2f} | {files:.2f} | "
                     f"{'yes' if 1 < shares <= files else 'no'} |")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50")
    parser.add_argument("--invokes", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--page-only", action="store_true",
                        help="rewrite MEMORY.md from memory.json, measuring nothing")  # fmt: skip
    args = parser.parse_args()
    log = lambda message: print(message, flush=True)  # noqa: E731
    if args.page_only:
        recorded = json.loads((HERE / "memory.json").read_text())
    else:
        cpu = get_device("cpu")
        rows = []
        for model in args.models.split(","):
            made, _, _ = artifacts(model, log)
            for artifact in made:
                memory = measure_memory(artifact, cpu, invokes=args.invokes, seconds=args.seconds)
                log(f"{model} {artifact.label}: model {memory.model_mb} MB, leak "
                    f"{memory.leak_kb_per_1k} {memory.leak_interval}")  # fmt: skip
                rows.append({"model": model, **memory.to_dict()})
        recorded = {"invokes": args.invokes, "seconds": args.seconds, "models": args.models,
                    "rows": rows, "machine": machine(),
                    "written": datetime.now(UTC).isoformat(timespec="minutes")}  # fmt: skip
        write_json(HERE / "memory.json", recorded)
    write_page(recorded)


def write_page(recorded: dict) -> None:
    rows, invokes, seconds = recorded["rows"], recorded["invokes"], recorded["seconds"]
    models = recorded["models"].split(",")
    lines = header(
        "What each artifact needs in memory",
        f"python benchmarks/memory.py --invokes {invokes} --seconds {seconds:g}",
        [
            "- each row: one probe child (`edgekit.measure.memory.measure_memory`, 1 thread) on "
            "the host CPU. Floor: the process with the runtime imported and its trivial model "
            "loaded; model: the peak while invoking above that floor, = file + planned + "
            "residual (planned: what the runtime's own API or file format says it plans for "
            "activations; '-' where it says nothing, and then the activations are in the "
            "residual); after release: above the floor once the session is closed.",
            f"- leak: the resident set sampled over up to {invokes} invokes (at most "
            f"{seconds:g} s), the first quarter left out, as a Theil-Sen slope in kB per "
            f"1000 invokes with its 95 % interval; flagged where the interval lies above "
            f"{LEAK_FLOOR_KB_PER_1K:g} kB. A run that the time cap ends early has fewer "
            "invokes after its allocators settle: read its slope with that in mind.",
        ],
        facts=recorded.get("machine"),
        written=recorded.get("written"),
    )
    lines += [
        "| model | artifact | process peak MB | floor MB | model MB | = file | + planned | "
        "+ residual | after release | kB per 1k invokes [95%] | leak? |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['model']} | {r['label']} | {r['status']}: {r['error']} |"
                         + " |" * 8)  # fmt: skip
            continue
        slope = "-"
        if r["leak_kb_per_1k"] is not None:
            low, high = r["leak_interval"]
            slope = f"{r['leak_kb_per_1k']:.2f} [{low:.2f}, {high:.2f}]"
        lines.append(
            f"| {r['model']} | {r['label']} | {_mb(r['process_peak_mb'])} | {_mb(r['floor_mb'])} "
            f"| {_mb(r['model_mb'])} | {_mb(r['file_mb'])} | {_mb(r['planned_mb'])} | "
            f"{_mb(r['residual_mb'])} | {_mb(r['retained_mb'])} | {slope} | "
            f"{'yes' if r['leak'] else 'no'} |"
        )
    below = [f"{r['model']} {r['label']}" for r in rows
             if r["status"] == "ok" and r["residual_mb"] is not None and r["residual_mb"] < 0]  # fmt: skip
    if below:
        lines += ["", f"A residual below zero ({', '.join(below)}): part of the file never "
                  "became resident; the runtime maps the file and reads only the pages it "
                  "needs, so the file counts more than the model holds."]  # fmt: skip
    leaks = [f"{r['model']} {r['label']} ({r['invokes']} invokes)" for r in rows if r["leak"]]
    if leaks:
        lines += ["", f"Flagged: {', '.join(leaks)}. Where a run ended before 10,000 invokes "
                  "(the time cap), a one-off step of the resident set near its end reads as a "
                  "slope, and this page cannot tell the two apart: `edgekit check "
                  "--max-leak-kb-per-1k` on that file runs up to 10,000 (at most a minute)."]  # fmt: skip
    if len(models) == 2:
        lines += [
            "",
            f"Does the model's share scale with the model? {models[1]} over {models[0]}, per "
            "artifact kind: the ratio of their shares beside the ratio of their files. Each "
            "share holds the weights (which scale with the file) and the activations and the "
            "session's own structures (which grow less from one model to the other), so the "
            "share's ratio should be above 1 and at most the file's.",
            "",
            "| artifact | model share ratio | file ratio | above 1, at most the file's |",
            "|---|---|---|---|",
            *scaling(rows, models[0], models[1]),
        ]
    write_markdown(HERE / "MEMORY.md", lines)
    print("wrote benchmarks/MEMORY.md")


if __name__ == "__main__":
    main()
