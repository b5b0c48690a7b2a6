"""Do the ratios reproduce, and do their intervals say so? Separate runs of ``latency.py`` on
MobileNetV2 (separate processes, ``--gap`` seconds apart: 900 or more is the test that counts,
since a shared VM drifts over minutes), and for every ratio (an artifact over torch eager, int8
and fp16 over their fp32): do the runs' estimates agree within their intervals?

Two runs agree on a ratio when their estimates differ by no more than their 95 % intervals
allow together (``edgekit.common.stats.runs_agree``: the root sum of squares of the two
half-widths). Calibrated intervals of runs that differ in nothing agree 95 times in 100; a kind
of ratio *reproduces* on this machine when at least 90 % of its pairs of runs agree. The page
also counts how often one run's interval holds another run's estimate, beside how often
calibrated intervals would (``chance_to_hold``: about 83 % for two alike 95 % intervals, since
the other estimate carries its own noise), so a reader sees both ways of asking. Writes
benchmarks/REPRODUCIBILITY.md and reproducibility.json.

    .venv/bin/python benchmarks/reproduce.py [--runs 3] [--gap 900] [--model mobilenet_v2]
                                             [--sessions 4] [--session-gap 0] [--lock LOCKFILE]
    .venv/bin/python benchmarks/reproduce.py --from-json benchmarks/reproducibility.json

The page's table shows only the kinds of ratio that reproduced; one that did not is named with
how far it moved, since its per-artifact cells would read as a claim about the next run.

``--session-gap`` spreads a run's sessions over minutes, so one run's interval sees the
machine's drift (an Intel Xeon VM, 2026-12-02: 6 sessions 120 s apart held 53 of 54 ratios over
fp32, sessions inside two minutes 34 of 54).

With ``--lock``, each run holds that file's lock (flock) while it runs: other jobs started as
``flock LOCKFILE COMMAND`` (the same file) use the gaps and never overlap a run."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from itertools import combinations, permutations
from pathlib import Path

from common import HERE, artifacts, header, machine, write_json, write_markdown

from edgekit.common.stats import chance_to_hold, runs_agree
from edgekit.worker.interference import wait_for_quiet

KINDS = {"over_eager": "over torch eager", "over_fp32": "over its fp32"}
QUIET = 0.15  # cores other processes may use when a run starts
# calibrated 95 % intervals of runs that differ in nothing agree 95 % of the time; 90 % leaves
# room for the sampling of a few dozen pairs
PROMISE = 0.90


def spread(values: list[float]) -> float:
    """The largest distance of a value from their mean, as a fraction of the mean."""
    mean = sum(values) / len(values)
    return max(abs(v - mean) for v in values) / mean


def coverage(points: list[float], intervals: list[list[float]]) -> tuple[int, int, float]:
    """How many (run i's interval, run j's estimate) pairs, i != j, hold, how many there are,
    and how many calibrated intervals would hold: (held, pairs, expected)."""
    pairs = list(permutations(range(len(points)), 2))
    held = sum(intervals[i][0] <= points[j] <= intervals[i][1] for i, j in pairs)
    expected = sum(chance_to_hold(intervals[i], intervals[j]) for i, j in pairs)
    return held, len(pairs), expected


def agreement(points: list[float], intervals: list[list[float]]) -> tuple[int, int]:
    """How many pairs of runs agree on the ratio within their intervals: (agreed, pairs)."""
    pairs = list(combinations(range(len(points)), 2))
    agreed = sum(runs_agree(points[i], intervals[i], points[j], intervals[j]) for i, j in pairs)
    return agreed, len(pairs)


def judged(rows: dict[str, dict[str, list]], runs: int) -> dict[str, dict]:
    """Per kind of ratio: how many pairs of runs agreed, how many intervals held the other runs'
    estimates (and how many calibrated ones would), the median width and the median move."""
    kinds = {}
    for key in KINDS:
        agreed = pairs = held = ordered = 0
        expected = 0.0
        disagreed = []
        for name, entry in rows.items():
            if len(entry.get(key, [])) == runs > 1:
                a, n = agreement(entry[key], entry[f"{key}_ci"])
                h, m, e = coverage(entry[key], entry[f"{key}_ci"])
                agreed, pairs, held, ordered, expected = (
                    agreed + a,
                    pairs + n,
                    held + h,
                    ordered + m,
                    expected + e,
                )
                if a < n:
                    disagreed.append(name)
        widths = [high / low for entry in rows.values() for low, high in entry.get(f"{key}_ci", [])]
        moved = [spread(entry[key]) for entry in rows.values() if len(entry.get(key, [])) > 1]
        kinds[key] = {"agreed": agreed, "pairs": pairs, "disagreed": disagreed,
                      "reproduces": pairs > 0 and agreed >= PROMISE * pairs,
                      "held": held, "ordered_pairs": ordered, "expected_held": expected,
                      "median_hi_lo": statistics.median(widths) if widths else None,
                      "median_spread": statistics.median(moved) if moved else None}  # fmt: skip
    return kinds


@contextlib.contextmanager
def lock_held(lock: Path | None):
    """The lock ``lock`` held for the block (nothing without one)."""
    if lock is None:
        yield
        return
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits for a cooperating job to finish
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _one_run(model: str, out: Path, sessions: int, session_gap: float) -> dict:
    command = [sys.executable, str(HERE / "latency.py"), "--models", model, "--threads", "1",
               "--no-tool", "--sessions", str(sessions), "--session-gap", str(session_gap),
               "--json", str(out), "--markdown", "-"]  # fmt: skip
    started = datetime.now(UTC).isoformat(timespec="seconds")
    subprocess.run(command, check=True)
    return {"started": started, **json.loads(out.read_text())}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gap", type=float, default=900.0, help="seconds between runs")
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--sessions", type=int, default=4, help="planned sessions in each run")
    parser.add_argument("--session-gap", type=float, default=0.0,
                        help="seconds between a run's sessions, so they span minutes")  # fmt: skip
    parser.add_argument("--max-wait", type=float, default=3600.0,
                        help="seconds to wait for a quiet machine before each run")  # fmt: skip
    parser.add_argument("--lock", type=Path, help="a file whose flock each run holds")
    parser.add_argument("--from-json", type=Path, metavar="RECORD",
                        help="rewrite the page and the record's judgement from a recorded "
                        "reproducibility.json; "
                        "measures nothing")  # fmt: skip
    return parser.parse_args()


def measure(args: argparse.Namespace) -> dict:
    """``args.runs`` runs of latency.py, ``args.gap`` seconds apart, summarized."""
    artifacts(args.model, print)  # export once, so every run times the same files
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.runs):
            if index:
                print(f"waiting {args.gap:.0f} s before run {index + 1}", flush=True)
                time.sleep(args.gap)
            with lock_held(args.lock):
                # each run starts on a quiet machine (what ran in the gap has ended)
                reading = wait_for_quiet(QUIET, window_s=5.0, max_wait_s=args.max_wait)
                if reading is not None and reading.foreign >= QUIET:
                    raise SystemExit(f"the machine stayed busy ({reading.foreign:.2f} cores) for "
                                     f"{args.max_wait:.0f} s before run {index + 1}")  # fmt: skip
                print(f"run {index + 1} of {args.runs}", flush=True)
                runs.append(_one_run(args.model, Path(tmp) / f"run{index}.json", args.sessions,
                                     args.session_gap))  # fmt: skip
    return summarize(runs, args)


def summarize(runs: list[dict], args: argparse.Namespace) -> dict:
    """The runs' ratios side by side and, per kind of ratio, how many intervals held."""
    rows: dict[str, dict[str, list]] = {}
    for run in runs:
        for row in run["pools"][0]["rows"]:
            if row["status"] != "ok":
                continue
            entry = rows.setdefault(row["label"], {"p50": []})
            entry["p50"].append(row["stats"]["p50_ms"])
            for key in KINDS:
                if row.get(key):
                    entry.setdefault(key, []).append(row[key])
                    entry.setdefault(f"{key}_ci", []).append(row[f"{key}_ci"])
    return {
        "model": args.model, "gap_s": args.gap, "sessions": args.sessions,
        "session_gap_s": args.session_gap, "machine": machine(),
        "started": [r["started"] for r in runs],
        "finished": datetime.now(UTC).isoformat(timespec="minutes"),
        "kinds": judged(rows, len(runs)), "rows": rows,
    }  # fmt: skip


def _cell(values: list[float], intervals: list[list[float]]) -> str:
    agreed, pairs = agreement(values, intervals)
    return (
        " / ".join(f"{v:.3f}" for v in values)
        + f" (+-{100 * spread(values):.1f} %; {agreed}/{pairs} agree)"
    )


def page(record: dict, source: str | None = None) -> list[str]:
    """REPRODUCIBILITY.md from a record alone. Its table shows only the kinds of ratio that
    reproduced: one that did not is a figure of one run, and a page of its per-artifact cells
    would read as a cross-run claim."""
    runs, gap, gap_s = len(record["started"]), record["gap_s"], record["session_gap_s"]
    command = (
        f"python benchmarks/reproduce.py --runs {runs} --gap {gap:.0f} "
        f"--sessions {record['sessions']} --session-gap {gap_s:.0f}"
    )
    notes = [
        f"- {runs} separate runs of `benchmarks/latency.py --models {record['model']} "
        f"--threads 1 --sessions {record['sessions']} --session-gap {gap_s:.0f}`, started "
        f"{', '.join(record['started'])} (at least {gap:.0f} s between one's end and the "
        "next's start)",
        "- each ratio cell: the runs' point estimates, their largest distance from the mean, "
        "and how many pairs of runs agree on it within their intervals",
        "- every interval is edgekit's 95 % interval from its run's two-level fit (rounds "
        "within sessions, sessions within sides; each side reopened in a new process between "
        f"sessions{f', {gap_s:.0f} s apart' if gap_s else ''}). Two runs agree when their "
        "estimates differ by no more than the root sum of squares of their intervals' "
        "half-widths (the 95 % interval of a difference of two independent estimates): "
        "calibrated intervals of runs that differ in nothing agree 95 times in 100, and a kind "
        f"of ratio reproduces when at least {PROMISE:.0%} of its pairs agree",
        "- 'held' counts the (run i's interval, run j's estimate) pairs, i != j, where the "
        "interval holds the estimate; 'calibrated' is how many calibrated intervals would hold "
        "(fewer than 95 %: the other estimate carries its own noise, about 83 % for two alike "
        "intervals)",
    ]
    written = record.get("finished")
    if source:
        # the measurement's command and machine stay; the page says it was rewritten, and when
        notes.append(f"- measured by `{command}`; this page was rewritten from {source}")
        command, written = f"python benchmarks/reproduce.py --from-json {source}", None
    lines = header("Do the ratios reproduce?", command, notes, facts=record["machine"],
                   written=written)  # fmt: skip
    rows = record["rows"]
    kinds = record["kinds"]  # judged by summarize, or again by --from-json for an older record
    shown = [key for key in KINDS if kinds[key]["reproduces"]]
    for key, label in KINDS.items():
        kind = kinds[key]
        if kind.get("median_hi_lo"):
            lines.append(
                f"- {label}: the median interval spans hi/lo {kind['median_hi_lo']:.3f}, and the "
                f"runs' estimates moved by a median +-{100 * kind['median_spread']:.1f} %; "
                f"{kind['held']} of {kind['ordered_pairs']} intervals held another run's "
                f"estimate (calibrated: about {kind['expected_held']:.0f})"
            )
        apart = kind["disagreed"]
        disagreed = f"; runs disagreed on {', '.join(apart)}" if apart else ""
        verdict = "reproduces" if key in shown else "does NOT reproduce"
        lines.append(
            f"- **{label}: {verdict}** here: {kind['agreed']} of {kind['pairs']} pairs of runs "
            f"agree within their intervals{disagreed}"
            + (
                "; the table shows it"
                if key in shown
                else ". Not in the table: on this machine such a ratio is one run's figure"
            )
        )
    columns = ["artifact", "p50 ms", *(KINDS[key] for key in shown)]
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for label, entry in rows.items():
        cells = [
            " / ".join(f"{v:.3f}" for v in entry["p50"])
            + f" (+-{100 * spread(entry['p50']):.1f} %)"
        ]
        for key in shown:
            values = entry.get(key, [])
            cells.append(_cell(values, entry[f"{key}_ci"]) if len(values) > 1 else "")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return lines


def main() -> None:
    args = _arguments()
    if args.from_json:
        record = json.loads(args.from_json.read_text())
        record["kinds"] = judged(record["rows"], len(record["started"]))
        write_json(args.from_json, record)  # an older record gains today's judgement
        source = str(args.from_json)
    else:
        record = measure(args)
        write_json(HERE / "reproducibility.json", record)
        source = None
    write_markdown(HERE / "REPRODUCIBILITY.md", page(record, source))
    print("wrote benchmarks/REPRODUCIBILITY.md")


if __name__ == "__main__":
    main()
