"""The golden bundle of a model's recommended artifact (``run --golden``), as the report shows it
under the recommendation: a link to the bundle's README relative to the report, and the
tolerance its outputs hold to; or the one line why none was made. Reads what results.json
records (``run.golden``), so ``edgekit report`` shows the same."""

from __future__ import annotations

import html
from typing import Any

from edgekit.results import Results

LEAD = "Golden vectors for the app"


def golden_record(results: Results, model: str) -> dict[str, Any] | None:
    """What the run recorded of ``model``'s bundle; None where the run made none (no --golden)."""
    return (results.run.get("golden") or {}).get(model)


def golden_readme(record: dict[str, Any]) -> str | None:
    """The bundle's README, relative to the report; None where no bundle was made."""
    return f"{record['bundle']}/README.md" if record.get("bundle") else None


def _lead(record: dict[str, Any]) -> str:
    artifact = str(record.get("artifact") or "").rsplit("/", 1)[-1]
    return f"{LEAD} ({artifact})" if artifact else LEAD


def golden_markdown(record: dict[str, Any]) -> str:
    readme = golden_readme(record)
    if readme is None:
        return f"{_lead(record)}: none made ({record.get('why', 'no reason recorded')})"
    return f"{_lead(record)}: [{readme}]({readme}), logits within atol {record['atol']:.4g}"


def golden_html(record: dict[str, Any]) -> str:
    lead, readme = html.escape(_lead(record)), golden_readme(record)
    if readme is None:
        why = html.escape(str(record.get("why", "no reason recorded")))
        return f'<p class="golden">{lead}: none made ({why})</p>'
    link = html.escape(readme)
    return (
        f'<p class="golden">{lead}: <a href="{link}">{link}</a>, logits within atol '
        f"{record['atol']:.4g}</p>"
    )
