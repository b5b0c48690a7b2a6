"""The packages, found: ``edgekit`` is one import package from three folders (pyproject.toml's
``package-dir``: ``edgekit.targets`` lives in targets/, ``edgekit.quantize`` in quantize/), and
``[tool.setuptools.packages.find]`` names what it finds by folder (``targets.onnx``), not by
the package a folder is mapped to. Everything else is in pyproject.toml."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
MAPPING = tomllib.loads((HERE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

setup(
    packages=[
        f"{package}.{found}" if found else package
        for package, folder in MAPPING.items()
        for found in ["", *find_packages(str(HERE / folder))]
    ]
)
