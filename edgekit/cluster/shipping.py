"""What a cluster run sends to the nodes with its cells, so that a user's model loads on every
node as it loads where the command runs.

- **The model's code**, through Ray's runtime environment (``py_modules``). A
  ``package.module:factory`` model ships its top-level package's folder; a single-file module
  ships itself. Either way every module the model imported from the same folder (its
  project's own helpers) goes with it. Installed code (site-packages, the standard library,
  edgekit itself) is not shipped: each node has its own, and a row that cannot import a
  module says on which node and how to install it there. Ray applies ``.gitignore`` and
  ``.rayignore`` files in a shipped folder, and refuses one that zips to 512 MiB or more.
- **The state-dict file** a ``module:factory`` model loads (its ``weights`` load option),
  through the object store: each task writes it into its own folder and loads it from there.
  The artifacts' manifests still name the file on the driver, as a local run's do."""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

from edgekit.errors import EdgekitError, UserInputError
from edgekit.targets.manifest import Manifest

# code the nodes have already: edgekit (check_versions makes it the same release) and the
# driver's own entry point
NEVER_SHIPPED = frozenset({"edgekit", "__main__"})
# bytes no node imports; Ray already leaves out what .gitignore / .rayignore list
EXCLUDES = ["__pycache__/", "*.pyc", ".git/"]
JOIN = "`edgekit cluster join`"


class CannotImport(EdgekitError):
    """A node could not import a model's code: which node, and which top-level module."""

    def __init__(self, message: str, node: str, missing: str) -> None:
        super().__init__(message)
        self.node, self.missing = node, missing

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:
        # raised on a node, pickled back to the driver by Ray
        return type(self), (str(self), self.node, self.missing)


def factory_module(spec: str) -> str | None:
    """The module a ``module:factory`` spec imports; None for a zoo name or a model file."""
    from edgekit.sources import zoo

    if spec.startswith("zoo:") or spec in zoo.ZOO or ":" not in spec:
        return None
    name = spec.partition(":")[0]
    return name if all(part.isidentifier() for part in name.split(".")) else None


def code_to_ship(specs: list[str]) -> list[str]:
    """The files and folders (``py_modules`` entries) that hold the models' own code, found
    from what this process imported when it loaded them."""
    shipped: list[str] = []
    for spec in specs:
        name = factory_module(spec)
        top = None if name is None else name.partition(".")[0]
        location = None if top is None else module_location(sys.modules.get(top))
        if top in NEVER_SHIPPED or location is None or installed(location):
            continue
        for path in [location, *_imported_beside(location)]:
            if str(path) not in shipped:
                shipped.append(str(path))
    return shipped


def module_location(module: ModuleType | None) -> Path | None:
    """The source file of a top-level module, or its package's folder; None where there is
    no Python source to ship (built in, a compiled extension, a namespace package)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    if path.name == "__init__.py":
        return path.parent
    return path if path.suffix == ".py" else None


def installed(path: Path) -> bool:
    """Is ``path`` in this interpreter's standard library or site-packages?"""
    roots = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {*site.getsitepackages(), site.getusersitepackages()}
    return any(path.is_relative_to(Path(root).resolve()) for root in roots if root)


def _imported_beside(location: Path) -> list[Path]:
    """The other top-level modules this process imported from ``location``'s folder."""
    found = []
    for name, module in list(sys.modules.items()):
        if "." in name or name in NEVER_SHIPPED:
            continue
        path = module_location(module)
        if path is not None and path != location and path.parent == location.parent:
            found.append(path)
    return sorted(found)


def runtime_env(base: dict[str, Any], shipped: list[str]) -> dict[str, Any]:
    """The job's runtime environment: the one it had, with the models' code added."""
    return {
        **base,
        "py_modules": [*base.get("py_modules", []), *shipped],
        "excludes": [*base.get("excludes", []), *EXCLUDES],
    }


def install_hint(missing: str, shipped: list[str]) -> str:
    """How to get the top-level module ``missing`` onto a node that cannot import it, from what
    this process knows of it (its distribution, or where its source lies)."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    for dist in packages_distributions().get(missing, []):
        try:
            pinned = f"{dist}=={version(dist)}"
        except PackageNotFoundError:
            continue
        return f"install it there: pip install {pinned} into the Python of {JOIN}"
    location = module_location(sys.modules.get(missing))
    if location is not None and str(location) in shipped:
        return f"{location} was shipped with the run: see the node's Ray logs (runtime_env)"
    if location is not None:
        return (
            f"copy {location} there and add its folder to PYTHONPATH before {JOIN} "
            "(or keep it beside the model's module: edgekit ships that folder's modules)"
        )
    return f"install the package that provides {missing} into the Python of {JOIN} there"


def cannot_import(exc: UserInputError, spec: str, node: str) -> CannotImport | None:
    """``exc`` said as a node's failure to import the model's code, or None if it is not one."""
    # models._load_factory raises ``from None``: the ImportError stays as the context
    cause = exc.__context__
    if not isinstance(cause, ImportError):
        return None
    missing = (cause.name or factory_module(spec) or "").partition(".")[0]
    return CannotImport(f"{exc} on node {node}", node, missing)


def localized(model: dict[str, Any], weights: bytes | None, folder: Path) -> dict[str, Any]:
    """The model's description on this node: its weights written into ``folder``, and its
    load options pointing there."""
    options = dict(model.get("load_options") or {})
    if weights is None or "weights" not in options:
        return model
    path = folder / "weights" / Path(options["weights"]).name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(weights)
    return {**model, "load_options": {**options, "weights": str(path)}}


def with_source_options(manifest: Manifest, load_options: dict[str, Any]) -> Manifest:
    """A manifest whose source entry loads with ``load_options`` (the weights' path here, for
    a pool's baseline on a node; the driver's, for an artifact coming back)."""
    source = manifest.to_dict().get("source")
    if not source:
        return manifest
    return manifest.replace(source={**source, "load_options": dict(load_options)})
