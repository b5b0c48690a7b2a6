"""The package list, which pyproject.toml cannot compute: ``edgekit`` and every package under it,
plus the top-level folders that pyproject's ``[tool.setuptools.package-dir]`` maps into it
(``targets/`` -> ``edgekit.targets``), each with its subpackages. ExecuTorch maps its
top-level ``backends/`` and ``exir/`` into ``executorch.*`` the same way."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
MAPPED = tomllib.loads((HERE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

packages = find_packages(include=["edgekit", "edgekit.*"])
for name, folder in MAPPED.items():
    packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]

setup(packages=packages)
