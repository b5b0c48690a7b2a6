"""Every figure the README and the docs show, made by one command (``make figures``): each block
between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in README.md or a page under
docs/ is rewritten from what a command printed on this machine, and ends with the machine that
made it. The benchmark tables
(benchmarks/*.md) are written by their own scripts, which this runs first.

    .venv/bin/python benchmarks/figures.py [--only export,arm64,...] [--skip-benchmarks]

Run it on a quiet machine; it takes about an hour on 2 cores."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from common import HERE
from latency import tool_verdict

from edgekit.common.fileio import write_bytes_atomic
from edgekit.common.machine import describe, fingerprint
from edgekit.targets import runtime_versions

ROOT = HERE.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]  # where figure blocks may live
EDGEKIT = str(Path(sys.executable).with_name("edgekit"))
TESTS = ROOT / "tests"


def edgekit(*args: str, cwd: Path | None = None, json_out: bool = True) -> object:
    command = [EDGEKIT, *args, *(["--json"] if json_out else [])]
    env = {"PYTHONPATH": str(TESTS), "COLUMNS": "200"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd,
                          env={**__import__("os").environ, **env})  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-600:]}")
    return json.loads(done.stdout) if json_out else done.stdout


def provenance() -> str:
    facts = fingerprint(versions=runtime_versions())
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    return (
        f"_Made by `make figures` on {when} on {describe(facts)} (fingerprint "
        f"`{facts['id']}`); other machines give other figures: `make figures` makes yours._"
    )


def recorded_provenance(name: str) -> str:
    """The provenance of a block copied from a benchmark's page: that page's own command, date
    and machine, which need not be this one."""
    text = (HERE / name).read_text().splitlines()
    written = next(line for line in text if line.startswith("Written by "))
    machine = next(line for line in text if line.startswith("- machine: "))
    command, when = re.match(r"Written by `(.+?)` on (\S+?);", written).groups()
    made_on = machine.removeprefix("- machine: ").split(". These are", 1)[0]
    return (
        f"_From benchmarks/{name}, written by `{command}` on {when[:10]} on {made_on}; other "
        "machines give other figures: `make figures` makes yours._"
    )


def block_accuracy() -> list[str]:
    from edgekit.sources.weights import shipped_card

    result = edgekit("eval")
    card = shipped_card("digits-mobilenet")
    return [f"`digits-mobilenet` reaches {100 * result['top1']:.2f} % top-1 on the evaluation "
            f"split of {result['samples']} images (`edgekit eval`; weights "
            f"`{result['digest'][:12]}`). The weights ship with edgekit "
            f"(`edgekit/sources/weights/`, made by `{card.command}` on {card.trained_on}, where they "
            f"read {100 * card.top1:.2f} %), so every machine evaluates the same file."]  # fmt: skip


def block_export(work: Path) -> list[str]:
    exported = edgekit("export", "--target", "all", "--recipe", "all", "-o", str(work / "all"))
    lines = ["| artifact | size | SQNR dB | agreement | max \\|diff\\| | fast path | int8 ops |",
             "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for entry in exported["artifacts"]:
        figures, coverage = entry["validation"], entry["coverage"]
        io = "-io8" if entry["input"]["dtype"] in ("int8", "uint8") else ""
        int8 = coverage.get("int8_fraction")
        lines.append(
            f"| {entry['target']}/{entry['recipe']}{io} | {entry['file']['size'] / 1024:.0f} KB | "
            f"{figures['sqnr_db']:.1f} | {figures['top1_agreement']:.3f} | "
            f"{figures['max_abs_diff']:.2g} | {coverage['fast_ops']}/{coverage['total_ops']} | "
            f"{'' if int8 is None else f'{100 * int8:.0f} %'} |"
        )
    return lines


def block_arm64(work: Path) -> list[str]:
    folder = work / "all"
    lines = ["| artifact | kernels | max \\|ARM - x86\\| | argmax agreement | outputs that differ |"
             " top-1 on ARM (baseline) |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    runs = [([str(folder / f"digits-mobilenet-{r}.{s}") for s in ("tflite", "onnx", "pte")
              for r in ("fp32", "int8")], []),
            ([str(folder / f"digits-mobilenet-{r}.tflite") for r in ("fp32", "int8")],
             ["--no-xnnpack"])]  # fmt: skip
    for paths, extra in runs:
        for record in edgekit("eval", *paths, "--device", "arm64-emu", *extra):
            versus = record["versus_host"]
            exact = " (bit-exact)" if versus["max_abs_diff"] == 0 else ""
            lines.append(
                f"| {record['label']} | {versus['kernels']} | {versus['max_abs_diff']:.2g}{exact} "
                f"| {versus['argmax_agreement']:.4f} | {versus['outputs_differing']} / "
                f"{versus['outputs']} | {100 * record['top1']:.2f} % "
                f"({100 * record['baseline_top1']:.2f} %) |"
            )
    return lines


def block_qdebug() -> list[str]:
    text = edgekit("quantize-debug", "--model", "damaged_models:outlier_mobilenet", "--target",
                   "onnx", "--top", "3", json_out=False, cwd=TESTS)  # fmt: skip
    return ["```", "$ edgekit quantize-debug --model damaged_models:outlier_mobilenet --target "
            "onnx --top 3", *text.strip().splitlines()[:8], "```"]  # fmt: skip


def block_aware(work: Path) -> list[str]:
    lines = ["| target | steps (float layers: drop on the selection slice [95% CI], int8 ops, "
             "latency vs step 0) | chosen: drop on the evaluation split [95% CI] |",
             "| --- | --- | --- |"]  # fmt: skip
    for target in ("tflite", "executorch", "onnx"):
        entry = edgekit("export", "--model", "damaged_models:outlier_mobilenet", "--int8",
                        "--max-drop", "1", "--target", target, "-o", str(work / "aware"),
                        cwd=TESTS)  # fmt: skip
        aware = entry["accuracy_aware"]
        steps = []
        for step in aware["steps"]:
            kept = ", ".join(f"`{k}`" for k in step["keep_float"]) or "none"
            ratio = step.get("ratio_to_first")
            cost = "" if ratio is None else f", {ratio:.2f}x"
            int8 = step.get("int8_fraction")
            steps.append(f"{kept}: {step['drop_points']:+.2f} [{step['drop_ci'][0]:+.2f}, "
                         f"{step['drop_ci'][1]:+.2f}]"
                         + ("" if int8 is None else f", {100 * int8:.0f} %") + cost)  # fmt: skip
        final = aware["evaluation"]
        lines.append(f"| {target} | {'; '.join(steps)} | {final['drop_points']:+.2f} "
                     f"[{final['drop_ci'][0]:+.2f}, {final['drop_ci'][1]:+.2f}] |")  # fmt: skip
    return lines


def block_latency() -> list[str]:
    results = json.loads((HERE / "results.json").read_text())
    lines = []
    for pool in results["pools"]:
        if pool["model"] == "digits-mobilenet" or pool["threads"] != 1:
            continue
        rows = {row["label"]: row for row in pool["rows"] if row["status"] == "ok"}
        eager = rows.get("torch eager/fp32")
        best = max((r for r in rows.values() if r.get("over_eager")), key=lambda r: r["over_eager"])
        parts = [f"torch eager {eager['stats']['p50_ms']:.2f} ms" if eager else ""]
        for target in ("tflite", "executorch", "onnx"):
            fp32, int8 = rows.get(f"{target}/fp32"), rows.get(f"{target}/int8")
            if fp32 and int8:
                low, high = int8["over_fp32_ci"]
                parts.append(f"{target} fp32 {fp32['stats']['p50_ms']:.2f} ms, int8 "
                             f"{int8['stats']['p50_ms']:.2f} ms (int8 {int8['over_fp32']:.2f}x "
                             f"[{low:.2f}, {high:.2f}] faster)")  # fmt: skip
        low, high = best["over_eager_ci"]
        parts.append(
            f"best artifact {best['label']} {best['over_eager']:.2f}x [{low:.2f}, "
            f"{high:.2f}] torch eager"
        )
        lines.append(f"- {pool['model']}, 1 thread: " + "; ".join(p for p in parts if p) + ".")
    for row in results["tool"]:
        if row["threads"] == 1:
            low, high = row["ratio_ci"]
            lines.append(f"- edgekit / LiteRT's tool, {row['model']} {row['label']}: "
                         f"{row['ratio']:.3f} [{low:.3f}, {high:.3f}]; within 3 %: "
                         f"{tool_verdict(low, high)}")  # fmt: skip
    return lines


def block_file(name: str, summary: str | None = None) -> list[str]:
    """The table of a benchmark's .md (and its summary line, where it has one)."""
    text = (HERE / name).read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("|"))
    table = [line for line in text[start:] if line.startswith("|")]
    found = [line for line in text if summary and line.startswith(summary)]
    return table + (["", *found] if found else [])


def block_report(work: Path) -> list[str]:
    summary = edgekit("run", "--device", "cpu,gpu", "--accuracy-aware", "--runs-dir",
                      str(work / "runs"), "--history", str(work / "history.sqlite"))  # fmt: skip
    report = Path(summary["report"]["md"]).read_text().splitlines()
    table = [line for line in report if line.startswith("|")]
    keep = table[:2] + [line for line in table[2:] if "| cpu |" in line or "baseline" in line]
    return [f"> **{summary['recommendation']}**", "", *keep[:10]]


def _export_table(exported: dict) -> list[str]:
    lines = ["| artifact | size | SQNR dB vs the source | agreement | audit: looks like |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for entry in exported["artifacts"]:
        figures, audit = entry["validation"], entry.get("audit") or {}
        lines.append(f"| {entry['target']}/{entry['recipe']} | {entry['file']['size'] / 1024:.0f} "
                     f"KB | {figures['sqnr_db']:.1f} | {figures['top1_agreement']:.3f} | "
                     f"{audit.get('looks_like', '')} |")  # fmt: skip
    lines += [f"| {u['target']}/{u['recipe']} | not exported: {u['reason']} | | | |"
              for u in exported["unsupported"]]  # fmt: skip
    return lines


def block_foreign(work: Path) -> list[str]:
    """A third-party file (the ONNX model zoo's SqueezeNet that the onnx package ships), files
    TFLiteConverter and torch.onnx.export made, through audit, bench, eval and export."""
    sys.path.insert(0, str(TESTS))
    import foreign_files

    squeezenet = str(foreign_files.light_model("light_squeezenet"))
    audit = edgekit("audit", squeezenet, json_out=False)
    bench = edgekit("bench", squeezenet, "--rounds", "10")[0]
    stats = bench["stats"]
    lines = ["```", "$ edgekit audit light_squeezenet.onnx",
             *[line.replace(squeezenet, "light_squeezenet.onnx") for line in
               audit.strip().splitlines()], "```", "",
             f"`edgekit bench light_squeezenet.onnx`: p50 {stats['p50_ms']:.2f} ms, p90 "
             f"{stats['p90_ms']:.2f} ms over {len(bench['rounds_ms'])} rounds (1 thread); "
             "assumed: " + "; ".join(bench["assumed"]) + ".", "",
             "`edgekit export --model light_squeezenet.onnx --data synthetic:64 --target all "
             "--recipe fp32`:", ""]  # fmt: skip
    lines += _export_table(edgekit("export", "--model", squeezenet, "--data", "synthetic:64",
                                   "--target", "all", "--recipe", "fp32",
                                   "-o", str(work / "squeezenet")))  # fmt: skip
    keras = foreign_files.tflite_files(foreign_files.keras_digits(), work)
    [record] = edgekit("eval", str(keras["int8"]))
    checked = edgekit("audit", str(keras["dynamic"]), "--expect", "int8", json_out=False)
    reasons = [line for line in checked.splitlines() if line.startswith("NOT AS EXPECTED")]
    lines += ["", f"TFLiteConverter's full-integer file of a small Keras CNN (int8 I/O): "
              f"`edgekit eval keras-int8-io.tflite` gives {100 * record['top1']:.2f} % top-1 on "
              f"the {record['samples']} evaluation images; its dynamic-range file under "
              "`edgekit audit keras-dynamic.tflite --expect int8` exits 1:", "", "```",
              *[r.replace(str(work) + "/", "") for r in reasons], "```"]  # fmt: skip
    return lines


def block_onnx_source(work: Path) -> list[str]:
    """The digits classifier through torch.onnx.export, then back in as a source model: the
    converter's cost, side by side with the direct torch path."""
    sys.path.insert(0, str(TESTS))
    import foreign_files

    from edgekit.sources.load import load_model

    source = load_model("digits-mobilenet", quiet=True)
    onnx_file = foreign_files.torch_onnx(source.module, source.example_input(),
                                         work / "digits.onnx")  # fmt: skip
    names = work / "digits.txt"
    names.write_text("\n".join(str(d) for d in range(10)) + "\n")
    flags = ["--mean", "0.5", "--std", "0.5", "--class-names", str(names)]
    from_onnx = edgekit("export", "--model", str(onnx_file), *flags, "--target", "all",
                        "--recipe", "fp32,int8", "-o", str(work / "from-onnx"))  # fmt: skip
    direct = edgekit("export", "--target", "tflite,executorch", "--recipe", "int8",
                     "-o", str(work / "direct"))  # fmt: skip
    lines = [
        "`edgekit export --model digits.onnx --mean 0.5 --std 0.5 --class-names digits.txt "
        "--target all --recipe fp32,int8` (validated against the original graph in "
        "onnxruntime):",
        "",
        *_export_table(from_onnx),
        "",
        "The same int8 recipes from the torch source directly: "
        + "; ".join(
            f"{e['target']}/int8 SQNR {e['validation']['sqnr_db']:.1f} dB, agreement "
            f"{e['validation']['top1_agreement']:.3f}"
            for e in direct["artifacts"]
        )
        + ".",
    ]
    for entry in from_onnx["artifacts"]:
        if entry["recipe"] == "int8":
            [record] = edgekit("eval", str(work / "from-onnx" / entry["file"]["name"]))
            low, high = record["drop_ci"]
            lines.append(f"- {entry['target']}/int8 from digits.onnx: top-1 "
                         f"{100 * record['top1']:.2f} %, drop {record['drop_points']:+.2f} "
                         f"[{low:+.2f}, {high:+.2f}] points against the ONNX baseline")  # fmt: skip
    return lines


def block_profile() -> list[str]:
    """MobileNetV2's profile table and the explanations edgekit printed for it."""
    results = json.loads((HERE / "profile.json").read_text())["results"]
    chosen = next((r for r in results if r["model"] == "mobilenet_v2"), results[0])
    lines = [f"{chosen['model']}: profiling took {chosen['profile_s']:.0f} s against "
             f"{chosen['bench_s']:.0f} s to benchmark the same files "
             f"({chosen['cost_ratio']:.2f}x).", "",
             "| artifact | p50 ms | layers sum / p50 | top-3 layers |", "|---|---|---|---|"]  # fmt: skip
    for row in chosen["rows"]:
        cover = "" if row["coverage"] is None else f"{100 * row['coverage']:.0f} %"
        p50 = "" if row["p50_ms"] is None else f"{row['p50_ms']:.3f}"
        lines.append(f"| {row['label']} | {p50} | {cover} | {', '.join(row['top3'])} |")
    for row in chosen["rows"]:
        if row["recipe"] != "fp32" and row["explanation"]:
            lines += ["", f"`{row['label']}`:", *[f"- {line}" for line in row["explanation"]]]
    return lines


def block_cluster() -> list[str]:
    text = (HERE / "CLUSTER.md").read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("|"))
    end = next(i for i, line in enumerate(text[start:], start) if not line.startswith("|"))
    return text[start:end]


def block_run_tune(work: Path) -> list[str]:
    """``run --tune`` of the default model's fp32 files: the lines it printed per artifact and
    its report's section with both columns."""
    printed = edgekit("run", "--target", "all", "--recipe", "fp32", "--device", "cpu", "--tune",
                      "--no-profile", "--runs-dir", str(work / "tune-runs"), "--history",
                      str(work / "history.sqlite"), json_out=False)  # fmt: skip
    lines = [line for line in str(printed).splitlines() if line.startswith("tuned ")]
    (run_dir,) = (work / "tune-runs").iterdir()
    report = (run_dir / "report.md").read_text().split("## Tuned against default")[1]
    table = [line for line in report.split("\n## ")[0].splitlines() if line.startswith("|")]
    return ["```text", *lines, "```", "", *table]


def block_bench_memory(work: Path) -> list[str]:
    """``bench`` of the default model's three fp32 files: its memory table and the lines under
    it (where each planned figure comes from, what the residual holds)."""
    folder = work / "memory"
    edgekit("export", "--target", "all", "--recipe", "fp32", "-o", str(folder))
    files = sorted(str(path) for path in folder.iterdir() if path.suffix in (".tflite", ".pte",
                                                                               ".onnx"))  # fmt: skip
    printed = str(edgekit("bench", *files, json_out=False)).splitlines()
    start = next(i for i, line in enumerate(printed) if line.strip() == "memory (MB)")
    kept = [line.rstrip() for line in printed[start:]
            if line.strip() and not line.startswith(("warning", "hint", "  baseline"))]  # fmt: skip
    return ["```text", *kept, "```"]


def block_tune_summary() -> list[str]:
    """Per runtime, where its default was left behind (benchmarks/TUNE.md's summary)."""
    text = (HERE / "TUNE.md").read_text().splitlines()
    runtimes = ("- tflite:", "- executorch:", "- onnx:")
    return [line for line in text if line.startswith(runtimes)]


BLOCKS = {
    "accuracy": lambda work: block_accuracy(),
    "export": block_export,
    "arm64": block_arm64,
    "qdebug": lambda work: block_qdebug(),
    "aware": block_aware,
    "latency": lambda work: block_latency(),
    "gates": lambda work: block_file("GATES.md"),
    "reproduce": lambda work: block_file("REPRODUCIBILITY.md", summary="- **over "),
    "before-after": lambda work: block_file("BEFORE_AFTER.md", summary="Slower after"),
    "startup": lambda work: block_file("STARTUP.md"),
    "report": block_report,
    "foreign": block_foreign,
    "onnx-source": block_onnx_source,
    "profile": lambda work: block_profile(),
    "cluster": lambda work: block_cluster(),
    "run-tune": block_run_tune,
    "bench-memory": block_bench_memory,
    "tune-summary": lambda work: block_tune_summary(),
}


# blocks copied from a benchmark's own page: their provenance is that page's
RECORDED = {"gates": "GATES.md", "reproduce": "REPRODUCIBILITY.md",
            "before-after": "BEFORE_AFTER.md", "tune-summary": "TUNE.md",
            "startup": "STARTUP.md"}  # fmt: skip


def block_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- figures:{name} -->\n).*?(<!-- /figures:{name} -->)", re.S)


def page_of(name: str) -> Path:
    """The one page (README.md or docs/**.md) that holds block ``name``."""
    holders = [page for page in PAGES if block_pattern(name).search(page.read_text())]
    if len(holders) != 1:
        where = ", ".join(str(p.relative_to(ROOT)) for p in holders) or "no page"
        raise SystemExit(f"<!-- figures:{name} --> must be in exactly one page, found: {where}")
    return holders[0]


def replace_block(text: str, name: str, lines: list[str]) -> str:
    stamp = recorded_provenance(RECORDED[name]) if name in RECORDED else provenance()
    body = "\n".join([*lines, "", stamp]) + "\n"
    return block_pattern(name).sub(lambda match: match.group(1) + body + match.group(2), text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated block names")
    parser.add_argument("--skip-benchmarks", action="store_true")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BLOCKS)
    if not args.skip_benchmarks:
        for script in (
            "latency.py",
            "gate.py",
            "reproduce.py",
            "before_after.py",
            "startup.py",
            "layer_profile.py",
            "cluster.py",
            "tune.py",
            "coverage.py",
            "onnx_int8_formats.py",
        ):
            subprocess.run([sys.executable, str(HERE / script)], check=True)
    pages = {name: page_of(name) for name in names}  # every block found before anything runs
    with tempfile.TemporaryDirectory(prefix="edgekit-figures-") as tmp:
        work = Path(tmp)
        if any(name in names for name in ("arm64",)) and "export" not in names:
            names.insert(0, "export")
        for name in names:
            print(f"figures: {name}", flush=True)
            lines = BLOCKS[name](work)
            # each block lands as soon as it is made: a later block that fails loses nothing
            page = pages[name]
            write_bytes_atomic(page, replace_block(page.read_text(), name, lines).encode())
            print(f"wrote {page.relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    main()
