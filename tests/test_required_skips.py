"""EDGEKIT_TEST_REQUIRE: in CI a test that skips for a capability the machine must have fails,
with the skip's reason; elsewhere it skips as before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import CAPABILITIES

ROOT = Path(__file__).resolve().parent.parent
CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
NEEDS_A_GPU = """
import pytest

@pytest.mark.gpu
def test_on_the_gpu():
    pytest.skip("no Vulkan driver here")

@pytest.mark.arm64
@pytest.mark.skipif(True, reason="arm64-emu is not set up")
def test_on_arm():
    pass

def test_plain():
    pytest.skip("not a capability")
"""


def _run(pytester: pytest.Pytester, monkeypatch, require: str | None):
    if require is None:
        monkeypatch.delenv("EDGEKIT_TEST_REQUIRE", raising=False)
    else:
        monkeypatch.setenv("EDGEKIT_TEST_REQUIRE", require)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: x\n    arm64: x\n")
    pytester.makepyfile(test_needs=NEEDS_A_GPU)
    return pytester.runpytest_inprocess("-rA")


def test_without_the_setting_a_missing_capability_skips_with_its_reason(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, None)
    result.assert_outcomes(skipped=3)


def test_a_required_capability_that_skips_fails_with_the_reason(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "gpu,arm64")
    # a skip in a fixture or a skipif fails as a setup error; a skip with no capability marker
    # fails too: in CI nothing may skip unexplained
    result.assert_outcomes(failed=2, errors=1, skipped=0)
    result.stdout.fnmatch_lines(
        [
            "*EDGEKIT_TEST_REQUIRE requires arm64, and this test skipped: *not set up*",
            "*EDGEKIT_TEST_REQUIRE requires gpu, and this test skipped: *no Vulkan driver here*",
            "*EDGEKIT_TEST_REQUIRE is set and this test skipped without a capability marker*"
            "not a capability*",
        ],
        consecutive=False,
    )


def test_ci_requires_every_capability_the_suite_knows():
    """.ci/run's EDGEKIT_TEST_REQUIRE names every capability of conftest: a new device's tests
    cannot skip in CI because nobody added it there."""
    ci = (ROOT / ".ci" / "run").read_text()
    found = re.search(r"EDGEKIT_TEST_REQUIRE=([\w,]+)", ci)
    assert found and set(found.group(1).split(",")) == set(CAPABILITIES)


def test_every_declared_marker_is_used_and_every_capability_declared():
    declared = {
        line.strip().strip('",').split(":")[0]
        for line in (ROOT / "pyproject.toml")
        .read_text()
        .split("markers = [")[1]
        .split("]")[0]
        .splitlines()
        if line.strip().startswith('"')
    }
    used = set()
    for path in (ROOT / "tests").glob("*.py"):
        used |= set(re.findall(r"pytest\.mark\.(\w+)", path.read_text()))
    assert declared - used == set(), "declared but no test carries it"
    assert set(CAPABILITIES) <= declared


def test_an_unknown_capability_is_an_error_not_ignored(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "gpu,tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*EDGEKIT_TEST_REQUIRE=gpu,tpu: unknown capability tpu*"])


def test_the_longest_files_are_collected_first_and_each_stays_whole(pytester):
    """The order pytest-xdist hands files to the workers in (``make test`` keeps it)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_a="def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
        test_training="def test_retrain():\n    pass\n",
        test_cluster="def test_nodes():\n    pass\n",
    )
    # in a process of its own: this worker has imported the suite's own test_cluster module
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.outlines[:4] == [
        "test_cluster.py::test_nodes",
        "test_training.py::test_retrain",
        "test_a.py::test_one",
        "test_a.py::test_two",
    ]


def test_every_file_named_longest_first_exists():
    from conftest import LONGEST_FILES_FIRST

    here = Path(__file__).parent
    assert [name for name in LONGEST_FILES_FIRST if not (here / name).is_file()] == []
