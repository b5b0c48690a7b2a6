"""How far each runtime's default configuration is from its fastest one on this machine: every
target x recipe of MobileNetV2 and ResNet-50 (random weights), at 1 and 2 threads, searched by
``edgekit tune --threads N`` (the thread count fixed, each runtime option searched at it,
interleaved against the incumbent, a winner only where its interval lies below 1). Measures the
goal "every default within 10 % of its runtime's fastest configuration". Writes
benchmarks/TUNE.md and benchmarks/tune.json.

    .venv/bin/python benchmarks/tune.py [--models mobilenet_v2,resnet50] [--budget-s 30]"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from common import HERE, artifacts, header, machine, write_json, write_markdown

from edgekit.measure.bench import bench_artifact
from edgekit.report.tuning import ratio_text
from edgekit.tune.api import TUNE_PROTOCOL, tune_artifacts
from edgekit.worker.latency import NoiseGuard

THREADS = (1, 2)
WITHIN = 1.10  # the goal: the default at most 10 % slower than the fastest configuration


def tune_row(artifact, threads: int, budget_s: float, log) -> dict:
    """One artifact at ``threads``: the search's start (edgekit's defaults) against its best."""
    [outcome] = tune_artifacts([artifact], threads=threads, budget_s=budget_s, write=False,
                               guard=NoiseGuard(), progress=log)  # fmt: skip
    tuned = outcome.tuned
    row = {"artifact": artifact.label, "threads": threads, **tuned.to_dict()}
    row["nothing_to_search"] = not tuned.trials  # at a fixed count, ExecuTorch has no option
    if tuned.default_p50_ms is None:  # the final run failed: one bench of the default
        bench = bench_artifact(artifact, device="cpu", threads=threads, protocol=TUNE_PROTOCOL)
        row["default_p50_ms"] = row["best_p50_ms"] = bench.stats["p50_ms"]
    return row


def verdict_of(row: dict) -> str:
    if row.get("nothing_to_search"):
        return "nothing to search beside threads"
    final = row["final"]
    if final is None:
        return "default won every stage"
    return {"faster": "best is faster", "tie": "a tie: default kept"}.get(final, final)


def options_text(row: dict) -> str:
    shown = row["changed"] or row.get("tied") or {}
    text = ", ".join(f"{k}={v}" for k, v in shown.items()) or "the defaults"
    return text + (" (tied, not kept)" if row["rejected"] else "")


def nearest(row: dict) -> str:
    """The searched option that came closest to the incumbent: how near the default's rivals
    came, with its interval (the evidence behind a default kept)."""
    judged = [t for t in row["trials"] if t["ratio"] is not None]
    if not judged:
        return "-"
    best = min(judged, key=lambda t: t["ratio"])
    low, high = best["interval"]
    return f"{best['knob']}={best['value']}: {best['ratio']:.3f} [{low:.3f}, {high:.3f}]"


def surely_within(row: dict) -> bool | None:
    """Is the kept default surely within 10 % of every configuration tried (each rival's
    interval above 1/1.1)? None where nothing was compared."""
    lows = [t["interval"][0] for t in row["trials"] if t["interval"] is not None]
    if row["final"] == "faster" or not lows:
        return None if not lows else False
    return min(lows) >= 1 / WITHIN


def summary(rows: list[dict]) -> list[str]:
    """Per runtime: where its default was left behind, by how much, and where the evidence
    says it is within 10 % of every configuration tried."""
    lines = []
    for target in ("tflite", "executorch", "onnx"):
        mine = [r for r in rows if r["artifact"].startswith(f"{target}/")]
        behind = [r for r in mine if r["final"] == "faster"]
        beyond = [r for r in behind if r["interval"][1] < 1 / WITHIN]
        partial = [r for r in mine if r["untried"]]
        compared = [r for r in mine if surely_within(r) is not None]
        sure = [r for r in compared if surely_within(r)]
        left_out = (f" In {len(partial)} of them the budget left options out (named in the "
                    "table)." if partial else "")  # fmt: skip
        evidence = (f" Surely within 10 % of every configuration tried (each rival's interval "
                    f"above {1 / WITHIN:.3f}) in {len(sure)} of the {len(compared)} rows with "
                    "rivals; in the others a rival's interval is too wide to tell."
                    if compared else " Nothing beside threads to compare.")  # fmt: skip
        if not behind:
            lines.append(f"- {target}: the default was the fastest configuration found (or tied "
                         f"with it) in all {len(mine)} rows.{evidence}{left_out}")  # fmt: skip
            continue
        worst = min(behind, key=lambda r: r["ratio"])
        lines.append(
            f"- {target}: the default was left behind in {len(behind)} of {len(mine)} rows, "
            f"{len(beyond)} of them by surely more than 10 % (interval below "
            f"{1 / WITHIN:.3f}); the most: {worst['model']} {worst['artifact']} x"
            f"{worst['threads']}, best/default {worst['ratio']:.3f} [{worst['interval'][0]:.3f}, "
            f"{worst['interval'][1]:.3f}] with {options_text(worst)}.{evidence}{left_out}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50")
    parser.add_argument("--budget-s", type=float, default=60.0, help="per artifact and count")
    parser.add_argument("--page-only", action="store_true",
                        help="rewrite TUNE.md from tune.json, measuring nothing")  # fmt: skip
    args = parser.parse_args()
    log = lambda message: print(message, flush=True)  # noqa: E731
    if args.page_only:
        recorded = json.loads((HERE / "tune.json").read_text())
    else:
        rows = []
        for model in args.models.split(","):
            made, _, _ = artifacts(model, log)
            for threads in THREADS:
                for artifact in made:
                    rows.append({"model": model, **tune_row(artifact, threads, args.budget_s,
                                                            log)})  # fmt: skip
        recorded = {"budget_s": args.budget_s, "rows": rows, "machine": machine(),
                    "written": datetime.now(UTC).isoformat(timespec="minutes")}  # fmt: skip
        write_json(HERE / "tune.json", recorded)
    write_page(recorded)


def write_page(recorded: dict) -> None:
    rows, budget_s = recorded["rows"], recorded["budget_s"]
    # rows recorded before tune's final run went into three sessions (and measured a default
    # that won every stage) are described as they were made
    sessions = any("default_p50_interval" in row for row in rows)
    alone = ("its p50 in the final run, where it ran alone in three sessions" if sessions
             else "its p50 in the first stage, ExecuTorch's one bench of the default")  # fmt: skip
    final = ("in three sessions, with its 95 % interval from their spread" if sessions
             else "with its 95 % interval widened by the incumbent's own band")  # fmt: skip
    lines = header(
        "Each runtime's default against its fastest configuration",
        f"python benchmarks/tune.py --budget-s {budget_s:g}",
        [
            "- each row: `edgekit tune --threads N` of one file (random weights), the thread "
            "count fixed and every runtime option searched at it, stage by stage, interleaved "
            "with two sessions of the incumbent; best/default is the stages' winner over the "
            f"start in one more interleaved comparison, {final}. A winner is kept only where "
            "that interval lies below 1.",
            f"- {budget_s:g} s per file and thread count; options the budget left out are "
            f"named. Where the default won every stage, both p50s are {alone}, with no ratio; "
            "ExecuTorch 1.5.1 exposes only its threadpool to Python, so at a fixed thread count "
            "it has nothing to search.",
            "",
            *summary(rows),
        ],
        facts=recorded.get("machine"),
        written=recorded.get("written"),
    )
    lines += [
        "| model | artifact | threads | default p50 ms | best p50 ms | best/default [95%] | "
        "verdict | best options | nearest rival / incumbent [95%] | left out by the budget |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = ratio_text(row["ratio"], row["interval"])
        lines.append(
            f"| {row['model']} | {row['artifact']} | {row['threads']} | "
            f"{row['default_p50_ms']:.3f} | {row['best_p50_ms']:.3f} | {ratio} | "
            f"{verdict_of(row)} | {options_text(row)} | {nearest(row)} | "
            f"{', '.join(row['untried']) or '-'} |"
        )
    write_markdown(HERE / "TUNE.md", lines)
    print("wrote benchmarks/TUNE.md")


if __name__ == "__main__":
    main()
