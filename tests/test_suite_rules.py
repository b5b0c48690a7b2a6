"""Rules of the suite itself: no machine figure outside the `timing` phase. A measured time, noise
or latency compared with a number holds on one machine under one load; such a test is marked
`timing` (it runs alone, after the parallel phase) or its figure lives in benchmarks/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).parent

# fragments of a name that holds a measured figure; kept small on purpose, so that a hit is real
MEASURED = (
    "seconds", "elapsed", "_ms", "latency", "p50", "p90", "wall", "duration", "noise", "cv",
    "spread", "speedup", "ratio",
)  # fmt: skip
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# the documented escape: why the bound holds on any machine, e.g. a timeout edgekit enforces
ESCAPE = "# structural:"


def _nonzero_number(node: ast.expr) -> bool:
    """A numeric literal other than 0: against 0 a bound is a sign, true on any machine."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value != 0


def _measured_name(node: ast.expr) -> str | None:
    """The name a measured value goes by: a variable, an attribute, or a subscript's key."""
    if isinstance(node, ast.Name):
        text = node.id
    elif isinstance(node, ast.Attribute):
        text = node.attr
    elif isinstance(node, ast.Subscript):
        key = node.slice
        text = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ""
        text = text or (_measured_name(node.value) or "")
    else:
        return None
    words = text.lower()
    return text if any(re.search(rf"(^|_){f.strip('_')}", words) for f in MEASURED) else None


def _marks_timing(decorators: list[ast.expr]) -> bool:
    return any("mark.timing" in ast.unparse(d) for d in decorators)


def _module_marks_timing(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return "mark.timing" in ast.unparse(node.value)
    return False


def machine_figures(source: str, filename: str) -> list[str]:
    """``file:line`` of every ordering of a measured name against a number, outside a test
    marked `timing` and without the ``# structural:`` escape on its line."""
    tree = ast.parse(source)
    if _module_marks_timing(tree):
        return []
    lines = source.splitlines()
    timed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _marks_timing(
            node.decorator_list
        ):
            timed.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or node.lineno in timed:
            continue
        sides = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            left, right = sides[index], sides[index + 1]
            if not isinstance(op, ORDERING):
                continue
            pair = (left, right) if _nonzero_number(right) else (right, left)
            if _nonzero_number(pair[1]) and _measured_name(pair[0]):
                if ESCAPE not in lines[node.lineno - 1]:
                    hits.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
                break
    return hits


PLANTED = """
import pytest

def test_fast(run):
    seconds = run()
    assert seconds < 5.0
    assert result.stats["p50_ms"] <= 12
    assert 0.5 < record.noise_cv

def test_escaped(run):
    assert run.elapsed < 30  # structural: edgekit's own 30 s timeout kills it first

def test_plain(rows):
    assert len(rows) >= 2 and rows[0].count > 1
    assert 0 < rows[0]["p50_ms"]

@pytest.mark.timing
def test_measured(run):
    assert run().seconds < 5.0
"""


def test_the_check_catches_a_planted_machine_figure_and_honours_timing_and_the_escape():
    hits = machine_figures(PLANTED, "test_planted.py")
    assert [hit.split(":")[1] for hit in hits] == ["6", "7", "8"], hits
    timed_module = "import pytest\npytestmark = pytest.mark.timing\n" + PLANTED
    assert machine_figures(timed_module, "test_planted.py") == []


def test_no_test_bounds_a_measured_time_or_noise_outside_the_timing_phase():
    hits = []
    for path in sorted(TESTS.glob("test_*.py")):
        hits += machine_figures(path.read_text(), path.name)
    assert not hits, "a machine figure outside the timing phase:\n" + "\n".join(hits)
