"""The rich tables the commands print."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from edgekit.cli.console import console, warn
from edgekit.results import precision_label

if TYPE_CHECKING:
    from edgekit.export.accuracy_aware import AccuracyAwareResult
    from edgekit.records import MemoryRecord
    from edgekit.worker.latency import LatencyRecord


def exports(results: list[Any], failures: list[tuple[str, str, str]]) -> None:
    table = Table(
        "artifact", "size", "SQNR dB", "agree", "max |diff|", "fast path", "int8 ops", "audit", "s"
    )
    for result in results:
        manifest = result.artifact.manifest
        figures = manifest.validation or {}
        coverage = manifest.coverage or {}
        int8 = coverage.get("int8_fraction")
        audit = manifest.audit or {}
        verdict = audit.get("looks_like", "-") + ("" if audit.get("passed", True) else " [red]![/]")
        table.add_row(
            result.artifact.label,
            f"{manifest.file.size / 1024:.0f} KB",
            f"{figures['sqnr_db']:.1f}",
            f"{figures['top1_agreement']:.3f}",
            f"{figures['max_abs_diff']:.2g}",
            f"{coverage['fast_ops']}/{coverage['total_ops']}",
            "-" if int8 is None else f"{100 * int8:.0f} %",
            verdict,
            f"{result.seconds:.1f}",
        )
    console.print(table)
    for result in results:
        console.print(f"wrote {result.artifact.path} (+ .json manifest)", soft_wrap=True)
    for result in results:
        for warning in result.warnings:
            warn(f"{result.artifact.path.name}: {warning}")
    for target, recipe, why in failures:
        console.print(f"[red]not exported[/] {target}/{recipe}: {why}", soft_wrap=True)


def accuracy_aware(target: str, aware: AccuracyAwareResult) -> None:
    table = Table(
        "step",
        "kept float",
        "top-1 (selection)",
        "drop [95% CI]",
        "int8 ops",
        "p50 ms",
        "latency vs step 0",
        title=f"{target}: int8 within {aware.max_drop_points:g} points",
    )
    for step in aware.steps:
        low, high = step.drop_ci
        ratio = ""
        if step.ratio_to_first is not None:
            r_low, r_high = step.ratio_ci
            ratio = f"{step.ratio_to_first:.2f}x [{r_low:.2f}, {r_high:.2f}]"
        table.add_row(
            str(step.step),
            ", ".join(step.keep_float) or "-",
            f"{100 * step.top1:.2f} %",
            f"{step.drop_points:+.2f} [{low:+.2f}, {high:+.2f}]",
            "-" if step.int8_fraction is None else f"{100 * step.int8_fraction:.0f} %",
            "-" if step.p50_ms is None else f"{step.p50_ms:.3f}",
            ratio,
        )
    console.print(table)
    final = aware.evaluation
    low, high = final["drop_ci"]
    verdict = "within budget" if aware.within_budget else "[red]over budget[/]"
    console.print(
        f"wrote {aware.artifact.path} ({precision_label(aware.artifact.manifest)}, {verdict}: "
        f"drop {final['drop_points']:+.2f} [{low:+.2f}, {high:+.2f}] on the evaluation split "
        f"of {final['samples']} images, which played no part in choosing)",
        soft_wrap=True,
    )
    for warning in aware.warnings:
        warn(warning)


def accuracy(records: list[Any]) -> None:
    table = Table(
        "artifact",
        "device",
        "top-1",
        "baseline",
        "drop (points) [95% CI]",
        "McNemar p",
        "agree",
        "SQNR dB",
        "max |diff|",
        title=f"evaluation split of {records[0].dataset}",
    )
    for r in records:
        if r.drop_ci is None:  # a file without a source model: the labels only
            table.add_row(r.label, r.device, f"{100 * r.top1:.2f} %", "-", "no baseline", "-",
                          "-", "-", "-")  # fmt: skip
            continue
        low, high = r.drop_ci
        table.add_row(
            r.label,
            r.device,
            f"{100 * r.top1:.2f} %",
            f"{100 * r.baseline_top1:.2f} %",
            f"{r.drop_points:+.2f} [{low:+.2f}, {high:+.2f}]",
            f"{r.mcnemar['p_value']:.3g}",
            f"{r.agreement:.4f}",
            f"{r.sqnr_db:.1f}",
            f"{r.max_abs_diff:.3g}",
        )
    console.print(table)
    for r in records:
        if r.changed_classes:
            changes = ", ".join(
                f"{c['class']}: {c['baseline_correct']}->{c['artifact_correct']}/{c['images']}"
                for c in r.changed_classes[:10]
            )
            console.print(
                f"  {r.label} changed classes (baseline->artifact correct/images): {changes}",
                soft_wrap=True,
            )
    boards(records)
    prediction_changes(records)
    versus_host([r for r in records if r.versus_host])
    assumptions(records)


def prediction_changes(records: list[Any]) -> None:
    """Flips both ways, the worst class with its interval, a collapse, and shared flips."""
    from edgekit.measure.flips import shared_flips
    from edgekit.report.changes import flips_sentence

    for r in records:
        if r.collapse and r.collapse["collapsed"]:
            warn(f"{r.label} COLLAPSED: {r.collapse['reason']}")
        if not r.flips:
            continue
        line = f"  {r.label} flips: {flips_sentence(r.flips, r.per_class)}"
        console.print(line, soft_wrap=True)
    compared = [r for r in records if r.flips and r.flips["indices"]]  # what flipped any
    names = [f"{r.label} on {r.device}" for r in compared]
    if len(set(names)) < len(names):  # two files of one kind: their file names tell them apart
        names = [f"{Path(r.artifact).name} on {r.device}" for r in compared]
    flipped = {name: r.flips["indices"] for name, r in zip(names, compared, strict=True)}
    if len(flipped) > 1:
        shared = shared_flips(flipped)
        console.print(f"  the same images flip: {len(shared['flipped_by_all'])} flipped on all "
                      f"{len(flipped)}; most alike: " + ", ".join(
                          f"{p['a']} & {p['b']} {p['both']} (Jaccard {p['jaccard']:.2f})"
                          for p in sorted(shared["pairs"], key=lambda p: -p["jaccard"])[:3]),
                      soft_wrap=True)  # fmt: skip


def assumptions(records: list[Any]) -> None:
    """What edgekit inferred about files it did not make: each figure above rests on these."""
    seen: set[str] = set()
    for r in records:
        if r.assumed and r.artifact not in seen:
            seen.add(r.artifact)
            console.print(f"  {r.label} assumed: " + "; ".join(r.assumed), soft_wrap=True)


def versus_host(records: list[Any]) -> None:
    if not records:
        return
    table = Table(
        "artifact",
        "kernels",
        "CPU model",
        "max |ARM-x86|",
        "mean |ARM-x86|",
        "argmax agree",
        "outputs differing",
        title="the device's kernels against the host's (arm64-emu: aarch64 against x86)",
    )
    for r in records:
        f = r.versus_host
        table.add_row(
            r.label,
            f.get("kernels", ""),
            str(r.runtime.get("cpu_model", "")),
            f"{f['max_abs_diff']:.3g}",
            f"{f['mean_abs_diff']:.3g}",
            f"{f['argmax_agreement']:.4f}",
            f"{f['outputs_differing']}/{f['outputs']}",
        )
    console.print(table)


def speed_groups(records: list[Any]) -> None:
    """Per pool (device and thread count): the artifacts' speed groups, each group against the
    next, how the measuring stopped and the pairs it left undecided."""
    from edgekit.common.ranking import group_lines, stopping_line, undecided

    pools: dict[tuple[str, int], list[Any]] = {}
    for r in records:
        if r.status == "ok" and r.latency_fit and r.traits.get("latency_comparable", True):
            pools.setdefault((r.device, r.threads), []).append(r)
    for (device, threads), pool in pools.items():
        artifacts = [r for r in pool if r.artifact]
        console.print(f"[bold]{device} x{threads}:[/] {stopping_line(pool[0].pool or {})}",
                      soft_wrap=True, highlight=False)  # fmt: skip
        levels = [r.latency_fit for r in pool]
        if len(artifacts) > 1:
            mine = [r.latency_fit for r in artifacts]
            for line in group_lines([r.label for r in artifacts], mine):
                console.print(f"  {line}", soft_wrap=True, highlight=False)
        open_pairs = undecided(levels, (pool[0].pool or {}).get("precision"))
        if open_pairs:
            named = ", ".join(f"{pool[a].label} vs {pool[b].label}" for a, b in open_pairs)
            console.print(f"  undecided (interval includes 1, wider than the precision): {named}",
                          soft_wrap=True, highlight=False)  # fmt: skip


def boards(records: list[Any]) -> None:
    """Each board the records were measured on, once: its CPU, kernel, Python and runtimes."""
    from edgekit.common.machine import describe_board

    seen = {}
    for record in records:
        board = (record.runtime or {}).get("board")
        if board and board.get("board") not in seen:
            seen[board.get("board")] = describe_board(board)
    for line in seen.values():
        console.print(f"  {line}", soft_wrap=True, highlight=False, markup=False)


def latency(records: list[Any]) -> None:
    table = Table(
        "artifact",
        "device",
        "thr",
        "p50 ms",
        "p90 ms",
        "mean±std",
        "CV",
        "rounds",
        "load ms",
        "first ms",
        "peak MB",
        "model MB",
        "vs baseline [95% CI]",
        "others' CPU",
        title="latency (interleaved in rounds)",
    )
    for r in records:
        if r.status != "ok":
            table.add_row(r.label, r.device, str(r.threads), f"[red]{r.status}: {r.error}[/]")
            continue
        s = r.stats
        speedup = ""
        if r.speedup is not None and r.traits.get("latency_comparable"):
            low, high = r.speedup_ci
            speedup = f"{r.speedup:.2f}x [{low:.2f}, {high:.2f}]"
        elif not r.traits.get("latency_comparable", True):
            speedup = str(r.traits.get("note", "not comparable"))[:24]
        foreign = (
            "-" if r.foreign_cpu is None else f"{r.foreign_cpu:.2f}" + (" !" if r.disturbed else "")
        )
        table.add_row(
            r.label,
            r.device,
            str(r.threads),
            f"{s['p50_ms']:.3f}",
            f"{s.get('p90_ms', s['p50_ms']):.3f}",
            f"{s['mean_ms']:.3f}±{s['std_ms']:.3f}",
            f"{s['cv']:.1%}",
            str(len(r.rounds_ms)),
            "-" if r.load_ms is None else f"{r.load_ms:.0f}",
            "-" if r.first_ms is None else f"{r.first_ms:.2f}",
            "-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:.0f}",
            _model_mb(r.memory),
            speedup,
            foreign,
        )
    console.print(table)
    boards(records)
    speed_groups(records)
    memory(records)
    for r in records:
        where = r.runtime.get("device") if r.label.startswith("baseline") else None
        if where:
            console.print(f"  baseline ran on: {where}")
        for warning in r.warnings:
            warn(f"{r.label} ({r.device}, {r.threads} thr): {warning}")
        for hint in r.hints:
            console.print(f"[yellow]hint[/] {hint}", soft_wrap=True, highlight=False)
        if r.tuned_p50:
            console.print(tuned_agreement(r), soft_wrap=True, highlight=False)
    assumptions(records)


def tuned_agreement(record: LatencyRecord) -> str:
    """Whether a tuned file's p50 fell where edgekit tune said another session's would."""
    tuned, p50 = record.tuned_p50, record.stats["p50_ms"]
    low, high = tuned["interval_ms"]
    where = f"tune's {tuned['p50_ms']:.3f} ms [{low:.3f}, {high:.3f}] of {tuned['when']}"
    if tuned["within"]:
        return f"{record.label}: p50 {p50:.3f} ms, within {where}"
    return (
        f"{record.label}: p50 {p50:.3f} ms, outside {where}: the machine's speed moved since "
        "(or the options no longer suit it); edgekit tune again to refresh"
    )


def _model_mb(memory: MemoryRecord | None) -> str:
    return "-" if memory is None or memory.model_mb is None else f"{memory.model_mb:.1f}"


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def memory(records: list[Any]) -> None:
    """Each artifact's memory in parts that add up (model = file + planned + residual), what
    stays after release, and the resident set's slope over the invokes; one line per device
    that cannot tell, and where each runtime's planned figure comes from."""
    told = [r for r in records if r.memory and r.memory.status == "ok"]
    if told:
        table = Table("artifact", "device", "thr", "process peak", "runtime floor", "model",
                      "= file", "+ planned", "+ residual", "after release",
                      "kB per 1k invokes [95%]", title="memory (MB)")  # fmt: skip
        for r in told:
            m = r.memory
            slope = "-"
            if m.leak_kb_per_1k is not None:
                low, high = m.leak_interval
                slope = f"{m.leak_kb_per_1k:.1f} [{low:.1f}, {high:.1f}]"
                slope += " [red]leak?[/]" if m.leak else ""
            parts = (m.process_peak_mb, m.floor_mb, m.model_mb, m.file_mb, m.planned_mb,
                     m.residual_mb, m.retained_mb)  # fmt: skip
            table.add_row(r.label, r.device, str(r.threads), *map(_mb, parts), slope)
        console.print(table)
        sources = {r.target: r.memory.planned_source for r in told}
        for target, source in sources.items():
            console.print(f"  planned, {target}: {source}", soft_wrap=True, highlight=False)
        residuals = {r.memory.residual_is for r in told if r.memory.residual_is}
        for residual in sorted(residuals):
            console.print(f"  residual: {residual}", soft_wrap=True, highlight=False)
        for r in told:
            for line in _sampled(r.label, r.memory):
                console.print(line, soft_wrap=True, highlight=False)
    untold = {r.device: r.memory.error for r in records
              if r.memory and r.memory.status == "unavailable"}  # fmt: skip
    for why in untold.values():
        console.print(f"memory: {why}", soft_wrap=True, highlight=False)


def _sampled(label: str, m: MemoryRecord) -> list[str]:
    """A row read from outside its process (a phone's dumpsys): its PSS and what was read, and
    the runner's own figures apart."""
    if m.pss_mb is None:
        return []
    lines = [f"  {label}: PSS {m.pss_mb:.2f} MB, RSS {_mb(m.process_peak_mb)} MB; {m.notes[0]}"]
    said = m.runner_mb or {}
    if said:
        figures = ", ".join(f"{key.removesuffix('_mb')} {value:.2f}" for key, value in said.items())
        lines.append(f"  {label}: the runner's own figures, MB (its getrusage; not the parts): "
                     f"{figures}")  # fmt: skip
    return lines


def gates(results: list[Any]) -> None:
    table = Table("artifact", "device", "gate", "measured", "bound", "result")
    for r in results:
        verdict = "[green]PASS[/]" if r.passed else "[bold red]FAIL[/]"
        table.add_row(r.artifact, r.device, r.gate, f"{r.measured:.3f}", f"{r.bound:.3f}", verdict)
    console.print(table)
    for r in results:
        if r.detail:
            console.print(f"  {r.artifact}: {r.detail}", soft_wrap=True)
