"""``make mutation``: cosmic-ray over the modules whose decisions users rely on, each against the
tests that exercise it. Runs in a copy of the checkout (cosmic-ray edits the file it mutates),
with cosmic-ray in a venv of its own (.venv-mutation) and the tests in the project's .venv.
Writes benchmarks/MUTATION.md and benchmarks/mutation.json: the score per module, and every
surviving mutant with its diff, accepted ones with the reason (benchmarks/mutation_accepted.toml).

    .venv-mutation/bin/python scripts/mutation.py [--only edgekit/common/stats.py] [--timeout
    120]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
# each module and the tests that hold its decisions (the fast ones: a mutant runs them all)
MODULES = {
    "edgekit/common/stats.py": ["tests/test_stats.py", "tests/test_interleave.py"],
    "edgekit/measure/interleave.py": ["tests/test_interleave.py"],
    "edgekit/report/recommend.py": ["tests/test_report.py"],
}
TARGET = 0.80


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def copy_checkout(into: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.split(b"\0")  # fmt: skip
    for name in filter(None, files):
        source, target = ROOT / name.decode(), into / name.decode()
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def config_for(module: str, tests: list[str], timeout: float) -> str:
    # --noconftest: these tests need none of the session fixtures, and a mutant then costs
    # pytest's start and the tests, not torch's import
    command = (
        f"{PYTHON} -m pytest -x -q -p no:cacheprovider -p no:xdist --noconftest {' '.join(tests)}"
    )
    return (
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def mutate(module: str, tests: list[str], work: Path, timeout: float) -> dict:
    config, session = work / "cosmic-ray.toml", work / f"{Path(module).stem}.sqlite"
    config.write_text(config_for(module, tests, timeout))
    tools = Path(sys.executable).parent
    env = dict(os.environ, PYTHONPATH=str(work))  # the copy's edgekit, not the checkout's
    subprocess.run([tools / "cosmic-ray", "init", config, session], cwd=work, env=env, check=True)
    subprocess.run([tools / "cosmic-ray", "exec", config, session], cwd=work, env=env, check=True)
    counts = {outcome.value: 0 for outcome in TestOutcome}
    survivors = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            outcome = result.test_outcome.value if result.test_outcome else "incompetent"
            counts[outcome] += 1
            if result.test_outcome == TestOutcome.SURVIVED:
                spec = item.mutations[0]
                survivors.append({"line": spec.start_pos[0], "operator": spec.operator_name,
                                  "diff": result.diff or ""})  # fmt: skip
    judged = counts["killed"] + counts["survived"]
    return {"tests": tests, **counts, "score": counts["killed"] / judged if judged else None,
            "survivors": sorted(survivors, key=lambda s: s["line"])}  # fmt: skip


def check_copy_is_imported(work: Path) -> None:
    """The tests must import the mutated copy: a mutant the checkout answers for is no test."""
    where = subprocess.run(
        [PYTHON, "-c", "import edgekit.common.stats as m; print(m.__file__)"],
        cwd=work, env=dict(os.environ, PYTHONPATH=str(work)), capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    if not where.startswith(str(work)):
        raise SystemExit(f"the tests import edgekit from {where}, not from the copy {work}")


def markdown(results: dict, accepted: dict) -> str:
    lines = [
        "# Mutation testing",
        "",
        f"Written by `make mutation` (cosmic-ray) on {results['when']}; nothing here was written "
        "by hand. Score: killed / (killed + survived); incompetent mutants (that do not even "
        f"import) count for neither. Target: {TARGET:.0%} per module.",
        "",
        "The last column leaves out the survivors accepted below as equivalent (a mutant no "
        "test can tell from the original, such as one inside a type annotation, which "
        "`from __future__ import annotations` never evaluates).",
        "",
        "| module | tests | mutants | killed | survived | accepted | incompetent | score | "
        "score, accepted left out |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for module, entry in results["modules"].items():
        total = entry["killed"] + entry["survived"] + entry["incompetent"]
        score = "-" if entry["score"] is None else f"{entry['score']:.1%}"
        taken = sum(f"{module}:{s['line']}:{s['operator']}" in accepted for s in entry["survivors"])
        judged = entry["killed"] + entry["survived"] - taken
        net = f"{entry['killed'] / judged:.1%}" if judged else "-"
        lines.append(f"| {module} | {', '.join(entry['tests'])} | {total} | {entry['killed']} | "
                     f"{entry['survived']} | {taken} | {entry['incompetent']} | {score} | "
                     f"{net} |")  # fmt: skip
    for module, entry in results["modules"].items():
        if not entry["survivors"]:
            continue
        lines += ["", f"## Survivors in {module}", ""]
        for survivor in entry["survivors"]:
            key = f"{module}:{survivor['line']}:{survivor['operator']}"
            reason = accepted.get(key)
            lines.append(f"- line {survivor['line']}, {survivor['operator']}: "
                         + (f"accepted: {reason}" if reason else "**not accepted**"))  # fmt: skip
            diff = [ln for ln in survivor["diff"].splitlines() if ln.startswith(("-", "+"))]
            lines += ["", "  ```diff", *[f"  {ln}" for ln in diff if ln[:3] not in ("---", "+++")],
                      "  ```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one module of the list")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    parser.add_argument("--render", action="store_true",
                        help="only write MUTATION.md again from mutation.json")  # fmt: skip
    args = parser.parse_args()
    chosen = {m: t for m, t in MODULES.items() if args.only in (None, m)}
    if not chosen:
        raise SystemExit(f"--only {args.only}: not one of {', '.join(MODULES)}")
    accepted_file = ROOT / "benchmarks" / "mutation_accepted.toml"
    accepted = tomllib.loads(accepted_file.read_text()) if accepted_file.is_file() else {}
    out = ROOT / "benchmarks" / "mutation.json"
    if args.render:  # the accepted list changed, not the code
        write_atomically(ROOT / "benchmarks" / "MUTATION.md",
                         markdown(json.loads(out.read_text()), accepted))  # fmt: skip
        return
    results = json.loads(out.read_text()) if out.is_file() and args.only else {"modules": {}}
    with tempfile.TemporaryDirectory(prefix="edgekit-mutation-") as tmp:
        work = Path(tmp)
        copy_checkout(work)
        check_copy_is_imported(work)
        for module, tests in chosen.items():
            print(f"mutating {module} against {', '.join(tests)}", flush=True)
            results["modules"][module] = mutate(module, tests, work, args.timeout)
    results["when"] = datetime.now(UTC).isoformat(timespec="minutes")
    write_atomically(out, json.dumps(results, indent=1) + "\n")
    write_atomically(ROOT / "benchmarks" / "MUTATION.md", markdown(results, accepted))
    scores = {module: entry["score"] for module, entry in results["modules"].items()}
    low = [module for module, score in scores.items() if score is not None and score < TARGET]
    print("wrote benchmarks/MUTATION.md" + (f"; below {TARGET:.0%}: {low}" if low else ""))
    sys.exit(1 if low else 0)


if __name__ == "__main__":
    main()
