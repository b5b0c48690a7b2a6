"""Where edgekit's Python source lives: the ``edgekit/`` folder, and the top-level folders that
are packages of edgekit (``targets/`` is ``edgekit.targets``), as pyproject's
``[tool.setuptools.package-dir]`` maps them. ``MAPPED`` is that table (a test keeps the two
equal); the code digest of the export cache and the layering tests walk the files from here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

MAPPED = {"edgekit.targets": "targets", "edgekit.quantize": "quantize"}


def package_folder(name: str) -> Path:
    """The folder a package of edgekit is imported from (installed or the checkout)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{name} is not an installed package")
    return Path(next(iter(spec.submodule_search_locations)))


def source_files() -> dict[str, Path]:
    """Every Python file of edgekit by its module name (``edgekit.targets.base``), the mapped
    folders included, in the order of the names."""
    found: dict[str, Path] = {}
    for package in ("edgekit", *MAPPED):
        root = package_folder(package)
        for path in root.rglob("*.py"):
            parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return dict(sorted(found.items()))
