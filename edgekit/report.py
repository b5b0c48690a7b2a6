"""``edgekit report``: report.md, report.html (plots embedded) and report.json from a run's
results.json alone, so a report can always be rebuilt."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError
from edgekit.fileio import write_bytes_atomic, write_json_atomic
from edgekit.quantize.accuracy_aware import precision_label
from edgekit.recommend import measured, pareto_front, recommend, row_label, software_gpu

COLUMNS = (
    "target",
    "recipe",
    "device",
    "thr",
    "size",
    "p50 ms",
    "p90 ms",
    "speed-up",
    "top-1",
    "drop [95% CI]",
    "agree",
    "SQNR dB",
    "fast path",
    "int8 ops",
    "GFLOP/s (% peak)",
    "notes",
)


def load_results(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise UserInputError(f"{run_dir}: no results.json (is it a run directory?)")
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(results, dict) or "rows" not in results or "run" not in results:
        raise UserInputError(f"{path}: not an edgekit results file (no run/rows)")
    return results


def _fmt(value: float | None, pattern: str) -> str:
    return "" if value is None else pattern.format(value)


def unavailable(results: dict[str, Any]) -> list[str]:
    """One line per (target, device) this machine could not run, with the runtime's reason."""
    grouped: dict[tuple[str, str], tuple[list[str], str]] = {}
    for row in results["rows"]:
        if row["status"] != "unavailable":
            continue
        reason = str(row.get("error", ""))
        marker = f" on {row.get('device')}: "
        reason = reason.split(marker, 1)[1] if marker in reason else reason
        recipes, _ = grouped.setdefault((row["target"], str(row.get("device"))), ([], reason))
        recipes.append(row["recipe"])
    return [
        f"{target} on {device} ({', '.join(dict.fromkeys(recipes))}): {reason}"
        for (target, device), (recipes, reason) in grouped.items()
    ]


def accuracy_aware_lines(results: dict[str, Any]) -> list[str]:
    """The steps of each accuracy-aware int8 export: what was kept float, at what cost."""
    lines, seen = [], set()
    for row in results["rows"]:
        aware = row.get("accuracy_aware")
        if not aware or row.get("artifact") in seen:
            continue
        seen.add(row.get("artifact"))
        verdict = "within" if aware["within_budget"] else "NOT within"
        lines.append(
            f"- {row['target']}: {precision_label(row)}, {verdict} the {aware['max_drop_points']:g}"
            f"-point budget (step {aware['chosen_step']} chosen)"
        )
        for step in aware["steps"]:
            kept = ", ".join(step["keep_float"]) or "nothing"
            fraction = step.get("int8_fraction")
            latency = step.get("p50_ms")
            lines.append(
                f"  - step {step['step']}: float {kept}; drop {step['drop_points']:+.2f} "
                f"[{step['drop_ci'][0]:+.2f}, {step['drop_ci'][1]:+.2f}], "
                + ("" if fraction is None else f"{100 * fraction:.0f} % of ops int8, ")
                + ("latency not measured" if latency is None else f"p50 {latency:.3f} ms")
            )
    return lines


def table_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for row in results["rows"]:
        if row["status"] == "unavailable":
            continue
        latency = row.get("latency") or {}
        accuracy = row.get("accuracy") or {}
        coverage = row.get("coverage") or {}
        notes = []
        if row["status"] != "ok":
            notes.append(f"{row['status']}: {row.get('error')}")
        if software_gpu(row):
            notes.append("software Vulkan, not a GPU speed")
        if row.get("device") == "arm64-emu":
            notes.append("emulated latency, not a phone's speed")
            versus = accuracy.get("arm_vs_x86") or {}
            if versus:
                notes.append(
                    f"ARM vs x86: max |diff| {versus['max_abs_diff']:.3g}, argmax agreement "
                    f"{versus['argmax_agreement']:.4f}"
                )
        if row.get("disturbed"):
            notes.append("DISTURBED")
        if row["kind"] == "baseline":
            notes.append(f"baseline: {row.get('runtime', {}).get('device', '')}")
        notes += [w for w in row.get("export_warnings", []) if w.startswith("FALLBACK")]
        drop = ""
        if accuracy:
            low, high = accuracy["drop_ci"]
            drop = f"{accuracy['drop_points']:+.2f} [{low:+.2f}, {high:+.2f}]"
        fast = f"{coverage['fast_ops']}/{coverage['total_ops']}" if coverage else ""
        int8 = coverage.get("int8_fraction") if coverage else None
        gflops = ""
        if row.get("gflops") is not None:
            share = row.get("peak_fraction")
            gflops = f"{row['gflops']:.1f}" + (
                f" ({100 * share:.0f} %)" if share is not None else ""
            )
        rows.append(
            [
                row["target"],
                precision_label(row),
                str(row.get("device") or ""),
                str(row.get("threads") or ""),
                _fmt(row.get("size_bytes") and row["size_bytes"] / 1024, "{:.0f} KB"),
                _fmt(latency.get("p50_ms"), "{:.3f}"),
                _fmt(latency.get("p90_ms"), "{:.3f}"),
                "" if software_gpu(row) else _fmt(row.get("speedup"), "{:.2f}x"),
                _fmt(accuracy.get("top1") and 100 * accuracy["top1"], "{:.2f} %"),
                drop,
                _fmt(accuracy.get("agreement"), "{:.4f}"),
                _fmt(accuracy.get("sqnr_db"), "{:.1f}"),
                fast,
                _fmt(int8 and 100 * int8, "{:.0f} %"),
                gflops,
                "; ".join(notes),
            ]
        )
    return rows


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plots(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    rows = measured(results["rows"])
    front = {id(row) for row in pareto_front(results["rows"])}
    if rows:
        fig, ax = plt.subplots(figsize=(8, 5))
        for row in rows:
            on_front = id(row) in front
            ax.scatter(
                row["latency"]["p50_ms"],
                row["accuracy"]["drop_points"],
                marker="*" if on_front else "o",
                s=140 if on_front else 50,
                color="tab:red" if on_front else "tab:blue",
            )
            ax.annotate(
                row_label(row),
                (row["latency"]["p50_ms"], row["accuracy"]["drop_points"]),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
        ordered = sorted((r for r in rows if id(r) in front), key=lambda r: r["latency"]["p50_ms"])
        ax.step(
            [r["latency"]["p50_ms"] for r in ordered],
            [r["accuracy"]["drop_points"] for r in ordered],
            where="post",
            color="tab:red",
            alpha=0.5,
            label="Pareto front",
        )
        budget = results["run"]["config"].get("max_drop")
        if budget is not None:
            ax.axhline(budget, color="gray", linestyle="--", label=f"budget {budget:g} points")
        ax.set_xscale("log")
        ax.set_xlabel("p50 latency (ms, log scale)")
        ax.set_ylabel("top-1 drop against the baseline (points)")
        ax.set_title("latency against accuracy drop")
        ax.legend(loc="best", fontsize=8)
        paths["pareto"] = _save(fig, out_dir / "pareto.png")
    timed = [r for r in results["rows"] if r.get("samples_ms")]
    if timed:
        fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(timed) + 1)))
        ax.boxplot(
            [r["samples_ms"] for r in timed],
            vert=False,
            showfliers=True,
            tick_labels=[
                row_label(r) if r["kind"] == "artifact" else f"baseline x{r['threads']}"
                for r in timed
            ],
        )
        ax.set_xscale("log")
        ax.set_xlabel("latency per inference (ms, log scale)")
        ax.set_title("latency distributions")
        ax.tick_params(axis="y", labelsize=7)
        paths["latency"] = _save(fig, out_dir / "latency.png")
    sized = {}
    for row in results["rows"]:
        if row.get("size_bytes"):
            sized[f"{row['target']}/{row['recipe']}"] = row["size_bytes"] / 1024
    if sized:
        fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(sized) + 1)))
        ax.barh(list(sized), list(sized.values()), color="tab:green")
        ax.set_xlabel("artifact size (KB)")
        ax.set_title("size per artifact")
        ax.tick_params(axis="y", labelsize=7)
        paths["size"] = _save(fig, out_dir / "size.png")
    return paths


def _machine_line(run: dict[str, Any]) -> str:
    machine = run.get("machine", {})
    peaks = ", ".join(
        f"{threads} thr: fp32 {p['fp32_gflops']:.0f} GFLOP/s, int8 {p['int8_gops']:.0f} GOP/s"
        for threads, p in run.get("peaks", {}).items()
    )
    return f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores; matmul peaks: {peaks}"


def build_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.html, report.json and plots/ into ``run_dir``."""
    run_dir = Path(run_dir)
    results = load_results(run_dir)
    run = results["run"]
    budget = run["config"].get("max_drop", 1.0)
    advice = recommend(results["rows"], budget)
    front = pareto_front(results["rows"])
    plots = _plots(results, run_dir / "plots")
    rows = table_rows(results)
    title = f"edgekit run {run['id']}"
    intro = [
        f"model: {run['model']['spec']} (weights {run['model']['digest'][:12]}), data: "
        f"{run['data']['spec']} ({run['data']['evaluation_samples']} evaluation images)",
        f"machine: {_machine_line(run)}",
        "latency: p50/p90 of single timed invokes on a pre-staged input; speed-up is against the "
        "baseline (the source model in its own framework, fp32) measured in this run with the same "
        "thread count; drop is baseline top-1 minus artifact top-1, with a paired bootstrap 95% "
        "interval.",
    ]
    if any(software_gpu(row) for row in results["rows"]):
        intro.append(
            "GPU rows ran on a software Vulkan device (lavapipe): their latency is not "
            "a GPU speed, and they are never recommended; their numerics are real."
        )
    md = [
        f"# {title}",
        "",
        *[f"- {line}" for line in intro],
        "",
        "## Recommendation",
        "",
        f"**{advice.summary}** (budget: {budget:g} points)",
        "",
    ]
    md += [f"- {label}: {why}" for label, why in advice.reasons]
    md += ["", "## Results", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    md += ["", "Pareto front (latency against drop): " + ", ".join(row_label(r) for r in front), ""]
    aware = accuracy_aware_lines(results)
    if aware:
        md += ["## Accuracy-aware int8", "", *aware, ""]
    missing = unavailable(results)
    if missing:
        md += ["## Not available on this machine", "", *[f"- {line}" for line in missing], ""]
    for name, path in plots.items():
        md.append(f"![{name}](plots/{path.name})")
    write_bytes_atomic(run_dir / "report.md", ("\n".join(md) + "\n").encode())

    cells = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    images = "".join(
        f'<figure><img alt="{name}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{name}</figcaption></figure>'
        for name, path in plots.items()
    )
    reasons = "".join(
        f"<li>{html.escape(label)}: {html.escape(why)}</li>" for label, why in advice.reasons
    )
    intro_items = "".join(f"<li>{html.escape(line)}</li>" for line in intro)
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
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px}}th{{background:#eee}}img{{max-width:900px}}</style>
</head><body><h1>{html.escape(title)}</h1><ul>{intro_items}</ul>
<h2>Recommendation</h2><p><b>{html.escape(advice.summary)}</b> (budget: {budget:g} points)</p>
<ul>{reasons}</ul><h2>Results</h2><table><tr>{cells}</tr>{body}</table>{aware_html}{missing_html}
<h2>Plots</h2>{images}</body></html>"""
    write_bytes_atomic(run_dir / "report.html", page.encode())
    summary = {
        "run": run["id"],
        "recommendation": None if advice.best is None else row_label(advice.best),
        "recommendation_summary": advice.summary,
        "reasons": [{"row": label, "why": why} for label, why in advice.reasons],
        "pareto_front": [row_label(r) for r in front],
        "not_available": missing,
        "table": {"columns": list(COLUMNS), "rows": rows},
    }
    write_json_atomic(run_dir / "report.json", summary)
    return {
        "md": run_dir / "report.md",
        "html": run_dir / "report.html",
        "json": run_dir / "report.json",
        **plots,
    }
