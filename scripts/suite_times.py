"""Where the suite's time goes, from a pytest junit file: seconds per test file, longest first,
and the slowest tests. The order of ``LONGEST_FILES_FIRST`` (tests/conftest.py) and the choice of
the ``long`` tests (``make test`` leaves them to ``make test-all``) are read from it.

    .venv/bin/pytest -n 2 --dist loadfile -m "not timing" --junitxml=suite.xml
    .venv/bin/python scripts/suite_times.py suite.xml [--tests 40]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path


def test_seconds(junit: Path) -> dict[str, float]:
    """Each test's seconds (setup, call and teardown), by ``file::name``."""
    seconds: dict[str, float] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        # classname is tests.test_x, or tests.test_x.TestClass for a test in a class
        files = [part for part in case.get("classname", "").split(".") if part.startswith("test_")]
        name = f"{files[-1] if files else '?'}.py::{case.get('name')}"
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time") or 0.0)
    return seconds


def file_seconds(seconds: dict[str, float]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for name, taken in seconds.items():
        totals[name.split("::")[0]] += taken
    return dict(totals)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--tests", type=int, default=40, help="how many of the slowest tests")
    args = parser.parse_args(argv)
    try:
        seconds = test_seconds(args.junit)
    except (OSError, ElementTree.ParseError) as exc:
        print(f"{args.junit}: not a junit file pytest wrote ({exc})", file=sys.stderr)
        return 2
    total = sum(seconds.values())
    print(f"{len(seconds)} tests, {total:.0f} worker-seconds")
    print("\nper file, longest first:")
    for name, taken in sorted(file_seconds(seconds).items(), key=lambda kv: -kv[1]):
        print(f"{taken:8.1f} s  {name}")
    print(f"\nthe {args.tests} slowest tests:")
    for name, taken in sorted(seconds.items(), key=lambda kv: -kv[1])[: args.tests]:
        print(f"{taken:8.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
