"""report.html: one offline file, everything inline (styles, script, plots as data URLs), no
CDN and no server. Headline cards (the recommendation boxed with its reason, its speed-up and
drop with their intervals, the machine), a results table that sorts by any column and filters
by text, and a figure whose interval excludes its null (0 for a drop, 1 for a ratio) coloured:
green when it is better, red when worse. report.md stays the plain-text twin."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.report.content import Table

if TYPE_CHECKING:
    from edgekit.report.recommend import Recommendation

# "1.23x [0.98, 1.50]" or "+0.22 [+0.00, +0.56]": a figure and its interval, as tables.py
# writes them
INTERVAL = re.compile(r"^\s*([+-]?[\d.]+)(x?)\s*\[([+-]?[\d.]+),\s*([+-]?[\d.]+)\]")
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1400px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:1em 0}
.card{border:1px solid #ccd;border-radius:8px;padding:10px 14px;min-width:180px;background:#fafbff}
.card .label{font-size:12px;color:#666;text-transform:uppercase;letter-spacing:.04em}
.card .figure{font-size:1.5em;font-weight:600;margin:4px 0}.card .sub{font-size:12px;color:#555}
.card.recommendation{border:2px solid #3b5bdb;flex:2 1 380px;background:#f1f4ff}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#eee;cursor:pointer;position:sticky;top:0}th.sorted-asc::after{content:" \\25B2"}
th.sorted-desc::after{content:" \\25BC"}td.better{background:#e3f7e6}td.worse{background:#fde4e4}
input.filter{margin:.4em 0;padding:4px 8px;width:320px}figure{margin:1em 0}
img{max-width:100%}figcaption{font-size:12px;color:#555}
.failed{color:#b00020;font-weight:600}li.failed-gate a{color:#b00020}
td{position:relative}.bar{position:absolute;left:0;top:2px;bottom:2px;background:#dbe4ff;z-index:0}
.bar-text{position:relative;z-index:1}tr:target{outline:2px solid #3b5bdb}
.gallery{display:flex;flex-wrap:wrap;gap:10px}.gallery figure.flip{margin:0;width:170px;
border:1px solid #ddd;border-radius:6px;padding:6px;font-size:12px}
.gallery img{width:64px;image-rendering:pixelated;display:block;margin:0 auto 4px}
.top3{display:flex;gap:8px;justify-content:space-between;margin-top:4px}
.decision{display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap}
.decision img{max-width:640px;flex:0 1 640px}#ranked{flex:1 1 480px}#ranked table{font-size:12px}
.measuring{font-size:12px;color:#555}details.how{margin:1em 0}details.how summary{cursor:pointer}
details.notes summary{cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;
max-width:28em}
"""
# a click on a header sorts by that column (numbers as numbers), again reverses; the filter box
# hides rows without its text
SCRIPT = """
function cellValue(row, index) {
  const text = row.cells[index].textContent.trim();
  const number = parseFloat(text.replace(/^[+]/, ""));
  return isNaN(number) ? text.toLowerCase() : number;
}
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (header, index) {
    header.addEventListener("click", function () {
      const ascending = !header.classList.contains("sorted-asc");
      table.querySelectorAll("th").forEach(function (h) {
        h.classList.remove("sorted-asc", "sorted-desc");
      });
      header.classList.add(ascending ? "sorted-asc" : "sorted-desc");
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort(function (a, b) {
        const x = cellValue(a, index), y = cellValue(b, index);
        const order = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0)
                                              : (typeof x === "number" ? -1 : 1);
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
document.querySelectorAll("input.filter").forEach(function (box) {
  const table = document.getElementById(box.dataset.table);
  box.addEventListener("input", function () {
    const wanted = box.value.toLowerCase();
    Array.from(table.tBodies[0].rows).forEach(function (row) {
      row.hidden = wanted && !row.textContent.toLowerCase().includes(wanted);
    });
  });
});
"""
# columns where a larger figure is better (the rest: a larger one is worse, as a drop)
LARGER_IS_BETTER = ("speed-up", "vs its fp32")


def significance(column: str, cell: str) -> str:
    """``better``, ``worse`` or "" for a table cell: coloured only when the interval excludes
    the null (1 for a ratio ``...x [lo, hi]``, 0 for a difference)."""
    found = INTERVAL.match(cell)
    if not found:
        return ""
    low, high = float(found.group(3)), float(found.group(4))
    null = 1.0 if found.group(2) == "x" else 0.0
    if low <= null <= high:
        return ""
    above = low > null
    larger_better = column.startswith(LARGER_IS_BETTER)
    return "better" if above == larger_better else "worse"


def _cell(column: str, cell: str, bar: float | None) -> str:
    shade = significance(column, cell)
    kind = f' class="{shade}"' if shade else ""
    if column == "notes" and "; " in cell:  # one line; the rest opens on a click
        first, rest = cell.split("; ", 1)
        return (
            f'<td{kind}><details class="notes"><summary>{html.escape(first)} (+'
            f"{rest.count('; ') + 1})</summary>{html.escape(rest)}</details></td>"
        )
    if bar is None:
        return f"<td{kind}>{html.escape(cell)}</td>"
    width = max(0.0, min(1.0, bar)) * 100
    return (
        f'<td{kind}><div class="bar" style="width:{width:.1f}%"></div>'
        f'<span class="bar-text">{html.escape(cell)}</span></td>'
    )


def table(
    columns: tuple[str, ...],
    rows: list[list[str]],
    table_id: str | None = None,
    row_ids: list[str] | None = None,
    bars: list[list[float | None]] | None = None,
) -> str:
    """A sortable table; with ``table_id``, a filter box above it; ``row_ids`` give rows an
    id to link to, ``bars`` a share (0-1) drawn behind each cell that has one."""
    head = "".join(f"<th>{html.escape(column)}</th>" for column in columns)
    body = "".join(
        (f'<tr id="{html.escape(row_ids[index])}">' if row_ids else "<tr>")
        + "".join(
            _cell(column, cell, bars[index][place] if bars else None)
            for place, (column, cell) in enumerate(zip(columns, row, strict=False))
        )
        + "</tr>"
        for index, row in enumerate(rows)
    )
    filter_box = (
        f'<input class="filter" type="search" data-table="{table_id}" '
        f'placeholder="filter rows (a target, a recipe, a device...)">'
        if table_id
        else ""
    )
    ident = f' id="{table_id}"' if table_id else ""
    return (
        f'{filter_box}<table class="sortable"{ident}><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def captioned_table(content: Table) -> str:
    caption = f"<p>{html.escape(content.caption)}</p>" if content.caption else ""
    return caption + table(content.columns, content.rows, None, content.row_ids, content.bars)


def gallery(where: str, images: list[dict[str, Any]]) -> str:
    """The flipped images of one artifact as thumbnails, each with its true class and both
    sides' top-3."""

    def top3(entries: list[list[Any]]) -> str:
        return "<br>".join(f"{html.escape(str(name))} {100 * p:.0f}%" for name, p in entries)

    tiles = "".join(
        f'<figure class="flip"><img alt="image {image["index"]}" '
        f'src="data:image/png;base64,{image["png"]}"><figcaption>#{image["index"]}, true '
        f'{html.escape(image["label"])}, {html.escape(image["way"])}<div class="top3">'
        f"<div><b>source</b><br>{top3(image['source_top3'])}</div>"
        f"<div><b>artifact</b><br>{top3(image['artifact_top3'])}</div></div></figcaption>"
        "</figure>"
        for image in images
    )
    return (
        f"<h3>Flipped images of {html.escape(where)}</h3>"
        f'<div class="gallery" data-artifact="{html.escape(where)}">{tiles}</div>'
    )


def card(label: str, figure: str, sub: str = "", kind: str = "") -> str:
    return (
        f'<div class="card {kind}"><div class="label">{html.escape(label)}</div>'
        f'<div class="figure">{html.escape(figure)}</div>'
        f'<div class="sub">{html.escape(sub)}</div></div>'
    )


def headline_cards(advice: Recommendation) -> str:
    """The recommendation boxed with its reason, its speed-up and drop with intervals."""
    best = advice.best
    cards = [
        card("recommendation", best.label if best else "none", advice.summary, "recommendation")
    ]
    if best is not None and best.speedup is not None:
        low, high = best.speedup_ci
        cards.append(
            card(
                "speed-up over the baseline",
                f"{best.speedup:.2f}x",
                f"95% CI [{low:.2f}, {high:.2f}], interleaved in this run",
            )
        )
    if best is not None and best.drop is not None:
        low, high = best.accuracy.drop_ci
        cards.append(
            card("top-1 drop", f"{best.drop:+.2f} points", f"95% CI [{low:+.2f}, {high:+.2f}]")
        )
    return f'<div class="cards">{"".join(cards)}</div>'


def machine_card(machine: dict[str, Any]) -> str:
    """The machine that measured (a run's fingerprint)."""
    where = (
        f"{machine.get('logical_cores', '?')} logical cores, {machine.get('arch', '?')}"
        f"{', VM (' + machine['hypervisor'] + ')' if machine.get('hypervisor') else ''}, "
        f"fingerprint {machine.get('id', '?')}"
    )
    return card("machine", str(machine.get("cpu_model", "unknown CPU")), where, "machine")


def decision(
    chart: Path | None, columns: tuple[str, ...], ranked: list[list[str]], measuring: str
) -> str:
    """The speed groups' chart beside the ranked table, and how the measuring stopped."""
    if not ranked:
        return ""
    image = ""
    if chart is not None:
        data = base64.b64encode(chart.read_bytes()).decode()
        image = f'<img id="groups-chart" alt="speed groups" src="data:image/png;base64,{data}">'
    note = f'<p class="measuring">{html.escape(measuring)}</p>' if measuring else ""
    return (
        f'<div class="decision">{image}<div id="ranked">{table(columns, ranked)}{note}</div></div>'
    )


def figures(images: dict[str, Path]) -> str:
    return "".join(
        f'<figure id="plot-{name}"><img alt="{name}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{name}</figcaption></figure>'
        for name, path in images.items()
    )


def page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(title)}</title><style>{STYLE}</style></head><body>{body}"
        f"<script>{SCRIPT}</script></body></html>"
    )
