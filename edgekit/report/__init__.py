"""``edgekit report``: report.md, report.html (plots embedded) and report.json from a run's
results.json alone, so a report can always be rebuilt. Reads result rows only: no runtime,
target, device or quantizer is imported here."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from edgekit.fileio import write_bytes_atomic, write_json_atomic
from edgekit.report.plots import plots
from edgekit.report.recommend import pareto_front, recommend
from edgekit.report.tables import (
    COLUMNS,
    accuracy_aware_lines,
    machine_line,
    table_rows,
    unavailable,
)
from edgekit.results import Results, load_results

__all__ = ["build_report", "load_results"]


def _intro(results: Results) -> list[str]:
    run = results.run
    lines = [
        f"model: {run['model']['spec']} (weights {run['model']['digest'][:12]}), data: "
        f"{run['data']['spec']} ({run['data']['evaluation_samples']} evaluation images)",
        f"machine: {machine_line(run)}. Every latency here is this machine's; another machine's "
        "figures for the same artifacts differ (the fingerprint says which machine).",
        "latency: p50/p90 of single timed invokes on a pre-staged input. On each device all "
        "artifacts and the baseline (the source model in its own framework, fp32) ran "
        "interleaved in rounds, so the speed-up and every ratio compare the same moments; the "
        "brackets are 95% intervals from the paired rounds. An artifact counts as faster only "
        "when that interval excludes 1. Drop is baseline top-1 minus artifact top-1, with a "
        "paired bootstrap 95% interval.",
    ]
    notes = sorted(
        {str(r.traits.get("note")) for r in results.rows if r.traits and not r.latency_comparable}
    )
    for note in notes:
        if note and note != "None":
            lines.append(f"rows marked '{note}': real numerics, latency never compared")
    return lines


def build_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.html, report.json and plots/ into ``run_dir``."""
    run_dir = Path(run_dir)
    results = load_results(run_dir)
    run = results.run
    config = run.get("config", {})
    budget = config.get("max_drop", 1.0)
    advice = recommend(results.rows, budget, bool(config.get("point_estimate")))
    front = pareto_front(results.rows)
    images = plots(results, run_dir / "plots")
    rows = table_rows(results)
    title = f"edgekit run {run['id']}"
    intro = _intro(results)
    aware = accuracy_aware_lines(results)
    missing = unavailable(results)
    md = [f"# {title}", "", *[f"- {line}" for line in intro], "", "## Recommendation", ""]
    md += [f"**{advice.summary}** (budget: {budget:g} points)", ""]
    md += [f"- {label}: {why}" for label, why in advice.reasons]
    md += ["", "## Results", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    md += ["", "Pareto front (latency against drop): " + ", ".join(r.label for r in front), ""]
    if aware:
        md += ["## Accuracy-aware int8", "", *aware, ""]
    if missing:
        md += ["## Not available on this machine", "", *[f"- {line}" for line in missing], ""]
    md += [f"![{name}](plots/{path.name})" for name, path in images.items()]
    write_bytes_atomic(run_dir / "report.md", ("\n".join(md) + "\n").encode())
    page = _html(title, intro, advice, budget, rows, aware, missing, images)
    write_bytes_atomic(run_dir / "report.html", page.encode())
    summary: dict[str, Any] = {
        "run": run["id"],
        "machine": run.get("machine"),
        "recommendation": None if advice.best is None else advice.best.label,
        "recommendation_summary": advice.summary,
        "tie_break": advice.tie_break,
        "reasons": [{"row": label, "why": why} for label, why in advice.reasons],
        "pareto_front": [r.label for r in front],
        "not_available": missing,
        "table": {"columns": list(COLUMNS), "rows": rows},
    }
    write_json_atomic(run_dir / "report.json", summary)
    return {
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
        "json": run_dir / "report.json",
        **images,
    }


def _html(
    title: str,
    intro: list[str],
    advice: Any,
    budget: float,
    rows: list[list[str]],
    aware: list[str],
    missing: list[str],
    images: dict[str, Path],
) -> str:
    cells = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    figures = "".join(
        f'<figure><img alt="{name}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{name}</figcaption></figure>'
        for name, path in images.items()
    )
    reasons = "".join(
        f"<li>{html.escape(label)}: {html.escape(why)}</li>" for label, why in advice.reasons
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in intro)
    aware_html = (
        "<h2>Accuracy-aware int8</h2><pre>" + html.escape("\n".join(aware)) + "</pre>"
        if aware
        else ""
    )
    missing_html = (
        "<h2>Not available on this machine</h2><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in missing)
        + "</ul>"
        if missing
        else ""
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px}}th{{background:#eee}}img{{max-width:900px}}</style>
</head><body><h1>{html.escape(title)}</h1><ul>{items}</ul>
<h2>Recommendation</h2><p><b>{html.escape(advice.summary)}</b> (budget: {budget:g} points)</p>
<ul>{reasons}</ul><h2>Results</h2><table><tr>{cells}</tr>{body}</table>{aware_html}{missing_html}
<h2>Plots</h2>{figures}</body></html>"""
