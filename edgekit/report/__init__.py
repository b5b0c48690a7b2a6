"""``edgekit report``: report.md, report.html (plots embedded) and report.json from a run's
results.json alone, so a report can always be rebuilt. Reads result rows only: no runtime,
target, device or quantizer is imported here."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.common.fileio import write_bytes_atomic, write_json_atomic
from edgekit.report import page
from edgekit.report.bundles import golden_html, golden_markdown, golden_record
from edgekit.report.changes import prediction_change_section
from edgekit.report.content import Section, markdown_table, row_anchor, top3_text
from edgekit.report.decision import RANKED_COLUMNS, groups_chart, ranked_table
from edgekit.report.plots import plots
from edgekit.report.profiles import profile_section
from edgekit.report.recommend import Recommendation, measuring_line, pareto_front, recommend_each
from edgekit.report.tables import (
    COLUMNS,
    accuracy_aware_section,
    assumptions,
    machine_line,
    table_rows,
    unavailable,
)
from edgekit.report.tuning import tuning_section
from edgekit.results import Results, Row, load_results

__all__ = ["Report", "build_report", "load_results", "render_report"]


@dataclass
class ModelBlock:
    """One model's part of the report: its recommendation, its speed groups ranked, its rows'
    table, its Pareto front."""

    name: str
    advice: Recommendation
    table: list[list[str]]
    front: list[Row]
    row_ids: list[str]  # each table row's anchor in report.html (row_anchor of its label)
    ranked: list[list[str]]  # the recommended pool's artifacts, fastest group first
    measuring: str  # how that pool's measuring went and why it stopped
    golden: dict[str, Any] | None = None  # run --golden: its bundle, or why none (bundles.py)


def model_blocks(
    results: Results, table: list[list[str]], budget: float, *, point_estimate: bool
) -> list[ModelBlock]:
    """A block per model, in run order; a model's rows never compete with another's.
    ``table``: the results table (``table_rows``), each model's rows taken from it."""
    visible = [row for row in results.rows if row.status != "unavailable"]
    advice = recommend_each(results.rows, budget, point_estimate=point_estimate)
    blocks = []
    for name, recommendation in advice.items():
        mine = [row for row in results.rows if (row.model or "") == name]
        pairs = [
            (row, cells)
            for row, cells in zip(visible, table, strict=True)
            if (row.model or "") == name
        ]
        pool = [row for group in recommendation.ranked for row in group]
        blocks.append(
            ModelBlock(
                name,
                recommendation,
                [cells for _, cells in pairs],
                pareto_front(mine),
                [row_anchor(row.label) for row, _ in pairs],
                ranked_table(recommendation),
                measuring_line(recommendation.pool, pool),
                golden_record(results, name),
            )
        )
    return blocks


CROSS_COLUMNS = (
    "model",
    "data",
    "recommended",
    "p50 ms",
    "speed-up, this run",
    "drop (points)",
    "size",
)


def across_models(results: Results, blocks: list[ModelBlock]) -> list[list[str]]:
    """The cross-model summary: each model's recommended artifact and what it costs."""
    data = {
        info.get("name"): info.get("data", {}).get("spec", "")
        for info in results.run.get("models", [])
    }
    rows = []
    for block in blocks:
        best = block.advice.best
        if best is None:
            rows.append(
                [block.name, data.get(block.name, ""), block.advice.summary, "", "", "", ""]
            )
            continue
        speed = ""
        if best.speedup:
            low, high = best.speedup_ci or (best.speedup, best.speedup)
            speed = f"{best.speedup:.2f}x [{low:.2f}, {high:.2f}]"
        rows.append(
            [
                block.name,
                data.get(block.name, ""),
                best.label,
                f"{best.p50:.3f}",
                speed,
                f"{best.drop:+.2f} (<= {best.drop_high:+.2f})",
                f"{(best.size_bytes or 0) / 1024:.0f} KiB",
            ]
        )
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
        "interleaved in rounds, so the speed-up and every ratio compare the same moments, and "
        "in sessions (every side reopened in a new process between them); the brackets are 95% "
        "intervals from a model with both levels, rounds within sessions and sessions within "
        "sides, each level's variance measured. Speed groups test every pair of a pool at once "
        "(Tukey): members of a group cannot be told apart. Drop is baseline top-1 minus "
        "artifact top-1, with a paired bootstrap 95% interval.",
        "between runs: an interval covers this run's rounds and sessions, not how a shared "
        "machine drifts over the next quarter hour. benchmarks/reproduce.py measures whether "
        "separate runs on your machine agree within their intervals; "
        "benchmarks/REPRODUCIBILITY.md holds one machine's answer.",
    ]
    notes = sorted(
        {str(r.traits.get("note")) for r in results.rows if r.traits and not r.latency_comparable}
    )
    for note in notes:
        if note and note != "None":
            lines.append(f"rows marked '{note}': real numerics, latency never compared")
    return lines


@dataclass(frozen=True)
class ReportContent:
    """Everything a report shows, computed once; markdown, HTML and JSON render it."""

    title: str
    intro: list[str]
    budget: float
    blocks: list[ModelBlock]
    cross: list[list[str]]
    sections: list[Section]
    images: dict[str, Path]
    table: list[list[str]]  # every visible row's cells (table_rows)
    machine: dict[str, Any] | None = None  # the run's fingerprint

    @property
    def multi(self) -> bool:
        return len(self.blocks) > 1


@dataclass
class Report:
    """What rendering wrote, and each model's recommendation it holds."""

    files: dict[str, Path]  # md, html, json and each plot
    recommendations: dict[str, Recommendation]  # model -> its recommendation, in run order


def build_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.html, report.json and plots/ into ``run_dir``, from its
    results.json alone (checked as any file a user hands edgekit)."""
    run_dir = Path(run_dir)
    return render_report(load_results(run_dir), run_dir).files


def render_report(results: Results, run_dir: Path) -> Report:
    """The report of ``results`` (a run's, in memory: what its results.json holds) into
    ``run_dir``: the recommendations are computed here once, for the pages and the caller."""
    content = _content(results, run_dir)
    write_bytes_atomic(run_dir / "report.md", ("\n".join(_markdown(content)) + "\n").encode())
    write_bytes_atomic(run_dir / "report.html", _html(content).encode())
    write_json_atomic(run_dir / "report.json", _summary(content, results))
    files = {
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
        "json": run_dir / "report.json",
        **content.images,
    }
    return Report(files, {block.name: block.advice for block in content.blocks})


def _content(results: Results, run_dir: Path) -> ReportContent:
    run = results.run
    config = run.get("config", {})
    budget = config.get("max_drop", 1.0)
    table = table_rows(results)
    blocks = model_blocks(results, table, budget, point_estimate=bool(config.get("point_estimate")))
    sections = [
        accuracy_aware_section(results),
        prediction_change_section(results),
        tuning_section(results),
        profile_section(results),
        Section("What edgekit assumed about files it did not make", assumptions(results)),
        Section("Not available on this machine", unavailable(results)),
    ]
    images = plots(results, run_dir / "plots")
    chart = groups_chart(blocks[0].advice, run_dir / "plots" / "groups.png")
    if chart is not None:
        images = {"groups": chart, **images}
    return ReportContent(
        title=f"edgekit run {run['id']}",
        intro=_intro(results),
        budget=budget,
        blocks=blocks,
        cross=across_models(results, blocks) if len(blocks) > 1 else [],
        sections=sections,
        images=images,
        table=table,
        machine=run.get("machine") or {},
    )


def _markdown(content: ReportContent) -> list[str]:
    md = [f"# {content.title}", "", *[f"- {line}" for line in content.intro], ""]
    if content.multi:
        md += ["## Across models", "", *markdown_table(CROSS_COLUMNS, content.cross), ""]
    level = "###" if content.multi else "##"
    for block in content.blocks:
        if content.multi:
            md += [f"## {block.name}", ""]
        md += [
            f"{level} Recommendation",
            "",
            f"**{block.advice.summary}** (budget: {content.budget:g} points)",
            "",
        ]
        md += [golden_markdown(block.golden), ""] if block.golden else []
        if block.ranked:
            md += [f"{level} Speed groups", "", *markdown_table(RANKED_COLUMNS, block.ranked), ""]
            md += [block.measuring, ""] if block.measuring else []
        md += [f"- {label}: {why}" for label, why in block.advice.reasons]
        md += ["", f"{level} Results", "", *markdown_table(COLUMNS, block.table), ""]
        md += ["Pareto front (latency against drop): " + ", ".join(r.label for r in block.front)]
        md += [""]
    for section in content.sections:
        if section:
            md += [f"## {section.heading}", "", *_markdown_section(section)]
    md += [f"![{name}](plots/{path.name})" for name, path in content.images.items()]
    return md


def _summary(content: ReportContent, results: Results) -> dict[str, Any]:
    run = results.run
    first = content.blocks[0]
    summary: dict[str, Any] = {
        "run": run["id"],
        "machine": run.get("machine"),
        "recommendation": None if first.advice.best is None else first.advice.best.label,
        "recommendation_summary": first.advice.summary,
        "tie_break": first.advice.tie_break,
        "speed_groups": first.advice.groups,
        "versus": first.advice.versus,
        "measuring": first.measuring,
        "reasons": [{"row": label, "why": why} for label, why in first.advice.reasons],
        "pareto_front": [r.label for r in first.front],
        "not_available": unavailable(results),
        "table": {"columns": list(COLUMNS), "rows": content.table},
        "models": [
            {
                "model": block.name,
                "recommendation": None if block.advice.best is None else block.advice.best.label,
                "recommendation_summary": block.advice.summary,
                "pareto_front": [r.label for r in block.front],
                "golden": block.golden,
            }
            for block in content.blocks
        ],
    }
    if content.multi:
        summary["across_models"] = {"columns": list(CROSS_COLUMNS), "rows": content.cross}
    return summary


def _html(content: ReportContent) -> str:
    blocks, multi = content.blocks, content.multi
    level = "h3" if multi else "h2"
    intro = "".join(f"<li>{html.escape(line)}</li>" for line in content.intro)
    # the first screen: the decision (the recommendation, the groups' chart, the ranked table);
    # how it was measured opens on a click
    first = blocks[0]
    parts = [
        f"<h1>{html.escape(content.title)}</h1>",
        page.headline_cards(first.advice),
        page.decision(content.images.get("groups"), RANKED_COLUMNS, first.ranked, first.measuring),
        '<details class="how"><summary>How this was measured: machine, protocol, notes'
        f"</summary>{page.machine_card(content.machine or {})}<ul>{intro}</ul></details>",
    ]
    if multi:
        parts.append(f"<h2>Across models</h2>{page.table(CROSS_COLUMNS, content.cross)}")
    for index, block in enumerate(blocks):
        # each row the budget or a tie ruled out links to its row of the results table
        reasons = "".join(
            f'<li class="failed-gate"><a href="#{row_anchor(label)}">{html.escape(label)}</a>: '
            f"{html.escape(why)}</li>"
            for label, why in block.advice.reasons
        )
        parts.append(
            (f"<h2>{html.escape(block.name)}</h2>" if multi else "")
            + f"<{level}>Recommendation</{level}><p><b>{html.escape(block.advice.summary)}</b> "
            f"(budget: {content.budget:g} points)</p>"
            + (golden_html(block.golden) if block.golden else "")
            + f"<ul>{reasons}</ul>"
            f"<{level}>Results</{level}>"
            + page.table(COLUMNS, block.table, f"results-{index}", block.row_ids)
        )
    for section in content.sections:
        if section:
            parts.append(f"<h2>{html.escape(section.heading)}</h2>{_html_section(section)}")
    others = {name: path for name, path in content.images.items() if name != "groups"}
    parts.append(f"<h2>Plots</h2>{page.figures(others)}")
    return page.page(content.title, "".join(parts))


def _markdown_section(section: Section) -> list[str]:
    lines = [f"- {line}" if not line.startswith("  ") else line for line in section.lines]
    for table in section.tables:
        lines += ["", *([f"{table.caption}", ""] if table.caption else [])]
        lines += markdown_table(table.columns, table.rows)
    if section.after:
        lines.append("")
        lines += [f"- {line}" if not line.startswith("  ") else line for line in section.after]
    for where, images in section.gallery.items():
        lines += ["", f"Flipped images of {where} (the first {len(images)}):", ""]
        lines += markdown_table(
            ("image", "true class", "change", "source top-3", "artifact top-3"),
            [
                [
                    str(i["index"]),
                    i["label"],
                    i["way"],
                    top3_text(i["source_top3"]),
                    top3_text(i["artifact_top3"]),
                ]
                for i in images
            ],
        )
    return [*lines, ""]


def _html_section(section: Section) -> str:
    def listed(lines: list[str]) -> str:
        items, inner = [], []
        for line in lines:  # "  - " lines are sub-items of the line before
            if line.startswith("  ") and items:
                inner.append(f"<li>{html.escape(line.strip().removeprefix('- '))}</li>")
                continue
            if inner:
                items[-1] += f"<ul>{''.join(inner)}</ul>"
                inner = []
            items.append(html.escape(line))
        if inner:
            items[-1] += f"<ul>{''.join(inner)}</ul>"
        return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>" if items else ""

    parts = [listed(section.lines)]
    parts += [page.captioned_table(table) for table in section.tables]
    parts.append(listed(section.after))
    parts += [page.gallery(where, images) for where, images in section.gallery.items()]
    return "".join(parts)
