"""Do the ratios reproduce? Three separate runs of ``latency.py`` on MobileNetV2 (separate
processes, a pause between them), and the spread of every ratio (artifact over torch eager, int8
and fp16 over fp32) against the spread of the absolute p50s. Target: every ratio within +-5 % of
its three-run mean, while absolute p50s may move 20 %. Writes benchmarks/REPRODUCIBILITY.md.

    .venv/bin/python benchmarks/reproduce.py [--runs 3] [--gap 60] [--model mobilenet_v2]"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import HERE, artifacts, header, write_json

TARGET = 0.05


def spread(values: list[float]) -> float:
    """The largest distance of a value from their mean, as a fraction of the mean."""
    mean = sum(values) / len(values)
    return max(abs(v - mean) for v in values) / mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gap", type=float, default=60.0, help="seconds between runs")
    parser.add_argument("--model", default="mobilenet_v2")
    args = parser.parse_args()
    artifacts(args.model, print)  # export once, so every run times the same files
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.runs):
            if index:
                time.sleep(args.gap)
            out = Path(tmp) / f"run{index}.json"
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "latency.py"),
                    "--models",
                    args.model,
                    "--threads",
                    "1",
                    "--no-tool",
                    "--json",
                    str(out),
                    "--markdown",
                    "-",
                ],
                check=True,
            )
            runs.append(json.loads(out.read_text()))
    rows: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for row in run["pools"][0]["rows"]:
            if row["status"] != "ok":
                continue
            entry = rows.setdefault(row["label"], {"p50": [], "over_eager": [], "over_fp32": []})
            entry["p50"].append(row["stats"]["p50_ms"])
            for key in ("over_eager", "over_fp32"):
                if row.get(key):
                    entry[key].append(row[key])
    write_json(HERE / "reproducibility.json", {"gap_s": args.gap, "rows": rows})
    lines = header(
        "Do the ratios reproduce?",
        "python benchmarks/reproduce.py",
        [
            f"- {args.runs} separate runs of `benchmarks/latency.py --models {args.model} --threads 1`"
            f", {args.gap:.0f} s apart; each cell: the values of the runs, then the largest distance "
            "from their mean",
        ],
    )
    lines += [
        "| artifact | p50 ms | over torch eager | over its fp32 | ratios within 5 % |",
        "|---|---|---|---|---|",
    ]
    for label, entry in rows.items():
        cells = []
        for key, pattern in (("p50", "{:.3f}"), ("over_eager", "{:.2f}"), ("over_fp32", "{:.2f}")):
            values = entry[key]
            cells.append(
                ""
                if len(values) < 2
                else " / ".join(pattern.format(v) for v in values)
                + f" (+-{100 * spread(values):.1f} %)"
            )
        ratios = [spread(entry[k]) for k in ("over_eager", "over_fp32") if len(entry[k]) > 1]
        verdict = "yes" if ratios and max(ratios) <= TARGET else ("no" if ratios else "")
        lines.append(f"| {label} | {' | '.join(cells)} | {verdict} |")
    Path(HERE / "REPRODUCIBILITY.md").write_text("\n".join(lines) + "\n")
    print("wrote benchmarks/REPRODUCIBILITY.md")


if __name__ == "__main__":
    main()
