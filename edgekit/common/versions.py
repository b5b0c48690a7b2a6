"""Versions of the packages edgekit itself runs on, read from installed metadata. Each target
lists its own packages (``Target.packages``; ``edgekit.targets.runtime_versions``)."""

from __future__ import annotations

import platform
from importlib import metadata

from edgekit import __version__

CORE_PACKAGES = ("torch", "numpy", "scipy")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def tool_versions(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Python and edgekit's core packages, plus ``extra`` (the targets' runtime versions)."""
    # edgekit's own from the package, not the metadata: the distribution is named edgekit-bench
    versions = {"python": platform.python_version(), "edgekit": __version__}
    for name in CORE_PACKAGES:
        version = package_version(name)
        if version is not None:
            versions[name] = version
    versions.update(extra or {})
    return versions
