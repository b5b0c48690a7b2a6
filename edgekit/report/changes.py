"""The report's "What quantization changed": per artifact, predictions flipped both ways, the
worst class with its interval, a collapse; then whether the same images flip everywhere, and
the flipped images with each side's top-3."""

from __future__ import annotations

from typing import Any

from edgekit.report.content import Section
from edgekit.results import Results


def flips_sentence(flips: dict[str, Any], per_class: list[dict[str, Any]]) -> str:
    """``3 of 899 top-1 predictions changed (...), McNemar p=0.5; worst class '2': drop ...``:
    the flips both ways and the class whose interval reaches highest (when above zero)."""
    sentence = (
        f"{flips['changed']} of {flips['samples']} top-1 predictions changed "
        f"({flips['right_to_wrong']} right -> wrong, {flips['wrong_to_right']} wrong -> "
        f"right, {flips['wrong_to_other_wrong']} wrong -> another wrong), McNemar "
        f"p={flips['mcnemar_p']:.3g}"
    )
    worst = max(per_class, key=lambda change: change["drop_ci"][1], default=None)
    if worst is not None and worst["drop_ci"][1] > 0:
        low, high = worst["drop_ci"]
        sentence += (
            f"; worst class {worst['name']!r}: drop {worst['drop_points']:+.2f} "
            f"[{low:+.2f}, {high:+.2f}] points, adjusted p={worst['p_adjusted']:.3g}"
        )
    return sentence


def prediction_change_section(results: Results) -> Section:
    """Each artifact's flips sentence and collapse, the images several artifacts flip alike,
    and each artifact's flipped images (its gallery, when the run recorded one)."""
    lines, seen = [], set()
    gallery: dict[str, list[dict[str, Any]]] = {}
    for row in results.rows:
        accuracy, where = row.accuracy, row.label.rsplit(" x", 1)[0]
        if row.kind != "artifact" or accuracy is None or where in seen:
            continue
        flips = accuracy.flips
        if not (flips or accuracy.collapse):
            continue
        seen.add(where)
        found = accuracy.collapse or {}
        if found.get("collapsed"):
            lines.append(f"{where}: COLLAPSED, {found['reason']}")
        if not flips:
            continue
        lines.append(f"{where}: {flips_sentence(flips, accuracy.per_class or [])}")
        if accuracy.gallery:
            gallery[where] = accuracy.gallery
    for model, shared in (results.run.get("flips_across") or {}).items():
        if not shared["pairs"]:  # fewer than two artifacts flipped anything
            continue
        alike = max(shared["pairs"], key=lambda pair: pair["jaccard"])
        lines.append(
            f"{model}: {len(shared['flipped_by_all'])} image(s) flip on every artifact that "
            f"flips any; the most alike: {alike['a']} and {alike['b']}, {alike['both']} "
            f"shared (Jaccard {alike['jaccard']:.2f})"
        )
    if lines:
        lines.append(
            "Per-class intervals are 95 % paired bootstrap intervals; p-values are adjusted "
            "across classes (Benjamini-Hochberg)."
        )
    return Section("What quantization changed", lines, gallery=gallery)
