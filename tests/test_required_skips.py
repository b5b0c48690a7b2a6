"""EDGEKIT_TEST_REQUIRE: in CI a test that skips for a capability the machine must have fails,
with the skip's reason; elsewhere it skips as before."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import load_script
from conftest import CAPABILITIES, CAPABILITIES_LIST_ENV

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


def _run(pytester: pytest.Pytester, monkeypatch, require: str | None, *args: str):
    if require is None:
        monkeypatch.delenv("EDGEKIT_TEST_REQUIRE", raising=False)
    else:
        monkeypatch.setenv("EDGEKIT_TEST_REQUIRE", require)
    pytester.makeconftest(CONFTEST)
    if not (pytester.path / "long_tests.txt").exists():
        pytester.makefile(".txt", long_tests="# none\n")
    pytester.makeini("[pytest]\nmarkers =\n    gpu: x\n    arm64: x\n    long: x\n")
    pytester.makepyfile(test_needs=NEEDS_A_GPU)
    return pytester.runpytest_inprocess("-rA", *args)


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


def _required_by(script: str) -> set[str]:
    found = re.search(r"EDGEKIT_TEST_REQUIRE=([\w,]+)", (ROOT / ".ci" / script).read_text())
    assert found, f".ci/{script} sets no EDGEKIT_TEST_REQUIRE"
    return set(found.group(1).split(","))


def test_the_nightly_ci_requires_every_capability_the_suite_knows():
    """.ci/nightly runs every test: a new device's tests cannot skip there because nobody added
    its capability."""
    assert _required_by("nightly") == set(CAPABILITIES)


def test_each_push_requires_exactly_what_the_tests_it_runs_need(tmp_path):
    """.ci/run (`make test`: not the `long` tests) names each capability its tests carry, and no
    other, collected as make collects them; every test tests/long_tests.txt names exists."""
    listing = tmp_path / "capabilities"
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-m", "not long"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, CAPABILITIES_LIST_ENV: str(listing), "EDGEKIT_TEST_REQUIRE": ""},
    )  # fmt: skip
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    selection = json.loads(listing.read_text())
    assert _required_by("run") == set(selection["capabilities"])
    assert selection["no_test"] == [], "tests/long_tests.txt names tests that do not exist"


def test_a_selected_test_needing_a_capability_ci_does_not_name_stops_the_run(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "gpu")  # the arm64 test would skip, unseen
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*EDGEKIT_TEST_REQUIRE=gpu leaves out arm64, which tests*"])


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
    pytester.makefile(".txt", long_tests="")
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


def test_a_test_named_long_is_left_to_the_nightly_and_its_capability_with_it(pytester, monkeypatch):
    """`make test` selects "not long": the arm64 test named long no longer runs, so a push CI
    that requires only gpu collects without the usage error, and the plain test still runs."""
    pytester.makefile(".txt", long_tests="test_needs.py::test_on_arm  # 11 min\n")
    result = _run(pytester, monkeypatch, "gpu", "-m", "not long")
    result.assert_outcomes(failed=2, passed=0, deselected=1)  # gpu and plain: their skips fail
    result.stdout.fnmatch_lines(
        ["FAILED test_needs.py::test_on_the_gpu*", "FAILED test_needs.py::test_plain*"]
    )


def test_every_file_named_longest_first_exists():
    from conftest import LONGEST_FILES_FIRST

    here = Path(__file__).parent
    assert [name for name in LONGEST_FILES_FIRST if not (here / name).is_file()] == []


def test_suite_times_reads_the_seconds_of_each_file_and_test_from_a_junit_file(
    pytester, capsys, tmp_path
):
    """What tests/long_tests.txt and LONGEST_FILES_FIRST are read from."""
    suite_times = load_script("suite_times")
    pytester.makepyfile(
        test_fast="def test_one():\n    pass\n",
        test_slow="import time\n\ndef test_sleeps():\n    time.sleep(0.3)\n",
    )
    junit = tmp_path / "suite.xml"
    pytester.runpytest_inprocess(f"--junitxml={junit}", "-p", "no:cacheprovider")
    capsys.readouterr()  # the inner run's own output
    seconds = suite_times.test_seconds(junit)
    assert set(seconds) == {"test_fast.py::test_one", "test_slow.py::test_sleeps"}
    assert seconds["test_slow.py::test_sleeps"] >= 0.3  # structural: it sleeps that long
    assert suite_times.main([str(junit), "--tests", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("2 tests, ") and printed[-1].endswith("test_slow.py::test_sleeps")
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite")
    assert suite_times.main([str(broken)]) == 2
    assert capsys.readouterr().err.startswith(f"{broken}: not a junit file pytest wrote")
