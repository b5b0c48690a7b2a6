"""The report's tables and lines, from result rows alone."""

from __future__ import annotations

from typing import Any

from edgekit.common.machine import describe
from edgekit.records import AwareEvaluation, MemoryRecord
from edgekit.report.content import Section, Table
from edgekit.report.peaks import peak_source, peaks_text, percent
from edgekit.results import Results, Row, precision_label

COLUMNS = (
    "target",
    "recipe",
    "device",
    "thr",
    "size",
    "peak / model MB",
    "p50 ms",
    "p90 ms",
    "speed-up, this run [95% CI]",
    "vs its fp32 [95% CI]",
    "top-1",
    "drop [95% CI]",
    "agree",
    "SQNR dB",
    "fast path",
    "int8 ops",
    "GFLOP/s (% of peak)",
    "notes",
)


def _fmt(value: float | None, pattern: str) -> str:
    return "" if value is None else pattern.format(value)


def assumptions(results: Results) -> list[str]:
    """One line per file edgekit did not make: what it inferred, so each figure says what it
    measured (layout, normalisation, dynamic sizes, the recipe the audit read)."""
    seen: dict[str, str] = {}
    for row in results.rows:
        if row.assumed and row.artifact not in seen:
            seen[str(row.artifact)] = f"{row.artifact}: " + "; ".join(row.assumed)
    return list(seen.values())


def device_reason(row: Row) -> str:
    """Why ``row`` could not run, without the "<label> on <device>: " its error starts with."""
    reason = str(row.error or "not available here")
    marker = f" on {row.device}: "
    return reason.split(marker, 1)[1] if marker in reason else reason


def unavailable(results: Results) -> list[str]:
    """One line per (target, device) this machine could not run, with the runtime's reason."""
    grouped: dict[tuple[str, str], tuple[list[str], str]] = {}
    for row in results.rows:
        if row.status != "unavailable":
            continue
        reason = device_reason(row)
        recipes, _ = grouped.setdefault((row.target, str(row.device)), ([], reason))
        recipes.append(row.recipe)
    lines = [
        f"{target} on {device} ({', '.join(dict.fromkeys(recipes))}): {reason}"
        for (target, device), (recipes, reason) in grouped.items()
    ]
    for device, absent in results.run.get("absent_devices", {}).items():
        lines.append(f"device {device}: to add it, {absent['how_to_add']}")
    return lines


AWARE_COLUMNS = (
    "step",
    "kept float",
    "selection drop [95% CI]",
    "int8 ops",
    "p50 ms",
    "latency vs step 0 [95% CI]",
)


def accuracy_aware_section(results: Results) -> Section:
    """The steps of each accuracy-aware int8 export, one table per artifact: what was kept
    float, at what cost; its caption says the budget, the verdict and the step chosen."""
    tables, seen = [], set()
    for row in results.rows:
        aware = row.accuracy_aware
        if not aware or row.artifact in seen:
            continue
        seen.add(row.artifact)
        verdict = "within" if aware.within_budget else "NOT within"
        final = aware.evaluation or AwareEvaluation()
        low, high = final.drop_ci or (0.0, 0.0)
        caption = (
            f"{row.target}: {row.precision}, {verdict} the {aware.max_drop_points:g}-point "
            f"budget on the evaluation split (drop {final.drop_points or 0.0:+.2f} "
            f"[{low:+.2f}, {high:+.2f}]; step {aware.chosen_step} chosen on the selection "
            "slice)"
        )
        rows = []
        for step in aware.steps:
            fraction, ratio, latency = step.int8_fraction, step.ratio_to_first, step.p50_ms
            cost = ""
            if ratio is not None and step.step and step.ratio_ci:
                r_low, r_high = step.ratio_ci
                cost = f"{ratio:.2f}x [{r_low:.2f}, {r_high:.2f}]"
            chosen = " (chosen)" if step.step == aware.chosen_step else ""
            rows.append(
                [
                    f"{step.step}{chosen}",
                    ", ".join(step.keep_float) or "nothing",
                    f"{step.drop_points:+.2f} [{step.drop_ci[0]:+.2f}, {step.drop_ci[1]:+.2f}]",
                    "" if fraction is None else f"{100 * fraction:.0f} %",
                    "not measured" if latency is None else f"{latency:.3f}",
                    cost,
                ]
            )
        tables.append(Table(AWARE_COLUMNS, rows, caption=caption))
    return Section("Accuracy-aware int8", [], tables)


def _notes(row: Row) -> list[str]:
    notes = []
    if row.status != "ok":
        notes.append(f"{row.status}: {row.error}")
    if row.traits.get("note") and not row.latency_comparable:
        notes.append(str(row.traits["note"]))
    versus = (row.accuracy and row.accuracy.versus_host) or {}
    if versus:
        notes.append(
            f"vs host: max |diff| {versus['max_abs_diff']:.3g}, argmax agreement "
            f"{versus['argmax_agreement']:.4f}"
        )
    if row.disturbed:
        notes.append("DISTURBED")
    if row.runtime.get("board"):  # the board it ran on: CPU, kernel, Python, runtimes
        from edgekit.common.machine import describe_board

        notes.append(describe_board(row.runtime["board"]))
    if row.throttled:
        notes.append("THROTTLED")
    if row.kind == "baseline":
        notes.append(f"baseline: {row.runtime.get('device', '')}")
    notes += [w for w in row.export_warnings if w.startswith("FALLBACK")]
    notes += row.hints
    return notes


def conditions_text(conditions: dict[str, Any] | None) -> str:
    """One line of what the machine ran at during a side's blocks: ``1500-2400 MHz (median
    2400) ondemand, max 61.2 °C (cpu-thermal), 2 blocks throttled``; the note where nothing was
    readable; empty where nothing was read (edgekit.worker.conditions.summarize)."""
    if not conditions:
        return ""
    if not conditions.get("readable"):
        return str(conditions.get("note") or "conditions: not readable")
    parts = []
    mhz = conditions.get("mhz")
    if mhz:
        low, mid, high = mhz["min"], mhz["median"], mhz["max"]
        span = f"{low:.0f}" if low == high else f"{low:.0f}-{high:.0f}"
        parts.append(f"{span} MHz (median {mid:.0f}) {'/'.join(conditions.get('governors', []))}")
    if conditions.get("max_c") is not None:
        parts.append(f"max {conditions['max_c']:.1f} °C ({conditions.get('zone')})")
    if conditions.get("throttled_blocks"):
        parts.append(f"{conditions['throttled_blocks']} blocks throttled")
    return ", ".join(part.strip() for part in parts)


def _conditions_note(row: Row, noted: set[str]) -> list[str]:
    """The row's conditions line; where nothing is readable, said once per device."""
    conditions = getattr(row, "conditions", None)  # a result row of schema 3 may lack it
    text = conditions_text(conditions)
    if not text or (not conditions.get("readable") and str(row.device) in noted):
        return []
    if not conditions.get("readable"):
        noted.add(str(row.device))
    return [text]


def versus_fp32(row: Row, rows: list[Row]) -> tuple[float, tuple[float, float]] | None:
    """The same target's fp32 latency over this row's, interleaved in the same rounds: the
    ratio of one runtime's own files, which no other framework's drift moves."""
    from edgekit.report.recommend import latency_ratio

    if row.kind != "artifact" or row.recipe == "fp32" or not row.latency_comparable:
        return None
    for other in rows:
        if (
            other.kind == "artifact"
            and other.target == row.target
            and other.recipe == "fp32"
            and not other.keep_float
            and other.model == row.model
            and other.ok
        ):
            found = latency_ratio(other, row)
            if found is not None:
                return found
    return None


def _memory_cell(memory: MemoryRecord | None) -> str:
    """The process's peak and the model's own share of it (above the runtime's floor)."""
    if memory is None or memory.status != "ok":
        return ""
    peak, model = memory.process_peak_mb, memory.model_mb  # a phone's: no share
    return f"{_fmt(peak, '{:.0f}') or '-'} / {_fmt(model, '{:.1f}') or '-'}"


def table_rows(results: Results) -> list[list[str]]:
    rows = []
    noted: set[str] = set()  # the devices whose conditions were said to be unreadable
    for row in results.rows:
        if row.status == "unavailable":
            continue
        accuracy, coverage = row.accuracy, row.coverage
        top1 = None if accuracy is None else accuracy.top1
        drop = ""
        if accuracy and accuracy.drop_ci and accuracy.drop_points is not None:
            low, high = accuracy.drop_ci
            drop = f"{accuracy.drop_points:+.2f} [{low:+.2f}, {high:+.2f}]"
        speedup = ""
        if row.speedup is not None and row.latency_comparable:
            low, high = row.speedup_ci or (row.speedup, row.speedup)
            speedup = f"{row.speedup:.2f}x [{low:.2f}, {high:.2f}]"
        fp32 = versus_fp32(row, results.rows)
        over_fp32 = "" if fp32 is None else f"{fp32[0]:.2f}x [{fp32[1][0]:.2f}, {fp32[1][1]:.2f}]"
        gflops = "" if row.gflops is None else f"{row.gflops:.1f}" + _share(row, results.run)
        int8 = coverage and coverage.int8_fraction
        rows.append(
            [
                row.target,
                precision_label({"recipe": row.recipe, "keep_float": row.keep_float}),
                str(row.device or ""),
                str(row.threads or ""),
                _fmt(row.size_bytes and row.size_bytes / 1024, "{:.0f} KB"),
                _memory_cell(row.memory),
                _fmt(row.p50, "{:.3f}"),
                _fmt(row.latency.get("p90_ms"), "{:.3f}"),
                speedup,
                over_fp32,
                _fmt(None if top1 is None else 100 * top1, "{:.2f} %"),
                drop,
                _fmt(accuracy and accuracy.agreement, "{:.4f}"),
                _fmt(accuracy and accuracy.sqnr_db, "{:.1f}"),
                f"{coverage.fast_ops}/{coverage.total_ops}" if coverage else "",
                _fmt(int8 and 100 * int8, "{:.0f} %"),
                gflops,
                "; ".join([*_notes(row), *_conditions_note(row, noted)]),
            ]
        )
    return rows


def _share(row: Row, run: dict[str, Any]) -> str:
    """`` (87 % of fp32)``; the row that raised the peak says so."""
    if row.peak_fraction is None:
        return ""
    source = peak_source(run.get("peak_kernels"), row.threads, str(row.peak_kind))
    raised = ", raised the peak" * (source.get("raised_by") == row.key)
    return f" ({percent(row.peak_fraction)} of {row.peak_kind}{raised})"


def machine_line(run: dict[str, Any]) -> str:
    peaks = peaks_text(run.get("peaks", {}), run.get("peak_kernels"))
    machine = run.get("machine") or {}
    return f"{describe(machine)} (fingerprint {machine.get('id', '?')}); matmul peaks{peaks}"
