"""A griffe extension for the API pages: the top-level folders pyproject's package-dir maps into
edgekit (``targets/`` is ``edgekit.targets``) loaded as edgekit's own subpackages. griffe's
finder looks for ``edgekit.targets`` under ``edgekit/`` only (it reads no package-dir), so
``::: edgekit.targets.manifest.Manifest`` could not be found without this."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
MAPPED = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


class MappedPackages(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for name, folder in MAPPED.items():
            package, _, child = name.rpartition(".")
            if package != pkg.path or child in pkg.members:
                continue
            files = sorted((ROOT / folder).rglob("*.py"), key=lambda p: len(p.parts))
            for path in files:
                inside = path.relative_to(ROOT / folder).with_suffix("").parts
                parts = (child, *(part for part in inside if part != "__init__"))
                # griffe's own submodule loading, given the mapped folder's files (private API
                # of the pinned griffelib: tests/test_docs.py builds the site with it)
                loader._load_submodule(pkg, parts, path)
