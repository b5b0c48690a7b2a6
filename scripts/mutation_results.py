"""What ``make mutation`` judged, and whether that still describes the code: the scored modules,
each module's source digest, survivors keyed so that a line move does not orphan them, the
accepted survivors (benchmarks/mutation_accepted.toml), and benchmarks/MUTATION.md.

Runs in either venv (it needs no cosmic-ray). ``make test`` runs it with ``--check``: one line
per scored module whose code changed since it was mutated, whose score is below the target, or
whose accepted survivor no longer survives, and exit 1.

    python scripts/mutation_results.py --check [--root DIR]"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path("benchmarks/mutation.json")
ACCEPTED = Path("benchmarks/mutation_accepted.toml")
REPORT = Path("benchmarks/MUTATION.md")
TARGET = 0.90


@dataclass(frozen=True)
class Target:
    """A module, the fast tests that hold its decisions (a mutant runs them all), and, where
    the module also drives runtimes, the functions that decide: mutants elsewhere are left to
    the integration tests, counted as out of scope and named in MUTATION.md."""

    tests: tuple[str, ...]
    scope: tuple[str, ...] = ()


MODULES = {
    "edgekit/common/stats.py": Target(("tests/test_stats.py", "tests/test_interleave.py")),
    "edgekit/common/budget.py": Target(("tests/test_recommend.py",)),
    "edgekit/measure/interleave.py": Target(("tests/test_interleave.py",)),
    "edgekit/report/recommend.py": Target(("tests/test_recommend.py",)),
    "edgekit/tune/search.py": Target(("tests/test_tune_search.py",)),
    # the gates' decisions; latency_regression drives three runtimes (test_bench, a timing test)
    "edgekit/measure/gates.py": Target(
        ("tests/test_gates.py",),
        (
            "GateResult",
            "accuracy_gates",
            "device_vs_host_gate",
            "format_gates",
            "run_accuracy_gates",
            "accuracy_records",
            "latency_decided",
            "run_latency_gates",
        ),
    ),
    # the loop and its choice; exporting, measuring and timing a step are the runtimes' work
    "edgekit/export/accuracy_aware.py": Target(
        ("tests/test_accuracy_aware_loop.py",),
        ("export_accuracy_aware", "_next_island", "_choose"),
    ),
}

Key = tuple[str, str, str, str]  # module, enclosing function, operator, mutated text


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def enclosing(source: str, line: int) -> str:
    """The qualified name of the innermost function or class around ``line`` (``<module>``
    outside any): with the operator and the mutated text, a key that survives line moves."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    around = [node for node in ast.walk(ast.parse(source)) if isinstance(node, kinds)
              and node.lineno <= line <= (node.end_lineno or node.lineno)]  # fmt: skip
    return ".".join(node.name for node in sorted(around, key=lambda n: n.lineno)) or "<module>"


def mutated_text(diff: str) -> str:
    """The mutant's own line(s) from cosmic-ray's diff, whitespace collapsed (indentation moves
    with the code; cosmic-ray's printer adds spaces of its own, as in ``sides[ -1]``)."""
    added = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return " / ".join(" ".join(ln.split()) for ln in added)


def survivor_key(module: str, survivor: dict) -> Key:
    """A survivor's key; results written before keys (by line) have no function: ``?``."""
    text = survivor.get("mutated") or mutated_text(survivor.get("diff", ""))
    return module, survivor.get("function", "?"), survivor["operator"], text


def read_accepted(root: Path = ROOT) -> dict[Key, str]:
    """The accepted survivors and why each is equivalent, by key."""
    path = root / ACCEPTED
    if not path.is_file():
        return {}
    entries = tomllib.loads(path.read_text()).get("accepted", [])
    return {(e["module"], e["function"], e["operator"], " ".join(e["mutated"].split())): e["why"]
            for e in entries}  # fmt: skip


def problems(root: Path = ROOT) -> list[str]:
    """One line per scored module whose results no longer describe it, and per accepted
    survivor that no current survivor matches."""
    results_file = root / RESULTS
    modules = json.loads(results_file.read_text())["modules"] if results_file.is_file() else {}
    found = []
    for module in MODULES:
        entry = modules.get(module)
        again = f"make mutation ONLY={module}"
        if entry is None:
            found.append(f"{module}: no mutation results in {RESULTS} ({again})")
        elif entry.get("source_sha256") != source_digest(root / module):
            found.append(f"{module}: changed since make mutation judged it ({again})")
        elif entry["score"] is not None and entry["score"] < TARGET:
            found.append(f"{module}: mutation score {entry['score']:.1%}, below {TARGET:.0%}")
    current = {survivor_key(m, s) for m, e in modules.items() for s in e.get("survivors", [])}
    for module, function, operator, text in read_accepted(root):
        if (module, function, operator, text) not in current and module in modules:
            found.append(f"{ACCEPTED}: {module} {function} {operator} `{text}` accepts no "
                         "surviving mutant")  # fmt: skip
    return found


def markdown(results: dict, accepted: dict[Key, str]) -> str:
    lines = [
        "# Mutation testing",
        "",
        f"Written by `make mutation` (cosmic-ray), last on {results['when']}; each module's row "
        "says when and on which CPU it was mutated, and the digest of the source it mutated "
        "(`make test` fails when a module no longer has it). Nothing here was written by hand. "
        "Score: killed / (killed + survived); incompetent mutants (that do not even "
        f"import) count for neither. Target: {TARGET:.0%} per module.",
        "",
        "A mutant of the `|` inside a type annotation is not run: `from __future__ import "
        "annotations` never evaluates one, so no test could tell it from the original; they are "
        "counted apart. The last column but two leaves out the survivors accepted below as "
        "equivalent, each with its reason. A survivor is accepted by its function, operator "
        "and mutated text, so the reason follows the code when lines move.",
        "",
        "Where a module also drives runtimes, only the functions named under scope are "
        "mutated: the rest is left to the integration tests, too slow to run once per mutant, "
        "and counted as out of scope.",
        "",
        "| module | scope | tests | mutants | out of scope | in annotations | killed | survived | "
        "accepted | incompetent | score | score, accepted left out | mutated | source sha256 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for module, entry in results["modules"].items():
        out, annotations = entry.get("out_of_scope", 0), entry.get("annotations", 0)
        total = entry["killed"] + entry["survived"] + entry["incompetent"] + out + annotations
        score = "-" if entry["score"] is None else f"{entry['score']:.1%}"
        taken = sum(survivor_key(module, s) in accepted for s in entry["survivors"])
        judged = entry["killed"] + entry["survived"] - taken
        net = f"{entry['killed'] / judged:.1%}" if judged else "-"
        scope = ", ".join(entry.get("scope") or []) or "the whole module"
        lines.append(f"| {module} | {scope} | {', '.join(entry['tests'])} | {total} | {out} | "
                     f"{annotations} | {entry['killed']} | {entry['survived']} | {taken} | "
                     f"{entry['incompetent']} | {score} | {net} | {entry['when']}, "
                     f"{entry['cpu']} | `{entry.get('source_sha256', '-')[:12]}` |")  # fmt: skip
    for module, entry in results["modules"].items():
        if not entry["survivors"]:
            continue
        lines += ["", f"## Survivors in {module}", ""]
        for survivor in entry["survivors"]:
            reason = accepted.get(survivor_key(module, survivor))
            lines.append(f"- `{survivor.get('function', '?')}`, line {survivor['line']}, "
                         f"{survivor['operator']}: "
                         + (f"accepted: {reason}" if reason else "**not accepted**"))  # fmt: skip
            diff = [ln for ln in survivor["diff"].splitlines() if ln.startswith(("-", "+"))]
            lines += ["", "  ```diff", *[f"  {ln}" for ln in diff if ln[:3] not in ("---", "+++")],
                      "  ```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say what is stale; exit 1 if any")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to check")
    args = parser.parse_args()
    if args.check:
        found = problems(args.root)
        for line in found:
            print(line, file=sys.stderr)
        if found:
            sys.exit(1)
        print(
            f"mutation results current for all {len(MODULES)} scored modules, each >= {TARGET:.0%}"
        )
        return
    parser.print_help()


if __name__ == "__main__":
    main()
