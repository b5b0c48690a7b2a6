"""Why an int8, fp16 or delegated artifact is (not) faster than the same target's fp32: the
measured speed-up and the causes edgekit can establish, each with its figure: the CPU's ISA
(from the machine fingerprint), the kernel family the runtime chose (onnxruntime's optimised
graph: QLinearConv, ConvInteger or a float Conv; XNNPACK's operator names), the share of the
time in quantize/dequantize, in layout and data movement, in ops outside the fast path, the
share of MACs in int8, and the per-invoke overhead the ops do not account for.

``explain_all`` works on profiles (``edgekit profile``, the run report); ``hint``
makes the one line ``edgekit bench`` and ``edgekit run`` print from the op census alone."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from edgekit.common.stats import recorded_ratio
from edgekit.targets.census import Census
from edgekit.targets.profiling import DATA_GROUP, QUANT_GROUP

if TYPE_CHECKING:
    from edgekit.records import ArtifactProfile
    from edgekit.results import Row

INT8_ISA = ("avx512_vnni", "avx_vnni", "amx_int8")
FP16_ISA = ("avx512_fp16", "f16c")
TINY_MACS = 20_000_000  # below this, a few microseconds of dispatch per op weigh like the MACs


def speedup(
    fp32: ArtifactProfile | Row | dict[str, Any], timed: ArtifactProfile | Row | dict[str, Any]
) -> dict | None:
    """fp32 time over this artifact's, both timed in one pool, with its 95 % interval
    (``edgekit.common.stats.recorded_ratio``: each is a profile, a row or a dict of what was
    recorded)."""

    def rounds(item: ArtifactProfile | Row | dict[str, Any]) -> list:
        return (item.get("rounds_ms") if isinstance(item, dict) else item.rounds_ms) or []

    if not rounds(fp32) or len(rounds(fp32)) != len(rounds(timed)):
        return None
    ratio, (low, high) = recorded_ratio(fp32, timed)
    verdict = "faster" if low > 1.0 else ("slower" if high < 1.0 else "no faster (a tie)")
    return {"ratio": ratio, "ci": [low, high], "verdict": verdict}


def isa_line(recipe: str, isa: list[str]) -> str:
    wanted = INT8_ISA if recipe.startswith("int8") else FP16_ISA
    have = [flag for flag in wanted if flag in isa]
    what = "int8 dot-product" if recipe.startswith("int8") else "fp16"
    if have:
        return f"CPU: {', '.join(have)} present (the {what} instructions a runtime may use)"
    return f"CPU: none of {', '.join(wanted)} (no {what} instructions here)"


def kernels(census: Census, events: dict[int, list[str]] | None = None) -> str:
    """The kernels the conv/matmul ops run on: XNNPACK's operator names where profiled, else
    the op types of the executed graph (onnxruntime's QLinearConv, ConvInteger, FusedConv)."""
    names: Counter = Counter()
    for op in census.ops:
        if op.kind != "mac":
            continue
        profiled = (events or {}).get(op.index) or []
        # XNNPACK and LiteRT name kernels ("Convolution (NHWC, QC8) IGEMM"); onnxruntime's
        # profile names nodes, so its kernel is the node's op type
        label = profiled[0] if profiled and " " in profiled[0] else op.op
        names[f"{label}{'' if op.fast else ' (off the fast path)'}"] += 1
    return ", ".join(f"{name} x{count}" for name, count in names.most_common(4))


def findings(
    profile: ArtifactProfile,
    base: ArtifactProfile | None,
    census: Census,
    placed: list,
    isa: list[str],
) -> list:
    """The explanation of one profiled artifact, largest cause first."""
    if not profile.layers:
        return [profile.method]
    lines = []
    total = profile.total_ms or 0.0
    if base is not None and profile.speedup_vs_fp32:
        s = profile.speedup_vs_fp32
        lines.append(
            f"{s['ratio']:.2f}x [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}] the speed of "
            f"{base.label} ({profile.total_ms:.3f} ms against {base.total_ms:.3f} ms p50, "
            f"interleaved): {s['verdict']}"
        )
    if profile.recipe != "fp32":
        lines.append(isa_line(profile.recipe, isa))
    events = {p.index: p.events for p in placed if p.index is not None}
    lines.append("kernels: " + (kernels(census, events) or "no conv/matmul op"))
    macs = [op for op in census.ops if op.kind == "mac"]
    all_macs = sum(op.macs for op in macs)
    if all_macs and profile.recipe.startswith("int8"):
        int8 = sum(op.macs for op in macs if op.compute == "int8")
        lines.append(f"int8 share of the MACs: {100 * int8 / all_macs:.1f} %")
    causes = []
    off = [p for p in placed if p.index is not None and not census.ops[p.index].fast]
    off_ms = sum(p.ms for p in off)
    if off and total:
        kinds = Counter(census.ops[p.index].op for p in off)
        where = census.ops[off[0].index].where
        causes.append(
            (
                off_ms,
                f"{100 * off_ms / total:.0f} % of the time in {len(off)} ops off "
                f"the fast path ({', '.join(f'{k} x{n}' for k, n in kinds.items())}, on "
                f"{where})",
            )
        )
    for layer in profile.layers:
        if layer.name in (QUANT_GROUP, DATA_GROUP) and layer.ms and total:
            causes.append(
                (
                    layer.ms,
                    f"{100 * layer.ms / total:.0f} % of the time in {layer.name} "
                    f"({len(layer.ops)} ops, {layer.ms:.3f} ms)",
                )
            )
    overhead = total - profile.ops_ms
    if total and overhead > 0:
        tiny = f"; the model has only {all_macs / 1e6:.1f} M MACs" if all_macs < TINY_MACS else ""
        share = 100 * overhead / total
        causes.append(
            (
                overhead,
                f"per-invoke overhead {overhead:.3f} ms ({share:.0f} % of the "
                f"p50) outside the ops' own times{tiny}",
            )
        )
    if base is not None:
        causes += _slower_layers(profile, base)
    lines += [text for _, text in sorted(causes, key=lambda c: -c[0])]
    return lines


def _slower_layers(profile: ArtifactProfile, base: ArtifactProfile) -> list[tuple[float, str]]:
    fp32 = {layer.name: layer.ms for layer in base.layers}
    worse = [
        (layer.ms - fp32[layer.name], layer)
        for layer in profile.layers
        if layer.name in fp32 and fp32[layer.name] > 0 and layer.ms > 1.1 * fp32[layer.name]
    ]
    if not worse:
        return []
    worse.sort(key=lambda item: -item[0])
    text = ", ".join(
        f"{layer.name} {layer.ms:.3f} vs {fp32[layer.name]:.3f} ms" for _, layer in worse[:3]
    )
    extra = sum(delta for delta, _ in worse)
    return [(extra, f"{len(worse)} layer(s) slower than in {base.label} (+{extra:.3f} ms): {text}")]


def explain_all(profiles: list, details: dict[str, tuple[Census, list]], isa: list[str]) -> None:
    """Fill each profile's speed-up over its target's fp32 profile and its explanation."""
    for profile in profiles:
        base = next(
            (
                p
                for p in profiles
                if p.target == profile.target and p.recipe == "fp32" and p is not profile
            ),
            None,
        )
        if base is not None:
            profile.speedup_vs_fp32 = speedup(base, profile)
        census, placed = details[profile.artifact]
        profile.explanation = findings(profile, base, census, placed, isa)


def hint(label: str, census: Census, base_label: str, ratio: dict) -> str:
    """One line for bench and run, from the census alone, when int8/fp16 is not faster."""
    parts = [
        f"{label} is {ratio['verdict']} than {base_label} ({ratio['ratio']:.2f}x "
        f"[{ratio['ci'][0]:.2f}, {ratio['ci'][1]:.2f}])"
    ]
    off = [op for op in census.ops if not op.fast]
    if off:
        parts.append(f"{len(off)} ops off the fast path ({', '.join(sorted({o.op for o in off}))})")
    quant = sum(op.kind == "quant" for op in census.ops)
    if quant:
        parts.append(f"{quant} quantize/dequantize/cast ops")
    macs = sum(op.macs for op in census.ops if op.kind == "mac")
    if macs and macs < TINY_MACS:
        parts.append(f"only {macs / 1e6:.1f} M MACs: per-invoke overhead weighs")
    parts.append(f"kernels: {kernels(census)}")
    return "; ".join(parts) + "; `edgekit profile` shows where the time goes"


def not_faster_hints(items: list[dict[str, Any]]) -> dict[str, str]:
    """For every int8/fp16 item not faster than its target's fp32 in the same pool (same
    device, threads and rounds), the one hint line, keyed by the item's label. An item is
    ``{label, target, recipe, device, threads, rounds_ms, round_sessions, latency_fit,
    noise_band, path}``."""
    from edgekit.targets import get_target

    lines = {}
    for item in items:
        if item["recipe"] == "fp32" or not item["rounds_ms"]:
            continue
        base = next(
            (
                b
                for b in items
                if b["recipe"] == "fp32"
                and b["target"] == item["target"]
                and b["device"] == item["device"]
                and b["threads"] == item["threads"]
                and len(b["rounds_ms"]) == len(item["rounds_ms"])
            ),
            None,
        )
        if base is None:
            continue
        ratio = speedup(base, item)
        if ratio is None or ratio["verdict"] == "faster":
            continue
        try:
            census = get_target(item["target"]).census(item["path"])
        except NotImplementedError:  # a plugin target without an op census: no hint
            continue
        lines[item["label"]] = hint(item["label"], census, base["label"], ratio)
    return lines
