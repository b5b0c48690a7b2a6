"""The coverage page, from benchmarks/coverage.json: one row per architecture, one cell per
target x recipe, and each failure in one line (the record is written by benchmarks/coverage.py)."""

from __future__ import annotations

import re

from common import header

TARGETS = ("tflite", "executorch", "onnx")
RECIPES = ("fp32", "int8")
DATA = "synthetic:64"
# what export says of a cell it could not validate against a degenerate source
DEGENERATE = re.compile(r"is degenerate|validation failed")


def settled(row: dict) -> dict:
    """A failed cell of a degenerate source is the source's state, whatever the search found."""
    for cell in row.get("cells", {}).values():
        degenerate = row["source"]["degenerate"] and DEGENERATE.search(cell.get("why") or "")
        if cell["verdict"] == "failed" and degenerate:
            cell["verdict"] = "degenerate"
    return row


def _commits(rows: dict) -> list[str]:
    """One line naming the edgekit commit that made each row, where the rows were not all made
    by one."""
    made: dict[str, list[str]] = {}
    for name, row in rows.items():
        if row["built"]:
            made.setdefault(
                row.get("edgekit", "not recorded (swept before rows named it)"), []
            ).append(name)
    if len(made) < 2:
        return [f"- edgekit commit of every row: {next(iter(made))}"] if made else []
    return [
        "- edgekit commit of each row: "
        + "; ".join(
            f"{commit}: {', '.join(sorted(names))}" for commit, names in sorted(made.items())
        )
    ]


def _cell_text(cell: dict) -> str:
    if cell["verdict"] == "exported":
        return f"ok {cell['sqnr_db']:.0f} dB"
    if cell["verdict"] == "degenerate":
        return "degenerate source"
    found = cell.get("culprit") or {}
    if found.get("weakest"):
        return f"{found['class']} building up; most in `{found['weakest']['path']}`"
    if found.get("path") is not None:
        op = f" `{found['op']}`" if found.get("op") else ""
        return f"{found['class']} in `{found['path'] or '<model>'}`{op}"
    if found and found.get("class") is None:
        return "failed; not reproduced by the search"
    return f"failed ({found.get('class') or 'unsearched'})"


SITE_PACKAGES = re.compile(r"/\S*?/site-packages/")


def page(record: dict) -> list[str]:
    """The table; a library's file is named from site-packages/, not this machine's paths."""
    return [SITE_PACKAGES.sub("site-packages/", line) for line in _page(record)]


def _page(record: dict) -> list[str]:
    rows = {name: settled(row) for name, row in record["rows"].items()}
    columns = [f"{t}/{r}" for t in TARGETS for r in RECIPES]
    counts: dict[str, int] = {}
    for row in rows.values():
        for cell in row.get("cells", {}).values():
            found = (cell.get("culprit") or {}) if cell["verdict"] == "failed" else {}
            key = cell["verdict"]
            if found.get("weakest"):
                key = "failed, no block alone (where most of the error enters named)"
            elif found.get("path") is not None:
                key = "failed, culprit named"
            counts[key] = counts.get(key, 0) + 1
    lines = header(
        "Coverage: transformers' image classifiers through three targets",
        "benchmarks/coverage.py",
        [
            f"- transformers {record['transformers']}; every architecture built from a small config "
            "with random weights (benchmarks/small_configs.py), exported as a user does it "
            f"(`edgekit export --model FOLDER --recipe fp32,int8 --data {DATA}`); each failed cell "
            "searched with `edgekit culprit`.",
            "- cells: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())),
            *_commits(rows),
            *(
                [
                    f"- not swept (a sweep stopped before them; `--only` adds them): "
                    f"{', '.join(record['not_swept'])}"
                ]
                if record.get("not_swept")
                else []
            ),
        ],
        facts=record["machine"],
        written=record["written"],
    )
    lines += ["| architecture | model class | " + " | ".join(columns) + " |",
              "| --- | --- | " + " | ".join("---" for _ in columns) + " |"]  # fmt: skip
    for name, row in sorted(rows.items()):
        if not row["built"]:
            said = row.get("edgekit_says")
            said = f"; edgekit export: exit {said['exit']}, {said['said'][:160]}" if said else ""
            lines.append(
                f"| {name} | not built: {row['why'][:80]}{said} | "
                + " | ".join("" for _ in columns)
                + " |"
            )
            continue
        texts = [_cell_text(row["cells"][c]) for c in columns]
        lines.append(f"| {name} | {row['source']['class']} | " + " | ".join(texts) + " |")
    lines += ["", "## Each failure in one line", ""]
    for name, row in sorted(rows.items()):
        for column, cell in row.get("cells", {}).items():
            if cell["verdict"] != "failed":
                continue
            found = cell.get("culprit") or {}
            where = (f"{found['class']} in `{found['path'] or '<model>'}` ({found['kind']}), op "
                     f"{found.get('op') or 'not named'}; belongs to {found['upstream']}"
                     if found.get("path") is not None else found.get("message", ""))  # fmt: skip
            if found.get("weakest"):
                weakest = found["weakest"]
                where += (f"; {found['message']}; no block fails alone, the lowest SQNR alone is "
                          f"`{weakest['path']}` ({weakest['kind']}, {weakest['sqnr_db']:.1f} dB)")  # fmt: skip
            if found.get("searched"):
                searched = found["searched"]
                where += (
                    f" (searched again on {searched['written']}, {searched['machine']}; "
                    f"fingerprint `{searched['fingerprint']}`)"
                )
            again = found.get("export_here")
            if again and again["exit"] == 0:
                where += (
                    f"; exported again on that machine it passes (SQNR {again['sqnr_db']:.1f} "
                    f"dB, top-1 agreement {again['agreement']:.3f}): the refusal below was made "
                    "on the sweep's machine and is not reproduced on this one"
                )
            elif again:
                where += f"; exported again on that machine it fails: {again['why'][:200]}"
            lines.append(f"- **{name} {column}** (export exit {cell['exit']}): {where}. "
                         f"Export said: {cell['why'][:300]}")  # fmt: skip
    return lines
