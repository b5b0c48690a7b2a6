"""What a report section holds, for markdown and HTML alike: lines, tables (with optional
bars behind their cells) and a gallery of flipped images. report.md renders tables as pipe
tables and the gallery as text; report.html as sortable tables, bars and thumbnails."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Table:
    """``rows`` of cells under ``columns``. ``bars``, where given, holds for each row a share
    (0-1) per cell or None: report.html draws it as a bar behind the cell. ``row_ids`` names
    each row for links (``#id``)."""

    columns: tuple[str, ...]
    rows: list[list[str]]
    caption: str = ""
    bars: list[list[float | None]] | None = None
    row_ids: list[str] | None = None


@dataclass(frozen=True)
class Section:
    """A closing section of the report: lines before its tables, its tables, lines after, and
    (What quantization changed) each artifact's flipped images."""

    heading: str
    lines: list[str]
    tables: list[Table] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    gallery: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.lines or self.tables or self.after or self.gallery)


def markdown_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    body = ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return lines + body


def row_anchor(label: str) -> str:
    """A row's id in report.html: its label with everything but letters and digits as '-'."""
    return "row-" + "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")


def top3_text(entries: list[list[Any]]) -> str:
    return ", ".join(f"{name} {100 * p:.0f}%" for name, p in entries)
