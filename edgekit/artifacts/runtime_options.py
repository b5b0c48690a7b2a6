"""The tuned configuration in an artifact's manifest: ``runtime_options`` (the thread count and
the knobs' values, as the target's ``open`` takes them) and ``tuned`` (where, when and by how
much they won). Sessions of the device they were tuned on use them unless told not to."""

from __future__ import annotations

from typing import Any

from edgekit.errors import UserInputError
from edgekit.targets.knobs import checked_options
from edgekit.targets.manifest import Manifest


def tuned_options(manifest: Manifest, device: str) -> dict[str, Any]:
    """The knobs tuned for ``device`` (threads apart: the caller picks them), or {}."""
    options = manifest.get("runtime_options")
    tuned = manifest.get("tuned") or {}
    if not options or tuned.get("device") != device:
        return {}
    return {key: value for key, value in dict(options).items() if key != "threads"}


def tuned_threads(manifest: Manifest, device: str) -> int | None:
    options = manifest.get("runtime_options") or {}
    tuned = manifest.get("tuned") or {}
    return options.get("threads") if tuned.get("device") == device else None


def check_runtime_options(manifest: dict[str, Any], where: str) -> None:
    """A manifest's runtime_options: a table of the target's knobs and a thread count >= 1."""
    from edgekit.targets import get_target

    options = manifest.get("runtime_options")
    if options is None:
        return
    if not isinstance(options, dict):
        raise UserInputError(f"{where}: runtime_options must be a table")
    threads = options.get("threads", 1)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise UserInputError(f"{where}: runtime_options.threads must be an integer >= 1")
    knobs = get_target(manifest["target"]).tuning_knobs
    checked_options(knobs, {k: v for k, v in options.items() if k != "threads"}, where)
    if not isinstance(manifest.get("tuned"), dict) or "device" not in manifest["tuned"]:
        raise UserInputError(f"{where}: runtime_options needs a 'tuned' table naming its device")


def without_tuning(manifest: Manifest) -> Manifest:
    """The manifest as exported: ``--runtime-options default``."""
    fields = {k: v for k, v in manifest.to_dict().items() if k not in ("runtime_options", "tuned")}
    return Manifest(fields)
