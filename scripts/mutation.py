"""``make mutation``: cosmic-ray over the modules whose decisions users rely on, each against the
tests that exercise it. Runs in a copy of the working tree (cosmic-ray edits the file it
mutates; new test files not committed yet are copied too), with cosmic-ray in a venv of its own
(.venv-mutation) and the tests in the project's .venv. The tests must first pass on the
unmutated copy (``cosmic-ray baseline``). Where a module also drives runtimes, cosmic-ray's line
filter keeps the mutants to its deciding functions. Writes benchmarks/MUTATION.md and
benchmarks/mutation.json: the score per module, and every surviving mutant with its diff,
accepted ones with the reason (benchmarks/mutation_accepted.toml).

    .venv-mutation/bin/python scripts/mutation.py [--only edgekit/common/stats.py ...]
        [--jobs 2] [--timeout 120]

``--jobs`` copies work at once: modules side by side, or, with fewer modules than jobs, one
module's mutants spread over several copies (a cosmic-ray http-worker in each, each mutating
its own copy's file).

Each module's results carry the digest of the source mutated; scripts/mutation_results.py
(run by ``make test``) says when a module no longer has it.

A module's cosmic-ray session is kept in .mutation-sessions/ (named by the module and its
source's digest) until its results are written: a run that is stopped, or whose copies are
lost, goes on from the mutants already judged when started again on the same source."""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
from mutation_results import (
    ACCEPTED,
    MODULES,
    REPORT,
    RESULTS,
    TARGET,
    Target,
    enclosing,
    markdown,
    mutated_text,
    read_accepted,
    source_digest,
)

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
SESSIONS = ROOT / ".mutation-sessions"  # sessions in progress, outside the copies


ANNOTATION = "inside a type annotation"


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def copy_checkout(into: Path) -> None:
    """The working tree as git sees it: tracked files and new ones not ignored (a test written
    but not committed yet is scored too)."""
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run(listing, cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        source, target = ROOT / name.decode(), into / name.decode()
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def scope_lines(source: Path, names: tuple[str, ...]) -> list[str]:
    """The line ranges (``first-last``) of the named top-level functions and classes."""
    tree = ast.parse(source.read_text())
    found = {node.name: node for node in tree.body if hasattr(node, "name")}
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit(f"{source}: no top-level {', '.join(missing)} to mutate")
    return [f"{found[n].lineno}-{found[n].end_lineno}" for n in names]


def annotation_lines(source: Path) -> set[int]:
    """Lines inside type annotations, which ``from __future__ import annotations`` never
    evaluates: a mutant of their ``|`` changes no behaviour, so it is not run."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        for annotation in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if isinstance(annotation, ast.AST):
                lines.update(range(annotation.lineno, annotation.end_lineno + 1))
    return lines


def is_annotation_mutant(operator: str, line: int, annotations: set[int]) -> bool:
    return "BitOr" in operator and line in annotations


def skip_annotations(session: Path, source: Path) -> None:
    annotations = annotation_lines(source)
    with use_db(str(session), WorkDB.Mode.open) as db:
        skipped = []
        for item in db.pending_work_items:
            spec = item.mutations[0]
            if is_annotation_mutant(spec.operator_name, spec.start_pos[0], annotations):
                skipped.append(item.job_id)
        if skipped:
            result = WorkResult(output=ANNOTATION, worker_outcome=WorkerOutcome.SKIPPED)
            db.set_multiple_results(skipped, result)


def config_for(
    module: str, target: Target, timeout: float, work: Path, urls: list[str] | None = None
) -> str:
    # --noconftest: these tests need none of the session fixtures, and a mutant then costs
    # pytest's start and the tests, not torch's import
    tests = " ".join(target.tests)
    command = f"{PYTHON} -m pytest -x -q -p no:cacheprovider -p no:xdist --noconftest {tests}"
    config = (
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n'
    )
    if urls:  # one module's mutants spread over workers, each in a copy of its own
        listed = ", ".join(f'"{url}"' for url in urls)
        config += '[cosmic-ray.distributor]\nname = "http"\n'
        config += f"[cosmic-ray.distributor.http]\nworker-urls = [{listed}]\n"
    else:
        config += '[cosmic-ray.distributor]\nname = "local"\n'
    if target.scope:  # cosmic-ray's own line filter marks the rest skipped before exec
        ranges = ", ".join(f'"{r}"' for r in scope_lines(work / module, target.scope))
        config += f'[cosmic-ray.filters.line-filter.lines]\n"{module}" = [{ranges}]\n'
    return config


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def http_workers(copies: list[Path]) -> Iterator[list[str]]:
    """A cosmic-ray http-worker in each copy (it mutates that copy's file and runs the tests
    there), listening on localhost; their URLs while the block runs."""
    tools, workers, urls = Path(sys.executable).parent, [], []
    try:
        for copy in copies:
            port = free_port()
            command = [tools / "cosmic-ray", "http-worker", "--port", str(port)]
            env = dict(os.environ, PYTHONPATH=str(copy))
            quiet = subprocess.DEVNULL
            workers.append(subprocess.Popen(command, cwd=copy, stdout=quiet, stderr=quiet, env=env))
            urls.append((port, f"http://127.0.0.1:{port}"))
        for port, url in urls:
            deadline = time.monotonic() + 60.0
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"the cosmic-ray worker at {url} did not start in 60 s")
                time.sleep(0.2)
        yield [url for _, url in urls]
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait()


def mutate(
    module: str, target: Target, work: Path, timeout: float, workers: list[Path] | None = None
) -> dict:
    """``module``'s mutants against its tests in the copy ``work``; with ``workers`` (more
    copies), spread over an http-worker in each."""
    with contextlib.ExitStack() as stack:
        urls = stack.enter_context(http_workers(workers)) if workers else None
        return _mutate(module, target, work, timeout, urls)


def _mutate(
    module: str, target: Target, work: Path, timeout: float, urls: list[str] | None
) -> dict:
    print(f"mutating {module} against {', '.join(target.tests)}", flush=True)
    config = work / "cosmic-ray.toml"
    digest = source_digest(work / module)
    session = SESSIONS / f"{Path(module).stem}-{digest[:12]}.sqlite"
    config.write_text(config_for(module, target, timeout, work, urls))
    tools = Path(sys.executable).parent
    env = dict(os.environ, PYTHONPATH=str(work))  # the copy's edgekit, not the checkout's
    # the tests must pass on the code as it is: a command that fails anyway (a test file
    # missing, a broken fixture) would count every mutant as killed
    baseline = subprocess.run([tools / "cosmic-ray", "baseline", config], cwd=work, env=env)
    if baseline.returncode != 0:
        raise SystemExit(f"{module}: {', '.join(target.tests)} fail on the unmutated code")
    if session.is_file():  # an earlier run of this very source stopped: exec runs what is left
        print(f"{module}: going on from {session.relative_to(ROOT)}", flush=True)
    else:
        SESSIONS.mkdir(exist_ok=True)
        starting = session.with_suffix(".partial")  # renamed once every mutant is listed
        starting.unlink(missing_ok=True)
        run = [tools / "cosmic-ray", "init", config, starting]
        subprocess.run(run, cwd=work, env=env, check=True)
        if target.scope:
            subprocess.run([tools / "cr-filter-lines", "--config", config, starting], cwd=work,
                           env=env, check=True)  # fmt: skip
        skip_annotations(starting, work / module)
        starting.rename(session)
    subprocess.run([tools / "cosmic-ray", "exec", config, session], cwd=work, env=env, check=True)
    entry = summarize(session, target, (work / module).read_text())
    when = datetime.now(UTC).isoformat(timespec="minutes")
    session.unlink()  # judged whole: its results go into mutation.json
    return entry | {"when": when, "cpu": cpu_name(), "source_sha256": digest}


def summarize(session: Path, target: Target, source: str) -> dict:
    """Counts and survivors of a finished session; skipped mutants are out of scope. A
    survivor carries its enclosing function and mutated text, the key its acceptance is read
    by (``source`` is the unmutated module)."""
    counts = {outcome.value: 0 for outcome in TestOutcome}
    counts["out_of_scope"] = counts["annotations"] = 0
    survivors = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                counts["annotations" if result.output == ANNOTATION else "out_of_scope"] += 1
                continue
            outcome = result.test_outcome.value if result.test_outcome else "incompetent"
            counts[outcome] += 1
            if result.test_outcome == TestOutcome.SURVIVED:
                spec = item.mutations[0]
                line, diff = spec.start_pos[0], result.diff or ""
                survivors.append({"line": line, "function": enclosing(source, line),
                                  "operator": spec.operator_name,
                                  "mutated": mutated_text(diff), "diff": diff})  # fmt: skip
    judged = counts["killed"] + counts["survived"]
    return {"tests": list(target.tests), "scope": list(target.scope), **counts,
            "score": counts["killed"] / judged if judged else None,
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


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (a score can move with the CPU where a
    test's figures do)."""
    info = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
             if line.startswith("model name")] if info.is_file() else []  # fmt: skip
    return f"{names[0]}, {len(names)} cores" if names else platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a module of the list (repeatable)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    parser.add_argument("--jobs", type=int, default=1,
                        help="copies at work: modules, or one module's workers")  # fmt: skip
    parser.add_argument("--render", action="store_true",
                        help="only write MUTATION.md again from mutation.json")  # fmt: skip
    args = parser.parse_args()
    chosen = {m: t for m, t in MODULES.items() if not args.only or m in args.only}
    unknown = sorted(set(args.only or ()) - set(MODULES))
    if unknown or not chosen:
        raise SystemExit(f"--only {', '.join(unknown)}: not one of {', '.join(MODULES)}")
    accepted = read_accepted(ROOT)
    out = ROOT / RESULTS
    if args.render:  # the accepted list changed, not the code
        write_atomically(ROOT / REPORT, markdown(json.loads(out.read_text()), accepted))
        return
    results = json.loads(out.read_text()) if out.is_file() and args.only else {"modules": {}}
    # a copy of the tree per module, all made now: modules mutated side by side, each judged
    # against the tree as it was when the run began, whatever is edited meanwhile
    with ExitStack() as stack, ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        # fewer modules than jobs: each module's mutants spread over that many workers, each
        # in a copy of its own, beside the copy cosmic-ray's session runs in
        per_module = max(1, args.jobs // len(chosen))
        workers = per_module if per_module > 1 else 0
        copies: dict[str, list[Path]] = {}
        for module in chosen:
            copies[module] = [
                Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="edgekit-mutation-")))
                for _ in range(1 + workers)
            ]
        for work in (copy for listed in copies.values() for copy in listed):
            copy_checkout(work)
            check_copy_is_imported(work)
        judged = {
            m: pool.submit(mutate, m, t, copies[m][0], args.timeout, copies[m][1:] or None)
            for m, t in chosen.items()
        }
        for module, future in judged.items():
            results["modules"][module] = future.result()
    # the list's order, and only modules still on it
    results["modules"] = {m: results["modules"][m] for m in MODULES if m in results["modules"]}
    results["when"] = datetime.now(UTC).isoformat(timespec="minutes")
    write_atomically(out, json.dumps(results, indent=1) + "\n")
    write_atomically(ROOT / REPORT, markdown(results, accepted))
    scores = {module: entry["score"] for module, entry in results["modules"].items()}
    low = [module for module, score in scores.items() if score is not None and score < TARGET]
    print(f"wrote {REPORT}" + (f"; below {TARGET:.0%}: {low}" if low else "")
          + f"; survivors are accepted in {ACCEPTED}")  # fmt: skip
    sys.exit(1 if low else 0)


if __name__ == "__main__":
    main()
