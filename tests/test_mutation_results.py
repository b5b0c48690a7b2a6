"""``make mutation``'s results stay bound to the code they judged: a scored module edited by
hand makes the check (``scripts/mutation_results.py --check``) fail in one line naming it, and
an accepted survivor is found by its function, operator and mutated text wherever its line
moves."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from cli_helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "mutation_results.py"


results = load_script("mutation_results")


SURVIVOR = {"line": 38, "function": "mcnemar", "operator": "core/ReplaceBinaryOperator_Add_BitOr",
            "mutated": "p = 1.0 if b | c == 0 else 2.0", "diff": ""}  # fmt: skip
ACCEPTED = (
    "[[accepted]]\nmodule = 'edgekit/common/stats.py'\nfunction = 'mcnemar'\n"
    "operator = 'core/ReplaceBinaryOperator_Add_BitOr'\n"
    "mutated = 'p = 1.0 if b | c == 0 else 2.0'\nwhy = 'counts are >= 0'\n"
)


def judged_checkout(into: Path, score: float = 0.95) -> Path:
    """The scored modules as the checkout holds them, and results that judged exactly them:
    each module's digest, a score, and one accepted survivor in stats.py."""
    modules = {}
    for name in results.MODULES:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, into / name)
        survivors = [SURVIVOR] if name == "edgekit/common/stats.py" else []
        modules[name] = {"score": score, "survivors": survivors,
                         "source_sha256": results.source_digest(into / name)}  # fmt: skip
    (into / results.RESULTS).parent.mkdir(parents=True, exist_ok=True)
    (into / results.RESULTS).write_text(json.dumps({"modules": modules}))
    (into / results.ACCEPTED).write_text(ACCEPTED)
    return into


def check(root: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "--check", "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_results_that_judged_the_code_as_it_is_pass(tmp_path):
    current = check(judged_checkout(tmp_path))
    assert current.returncode == 0 and current.stderr == ""


def test_a_module_edited_by_hand_fails_the_check_in_one_line_naming_it(tmp_path):
    root = judged_checkout(tmp_path)
    module = root / "edgekit" / "common" / "stats.py"
    module.write_text(module.read_text().replace("confidence", "confidence ", 1))
    edited = check(root)
    assert edited.returncode == 1
    assert edited.stderr.splitlines() == [
        "edgekit/common/stats.py: changed since make mutation judged it "
        "(make mutation ONLY=edgekit/common/stats.py)"
    ]


def test_an_acceptance_that_no_survivor_matches_is_named(tmp_path):
    root = judged_checkout(tmp_path)
    accepted = root / results.ACCEPTED
    accepted.write_text(accepted.read_text().replace("b | c == 0", "b | c <= 0"))
    stale = check(root)
    assert stale.returncode == 1
    assert stale.stderr.splitlines() == [
        "benchmarks/mutation_accepted.toml: edgekit/common/stats.py mcnemar "
        "core/ReplaceBinaryOperator_Add_BitOr `p = 1.0 if b | c <= 0 else 2.0` accepts no "
        "surviving mutant"
    ]


def test_a_score_below_the_target_fails_and_results_for_a_module_must_exist(tmp_path):
    low = check(judged_checkout(tmp_path / "low", score=0.85))
    assert low.returncode == 1 and len(low.stderr.splitlines()) == len(results.MODULES)
    assert "edgekit/common/stats.py: mutation score 85.0%, below 90%" in low.stderr
    missing = judged_checkout(tmp_path / "missing")
    (missing / results.RESULTS).write_text(json.dumps({"modules": {}}))
    lines = check(missing).stderr.splitlines()
    assert lines[0] == (
        "edgekit/common/stats.py: no mutation results in benchmarks/mutation.json "
        "(make mutation ONLY=edgekit/common/stats.py)"
    )


def test_a_survivor_is_keyed_by_its_function_operator_and_text_not_its_line():
    source = "class Pool:\n    def widest(self):\n        if self.n == 1:\n            return 0\n"
    diff = "--- a\n+++ b\n@@ -3 +3 @@\n-        if self.n == 1:\n+        if self.n  <= 1:\n"
    survivor = {"line": 3, "function": results.enclosing(source, 3),
                "operator": "core/ReplaceComparisonOperator_Eq_LtE",
                "mutated": results.mutated_text(diff)}  # fmt: skip
    assert survivor["function"] == "Pool.widest" and survivor["mutated"] == "if self.n <= 1:"
    moved = "\n\n" + source.replace("    def", "    # a comment\n    def")
    assert results.enclosing(moved, 6) == "Pool.widest"
    assert results.enclosing(source, 1) == "Pool" and results.enclosing("x = 1\n", 1) == "<module>"
    key = results.survivor_key("m.py", survivor | {"line": 40})
    assert key == (
        "m.py",
        "Pool.widest",
        "core/ReplaceComparisonOperator_Eq_LtE",
        survivor["mutated"],
    )
