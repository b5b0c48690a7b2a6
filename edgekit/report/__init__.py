"""``edgekit report``: report.md, report.html (plots embedded) and report.json from a run's
results.json alone, so a report can always be rebuilt. Reads result rows only: no runtime,
target, device or quantizer is imported here."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.fileio import write_bytes_atomic, write_json_atomic
from edgekit.report.plots import plots
from edgekit.report.profiles import profile_lines
from edgekit.report.recommend import Recommendation, pareto_front, recommend_each
from edgekit.report.tables import (
    COLUMNS,
    accuracy_aware_lines,
    assumptions,
    machine_line,
    table_rows,
    unavailable,
)
from edgekit.results import Results, Row, load_results

__all__ = ["build_report", "load_results"]


@dataclass
class ModelBlock:
    """One model's part of the report: its recommendation, its rows' table, its Pareto front."""

    name: str
    advice: Recommendation
    table: list[list[str]]
    front: list[Row]


def model_blocks(results: Results, budget: float, point_estimate: bool) -> list[ModelBlock]:
    """A block per model, in run order; a model's rows never compete with another's."""
    table = table_rows(results)
    visible = [row for row in results.rows if row.status != "unavailable"]
    advice = recommend_each(results.rows, budget, point_estimate)
    blocks = []
    for name, recommendation in advice.items():
        mine = [row for row in results.rows if (row.model or "") == name]
        cells = [cells for row, cells in zip(visible, table, strict=True)
                 if (row.model or "") == name]  # fmt: skip
        blocks.append(ModelBlock(name, recommendation, cells, pareto_front(mine)))
    return blocks


CROSS_COLUMNS = ("model", "data", "recommended", "p50 ms", "speed-up", "drop (points)", "size")


def across_models(results: Results, blocks: list[ModelBlock]) -> list[list[str]]:
    """The cross-model summary: each model's recommended artifact and what it costs."""
    data = {info.get("name"): info.get("data", {}).get("spec", "") for info in
            results.run.get("models", [])}  # fmt: skip
    rows = []
    for block in blocks:
        best = block.advice.best
        if best is None:
            rows.append([block.name, data.get(block.name, ""), block.advice.summary, "", "", "",
                         ""])  # fmt: skip
            continue
        speed = ""
        if best.speedup:
            low, high = best.speedup_ci or (best.speedup, best.speedup)
            speed = f"{best.speedup:.2f}x [{low:.2f}, {high:.2f}]"
        rows.append([block.name, data.get(block.name, ""), best.label, f"{best.p50:.3f}", speed,
                     f"{best.drop:+.2f} (<= {best.drop_high:+.2f})",
                     f"{(best.size_bytes or 0) / 1024:.0f} KiB"])  # fmt: skip
    return rows


def _intro(results: Results) -> list[str]:
    run = results.run
    models = run.get("models") or []
    if len(models) > 1:
        described = "; ".join(
            f"{info['spec']} (weights {info['digest'][:12]}, data {info['data']['spec']}, "
            f"{info['data']['evaluation_samples']} evaluation images)"
            for info in models
        )
        first = f"models: {described}"
    else:
        first = (
            f"model: {run['model']['spec']} (weights {run['model']['digest'][:12]}), data: "
            f"{run['data']['spec']} ({run['data']['evaluation_samples']} evaluation images)"
        )
    lines = [
        first,
        f"machine: {machine_line(run)}. Every latency here is this machine's; another machine's "
        "figures for the same artifacts differ (the fingerprint says which machine).",
        "latency: p50/p90 of single timed invokes on a pre-staged input. On each device all "
        "artifacts and the baseline (the source model in its own framework, fp32) ran "
        "interleaved in rounds, so the speed-up and every ratio compare the same moments; the "
        "brackets are 95% intervals over the paired rounds, widened by the noise band (how far "
        "a second session of one file landed); with --sessions N, every side was reopened "
        "between N sessions and they are prediction intervals over the sessions. An artifact "
        "counts as faster only when that interval excludes 1. Drop is baseline top-1 minus "
        "artifact top-1, with a paired bootstrap 95% interval.",
        "between runs: an interval covers this run's rounds and sessions. On a shared VM "
        "(benchmarks/REPRODUCIBILITY.md, an Intel Xeon VM) with sessions spread 120 s apart "
        "(--sessions 6 --session-gap 120), int8 and fp16 over their fp32 held the next runs' "
        "estimates 15 minutes later, while speed-ups over the baseline did not (the baseline's "
        "framework drifts on its own): read a speed-up as this run's, and compare artifacts "
        "with each other across runs. benchmarks/reproduce.py measures your machine.",
    ]
    notes = sorted(
        {str(r.traits.get("note")) for r in results.rows if r.traits and not r.latency_comparable}
    )
    for note in notes:
        if note and note != "None":
            lines.append(f"rows marked '{note}': real numerics, latency never compared")
    return lines


def _markdown_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    body = ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return lines + body


def build_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.html, report.json and plots/ into ``run_dir``."""
    run_dir = Path(run_dir)
    results = load_results(run_dir)
    run = results.run
    config = run.get("config", {})
    budget = config.get("max_drop", 1.0)
    blocks = model_blocks(results, budget, bool(config.get("point_estimate")))
    multi = len(blocks) > 1
    cross = across_models(results, blocks) if multi else []
    images = plots(results, run_dir / "plots")
    title = f"edgekit run {run['id']}"
    intro = _intro(results)
    aware = accuracy_aware_lines(results)
    missing = unavailable(results)
    sections = [
        ("Where the time goes", profile_lines(results)),
        ("What edgekit assumed about files it did not make", assumptions(results)),
        ("Not available on this machine", missing),
    ]
    md = [f"# {title}", "", *[f"- {line}" for line in intro], ""]
    if multi:
        md += ["## Across models", "", *_markdown_table(CROSS_COLUMNS, cross), ""]
    level = "###" if multi else "##"
    for block in blocks:
        if multi:
            md += [f"## {block.name}", ""]
        md += [f"{level} Recommendation", "", f"**{block.advice.summary}** (budget: {budget:g} "
               "points)", ""]  # fmt: skip
        md += [f"- {label}: {why}" for label, why in block.advice.reasons]
        md += ["", f"{level} Results", "", *_markdown_table(COLUMNS, block.table), ""]
        md += ["Pareto front (latency against drop): " + ", ".join(r.label for r in block.front)]
        md += [""]
    if aware:
        md += ["## Accuracy-aware int8", "", *aware, ""]
    for heading, lines in sections:
        if lines:
            listed = lines if heading == "Where the time goes" else [f"- {x}" for x in lines]
            md += [f"## {heading}", "", *listed, ""]
    md += [f"![{name}](plots/{path.name})" for name, path in images.items()]
    write_bytes_atomic(run_dir / "report.md", ("\n".join(md) + "\n").encode())
    page = _html(title, intro, budget, blocks, cross, aware, sections, images)
    write_bytes_atomic(run_dir / "report.html", page.encode())
    first = blocks[0]
    summary: dict[str, Any] = {
        "run": run["id"],
        "machine": run.get("machine"),
        "recommendation": None if first.advice.best is None else first.advice.best.label,
        "recommendation_summary": first.advice.summary,
        "tie_break": first.advice.tie_break,
        "reasons": [{"row": label, "why": why} for label, why in first.advice.reasons],
        "pareto_front": [r.label for r in first.front],
        "not_available": missing,
        "table": {"columns": list(COLUMNS), "rows": table_rows(results)},
        "models": [
            {
                "model": block.name,
                "recommendation": None if block.advice.best is None else block.advice.best.label,
                "recommendation_summary": block.advice.summary,
                "pareto_front": [r.label for r in block.front],
            }
            for block in blocks
        ],
    }
    if multi:
        summary["across_models"] = {"columns": list(CROSS_COLUMNS), "rows": cross}
    write_json_atomic(run_dir / "report.json", summary)
    return {
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
        "json": run_dir / "report.json",
        **images,
    }


def _html_table(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _html(
    title: str,
    intro: list[str],
    budget: float,
    blocks: list[ModelBlock],
    cross: list[list[str]],
    aware: list[str],
    sections: list[tuple[str, list[str]]],
    images: dict[str, Path],
) -> str:
    figures = "".join(
        f'<figure><img alt="{name}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{name}</figcaption></figure>'
        for name, path in images.items()
    )
    multi = len(blocks) > 1
    level = "h3" if multi else "h2"
    parts = [f"<h2>Across models</h2>{_html_table(CROSS_COLUMNS, cross)}"] if multi else []
    for block in blocks:
        reasons = "".join(
            f"<li>{html.escape(label)}: {html.escape(why)}</li>"
            for label, why in block.advice.reasons
        )
        parts.append(
            (f"<h2>{html.escape(block.name)}</h2>" if multi else "")
            + f"<{level}>Recommendation</{level}><p><b>{html.escape(block.advice.summary)}</b> "
            f"(budget: {budget:g} points)</p><ul>{reasons}</ul>"
            f"<{level}>Results</{level}>{_html_table(COLUMNS, block.table)}"
        )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in intro)
    aware_html = (
        "<h2>Accuracy-aware int8</h2><pre>" + html.escape("\n".join(aware)) + "</pre>"
        if aware
        else ""
    )
    missing_html = "".join(
        f"<h2>{html.escape(heading)}</h2>"
        + (
            "<pre>" + html.escape("\n".join(lines)) + "</pre>"  # a markdown table and list
            if heading == "Where the time goes"
            else "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"
        )
        for heading, lines in sections
        if lines
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px}}th{{background:#eee}}img{{max-width:900px}}</style>
</head><body><h1>{html.escape(title)}</h1><ul>{items}</ul>
{"".join(parts)}{aware_html}{missing_html}
<h2>Plots</h2>{figures}</body></html>"""
