"""Is the new house as fast as the old one? For every target x recipe of each model, the artifact
exported and timed by edgekit at an older commit (default 4387eed, the code the review of
issue 11 read) and the same target x recipe exported and timed by this checkout, interleaved in
the same rounds on the host CPU. Each row: old time / new time with its 95 % interval over the
sessions the rounds ran in (every side reopened between them). Target: no row slower (no interval wholly below 1).
Writes benchmarks/BEFORE_AFTER.md and benchmarks/before_after.json.

    .venv/bin/python benchmarks/before_after.py [--commit 4387eed] [--models digits-mobilenet,...]

Run it on a quiet machine: nothing else should run beside it."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from common import ARTIFACTS, DATA, HERE, artifacts, header, write_json, write_markdown

from edgekit.devices import get_device
from edgekit.measure.bench import measure_interleaved
from edgekit.worker.latency import LatencyProtocol, LatencyRecord, NoiseGuard
from edgekit.worker.parent import WorkerTimer, child_env

PROTOCOL = LatencyProtocol(warmup=10, min_runs=50, min_seconds=1.0, rounds=12, block_seconds=0.1)
GUARD = NoiseGuard(threshold=0.15, retries=1, settle_max_s=60.0)
ROOT = HERE.parent


def old_tree(commit: str) -> Path:
    """``commit``'s edgekit laid out as installed, cached under benchmarks/.artifacts/: its
    ``edgekit/``, with ``targets/`` and ``quantize/`` moved in where the commit kept them at the
    top (before the tree became one folder per stage)."""
    where = ARTIFACTS / f"before-{commit}"
    package = where / "pkg" / "edgekit"
    if (package / "targets").is_dir():
        return where
    shutil.rmtree(where, ignore_errors=True)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", commit],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    outside = [folder for folder in ("targets", "quantize") if folder in listed]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "edgekit", *outside],
        capture_output=True,
        check=True,
    ).stdout
    source = where / "src"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    (where / "pkg").mkdir(parents=True)
    shutil.move(source / "edgekit", package)
    for folder in outside:
        shutil.move(source / folder, package / folder)
    return where


def old_env(tree: Path) -> dict[str, str]:
    # the old tree first on the path (before the editable install of this checkout), and its own
    # cache, so its training of the built-in model never touches today's
    return dict(child_env(), PYTHONPATH=str(tree / "pkg"), EDGEKIT_CACHE=str(tree / "cache"))


def old_artifacts(tree: Path, model: str, log) -> dict[str, str]:
    out = tree / "artifacts" / model
    index = out / "index.json"
    if index.is_file():
        return json.loads(index.read_text())
    log(f"export {model} with the old tree")
    done = subprocess.run(
        [sys.executable, str(HERE / "old_side.py"), "export", model, DATA[model], str(out)],
        capture_output=True,
        text=True,
        env=old_env(tree),
        cwd=tree,
    )
    if done.returncode != 0:
        raise SystemExit(f"the old tree failed to export {model}: {done.stderr[-600:]}")
    made = json.loads(done.stdout.strip().splitlines()[-1])
    index.write_text(json.dumps(made))
    return made


def pool(tree: Path, model: str, threads: int, log) -> dict:
    new, _, dataset = artifacts(model, log)
    old = old_artifacts(tree, model, log)
    device, sample = get_device("cpu"), dataset.evaluation.x[:1]
    command, env = [sys.executable, str(HERE / "old_side.py")], old_env(tree)
    timers, records, pairs = [], [], []
    for artifact in new:
        if artifact.label not in old:
            continue
        request = {"artifact": old[artifact.label], "threads": threads, "warmup": PROTOCOL.warmup}
        pairs.append((artifact.label, len(timers)))
        timers.append(device.timer(artifact, threads, sample, PROTOCOL, 600.0))
        records.append(LatencyRecord.for_artifact(artifact, "cpu", threads))
        before = WorkerTimer(f"{artifact.label} (before)", request, sample, 600.0,
                             command=command, env=env)  # fmt: skip
        if str(tree) not in before.runtime["edgekit_tree"]:
            raise SystemExit(f"the old side ran {before.runtime['edgekit_tree']}, not {tree}")
        timers.append(before)
        records.append(LatencyRecord(f"{artifact.label} (before)", "cpu", threads, "failed"))
    log(f"{model} x{threads}: {len(timers)} sides interleaved (old and new)")
    result = measure_interleaved(timers, records, PROTOCOL, GUARD)
    rows = []
    for label, side in pairs:
        new_record, old_record = records[side], records[side + 1]
        row = {"label": label, "status": "ok"}
        if new_record.status != "ok" or old_record.status != "ok":
            row.update(status="failed", error=new_record.error or old_record.error)
        else:
            ratio, ci = result.ratio(side + 1, side)  # old time / new time
            row.update(new_p50=new_record.stats["p50_ms"], old_p50=old_record.stats["p50_ms"],
                       ratio=ratio, ratio_ci=list(ci))  # fmt: skip
        rows.append(row)
    return {"model": model, "threads": threads, "rows": rows, "rounds": len(result.rounds_used),
            "sessions": result.summary()["sessions"]}  # fmt: skip


def verdict(row: dict) -> str:
    if row["status"] != "ok":
        return row["status"]
    low, high = row["ratio_ci"]
    return "slower" if high < 1 else ("faster" if low > 1 else "same within noise")


def markdown(commit: str, pools: list[dict]) -> list[str]:
    lines = header(
        "Before and after the new house",
        "python benchmarks/before_after.py",
        [
            f"- before: edgekit at `{commit}` (its own export and its own session code); after: "
            "this checkout. Both exported the same model with the same recipe, and both sides "
            "timed single invokes of one staged input, interleaved in the same rounds "
            f"(at least {PROTOCOL.rounds} rounds of ~{PROTOCOL.block_seconds * 1e3:.0f} ms blocks "
            "per side).",
            "- old / new is the geometric mean of the per-round ratios of block medians; above 1 "
            "the new code is faster. Its 95 % interval comes from the spread between the "
            "sessions the rounds ran in, from the two-level fit (each side reopened between "
            "them; edgekit.common.two_levels.fit_two_levels). Target: no row "
            "slower.",
        ],
    )
    lines += [
        "| model | thr | sessions | artifact | before p50 ms | after p50 ms | "
        "old / new [95% CI] | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in pools:
        first = f"| {entry['model']} | {entry['threads']} | {entry.get('sessions', '')} "
        for row in entry["rows"]:
            if row["status"] != "ok":
                lines.append(f"{first}| {row['label']} | | | | failed: {row.get('error')} |")
                continue
            low, high = row["ratio_ci"]
            lines.append(
                f"{first}| {row['label']} | {row['old_p50']:.3f} | {row['new_p50']:.3f} | "
                f"{row['ratio']:.3f} [{low:.3f}, {high:.3f}] | {verdict(row)} |"
            )
    lines.append("")
    rows = [row for entry in pools for row in entry["rows"]]
    slower = [row["label"] for row in rows if verdict(row) == "slower"]
    lines.append(
        f"Slower after the change: {len(slower)} of {len(rows)} rows"
        + (f" ({', '.join(slower)})" if slower else "")
        + "."
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="4387eed")
    parser.add_argument("--models", default="digits-mobilenet,mobilenet_v2")
    parser.add_argument("--threads", default="1")
    args = parser.parse_args()
    log = lambda message: print(message, flush=True)  # noqa: E731
    tree = old_tree(args.commit)
    pools = [
        pool(tree, model, int(count), log)
        for model in args.models.split(",")
        for count in args.threads.split(",")
    ]
    write_json(HERE / "before_after.json", {"commit": args.commit, "pools": pools})
    write_markdown(HERE / "BEFORE_AFTER.md", markdown(args.commit, pools))
    print("wrote benchmarks/BEFORE_AFTER.md")


if __name__ == "__main__":
    main()
