"""The report's "Where the time goes" section: the ten most expensive layers with the runtimes
side by side, and each artifact's explanation (from the profiles ``edgekit run`` recorded)."""

from __future__ import annotations

from typing import Any

from edgekit.results import Results

TOP = 10


def profile_lines(results: Results) -> list[str]:
    profiles: list[dict[str, Any]] = results.run.get("profiles") or []
    if not profiles:
        return []
    times: dict[str, dict[str, float]] = {}
    for profile in profiles:
        for layer in profile["layers"]:
            times.setdefault(layer["name"], {})[profile["label"]] = layer["ms"]
    top = sorted(times, key=lambda name: -max(times[name].values()))[:TOP]
    labels = [profile["label"] for profile in profiles]
    lines = [
        f"Per-layer time on the host CPU ({profiles[0]['method']} and the others' own profilers;"
        " layers named by the source model's module paths), the ten most expensive layers:",
        "",
        "| layer | " + " | ".join(f"{label} ms" for label in labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for name in top:
        cells = [
            "" if times[name].get(label) is None else f"{times[name][label]:.3f}"
            for label in labels
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for profile in profiles:
        coverage = profile.get("coverage")
        share = "" if coverage is None else f" ({100 * coverage:.0f} % of the p50)"
        lines.append(f"- **{profile['label']}**: layers sum to {profile['ops_ms']:.3f} ms{share}")
        lines += [f"  - {line}" for line in profile.get("explanation", [])]
    return lines
