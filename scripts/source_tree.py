"""Copy what a fresh clone holds for building edgekit into DEST: the build files, ``edgekit/``
and the top-level folders pyproject's package-dir maps into it. Without the checkout's
``*.egg-info``: setuptools would take a stale SOURCES.txt there for the sdist's file list, and
so ship a package the configuration leaves out. Used by scripts/wheel-smoke.sh and
tests/test_install.py."""

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")


def copy_source(destination: Path) -> None:
    destination.mkdir(parents=True)
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, destination / name)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = ["edgekit", *pyproject["tool"]["setuptools"]["package-dir"].values()]
    for folder in folders:
        shutil.copytree(ROOT / folder, destination / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip


if __name__ == "__main__":
    copy_source(Path(sys.argv[1]))
