"""How wide are a run's intervals, and what did they cost? For each run directory given (an
``edgekit run`` of any edgekit version: results schema 2 or 3), per pool: the bench phase's
seconds (the pool's evaluation included), the sessions and rounds, why the measuring stopped,
the spread between sessions and between rounds (schema 3), the hi/lo of every speed-up over
the baseline and of every artifact-against-artifact ratio (all pairs), how many artifacts tie with
the recommended one, and the recommendation. Writes benchmarks/INTERVALS.md (and .json). Each
row names the machine its run was measured on (CPU, ISA, fingerprint); ``--keep`` keeps the
page's earlier rows, so that runs on several machines sit side by side, each named.

    python benchmarks/intervals.py --label before runs/A --label after runs/B [--keep]

The widths are read through edgekit's own ``recorded_ratio``: a results file from before the
two-level fit gets its rounds' intervals widened by its noise band, as that edgekit reported them.
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import UTC, datetime
from pathlib import Path

from common import HERE, header, write_json, write_markdown

from edgekit.common.machine import describe
from edgekit.report.recommend import latency_ratio, recommend, tied, timed
from edgekit.results import load_results


def pool_figures(run_dir: Path) -> list[dict]:
    results = load_results(run_dir)
    measured_on = results.run.get("machine") or {}
    advice = recommend(results.rows, results.run.get("config", {}).get("max_drop", 1.0))
    pools: dict[tuple, list] = {}
    for row in timed(results.rows):
        pools.setdefault((row.device, row.threads), []).append(row)
    figures = []
    for (device, threads), rows in pools.items():
        speedups = [hi / lo for row in rows if row.speedup_ci for lo, hi in [row.speedup_ci]]
        pairs = []
        for index, a in enumerate(rows):
            for b in rows[index + 1 :]:
                found = latency_ratio(a, b)
                if found is not None:
                    pairs.append(found[1][1] / found[1][0])
        started, finished = rows[0].bench_started, rows[0].bench_finished
        seconds = None
        if started and finished:
            seconds = (
                datetime.fromisoformat(finished) - datetime.fromisoformat(started)
            ).total_seconds()
        best = advice.best if any(row is advice.best for row in rows) else None
        pool = rows[0].pool or {}
        figures.append({
            "run": results.run["id"],
            "machine": measured_on.get("cpu_model"),
            "machine_line": describe(measured_on),
            "fingerprint": measured_on.get("id"),
            "pool": f"{device} x{threads}",
            "artifacts": len(rows),
            "bench_s": seconds,
            "sessions": pool.get("sessions") or len(set(rows[0].round_sessions or [0])),
            "rounds": len(rows[0].rounds_ms),
            "stopped": pool.get("stopped", "plan (before the stopping rule)"),
            "session_sd": pool.get("session_sd"),
            "round_sd": pool.get("round_sd"),
            "speedup_hi_lo": [min(speedups, default=0), max(speedups, default=0)],
            "speedup_hi_lo_median": statistics.median(speedups) if speedups else None,
            "pair_hi_lo": [min(pairs, default=0), max(pairs, default=0)],
            "pair_hi_lo_median": statistics.median(pairs) if pairs else None,
            "pairs_over_1_10": sum(width > 1.10 for width in pairs),
            "pairs": len(pairs),
            "tied_with_best": None if best is None else
            sum(tied(row, best) for row in rows if row is not best),
            "recommendation": None if best is None else best.label,
        })  # fmt: skip
    return figures


def page(entries: list[dict], command: str) -> list[str]:
    lines = header("How wide are the intervals, and what did they cost?", command)
    lines += [
        "| run | label | CPU | pool | bench s | sessions | rounds | stopped | sd between sessions, "
        "between rounds | speed-up hi/lo (min-max, median) | artifact pairs hi/lo (min-max, "
        "median) | pairs > 1.10 | tied with the recommended | recommended |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    machines = {e["fingerprint"]: e["machine_line"] for e in entries if e.get("fingerprint")}
    notes = [f"- `{key}`: {line}" for key, line in machines.items()]
    for entry in entries:
        cpu = entry["machine"]
        if entry.get("fingerprint"):
            cpu = f"{cpu} `{entry['fingerprint']}`"
        low, high = entry["speedup_hi_lo"]
        pair_low, pair_high = entry["pair_hi_lo"]
        seconds = "" if entry["bench_s"] is None else f"{entry['bench_s']:.0f}"
        spreads = "-"
        if entry["session_sd"] is not None:
            spreads = f"{100 * entry['session_sd']:.1f} %, {100 * entry['round_sd']:.1f} %"
        lines.append(
            f"| {entry['run']} | {entry['label']} | {cpu} | {entry['pool']} | "
            f"{seconds} | {entry['sessions']} | {entry['rounds']} | {entry['stopped']} | "
            f"{spreads} | "
            f"{low:.3f}-{high:.3f}, {entry['speedup_hi_lo_median'] or 0:.3f} | "
            f"{pair_low:.3f}-{pair_high:.3f}, {entry['pair_hi_lo_median'] or 0:.3f} | "
            f"{entry['pairs_over_1_10']} of {entry['pairs']} | {entry['tied_with_best']} | "
            f"{entry['recommendation']} |"
        )
    if notes:
        lines += ["", "The machines (by fingerprint) the runs were measured on:", *notes]
    earlier = {
        (e["command"], e["written"]) for e in entries if e.get("command", command) != command
    }
    if earlier:
        lines += ["", "Rows kept from earlier pages (`--keep`) were written by:"]
        lines += [f"- `{made}` on {when}" for made, when in sorted(earlier, key=lambda c: c[1])]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--label", action="append", default=[], help="one per run, in order")
    parser.add_argument("--out", type=Path, default=HERE / "INTERVALS.md")
    parser.add_argument(
        "--keep", action="store_true", help="keep the page's earlier rows (other runs, machines)"
    )
    args = parser.parse_intermixed_args()
    labels = args.label + [""] * (len(args.runs) - len(args.label))
    new = {run.name for run in args.runs}
    kept = args.out.with_suffix(".json")
    entries = []
    if args.keep and kept.is_file():
        entries = [e for e in json.loads(kept.read_text())["entries"] if e["run"] not in new]
    command = "python benchmarks/intervals.py " + " ".join(
        f"--label {label} {run.name}" for run, label in zip(args.runs, labels, strict=True)
    )
    if args.keep:
        command += " --keep"
    written = datetime.now(UTC).isoformat(timespec="minutes")
    for run_dir, label in zip(args.runs, labels, strict=True):
        entries += [
            {**figures, "label": label, "command": command, "written": written}
            for figures in pool_figures(run_dir)
        ]
    write_markdown(args.out, page(entries, command))
    write_json(args.out.with_suffix(".json"), {"entries": entries})
    print("\n".join(page(entries, command)))


if __name__ == "__main__":
    main()
