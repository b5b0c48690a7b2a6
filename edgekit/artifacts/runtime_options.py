"""The tuned configuration in an artifact's manifest: ``runtime_options`` (the thread count and
the knobs' values, as the target's ``open`` takes them) and ``tuned`` (where, when and by how
much they won). Sessions of the device they were tuned on use them unless told not to."""

from __future__ import annotations

from typing import Any

from edgekit.common.machine import cpu_model
from edgekit.errors import UserInputError
from edgekit.targets.knobs import checked_options
from edgekit.targets.manifest import Manifest


def _tuned_here(manifest: Manifest, device: str) -> dict[str, Any]:
    """The runtime options tuned for ``device`` on this machine's CPU model, or {}: a file tuned
    on another machine opens with edgekit's defaults (``tuned_elsewhere`` says so)."""
    options = manifest.get("runtime_options")
    tuned = manifest.get("tuned") or {}
    if not options or tuned.get("device") != device or tuned.get("cpu_model") != cpu_model():
        return {}
    return dict(options)


def tuned_options(manifest: Manifest, device: str) -> dict[str, Any]:
    """The knobs tuned for ``device`` here (threads apart: the caller picks them), or {}."""
    return {k: v for k, v in _tuned_here(manifest, device).items() if k != "threads"}


def tuned_threads(manifest: Manifest, device: str) -> int | None:
    return _tuned_here(manifest, device).get("threads")


def tuned_p50(manifest: Manifest, device: str, threads: int, p50_ms: float) -> dict | None:
    """How a session's ``p50_ms`` of a file tuned here for ``device`` at ``threads`` compares
    with the p50 tune measured and its prediction interval, or None (not tuned so, or tuned
    before tune gave one)."""
    tuned = manifest.get("tuned") or {}
    interval, measured = tuned.get("p50_interval_ms"), tuned.get("p50_ms")
    if not _numbers(interval, 2) or not _numbers([measured], 1):
        return None  # not tuned so, or by a tune without one (or a hand-edited record)
    if tuned_threads(manifest, device) != threads:
        return None
    low, high = interval
    return {
        "p50_ms": measured,
        "interval_ms": [low, high],
        "when": tuned.get("when"),
        "within": low <= p50_ms <= high,
    }


def _numbers(value: object, count: int) -> bool:
    if not isinstance(value, list | tuple) or len(value) != count:  # a Manifest holds tuples
        return False
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def tuned_elsewhere(manifest: Manifest, device: str) -> str | None:
    """Where the file was tuned for ``device``, when that was another CPU model."""
    tuned = manifest.get("tuned") or {}
    here = tuned.get("cpu_model") == cpu_model()
    if manifest.get("runtime_options") and tuned.get("device") == device and not here:
        return str(tuned.get("cpu_model"))
    return None


def check_runtime_options(manifest: dict[str, Any], where: str) -> None:
    """A manifest's runtime_options: a table of the target's knobs and a thread count >= 1."""
    from edgekit.targets import get_target

    options = manifest.get("runtime_options")
    if options is None:
        return
    if not isinstance(options, dict):
        raise UserInputError(f"{where}: runtime_options must be a table")
    threads = options.get("threads", 1)
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 256:
        raise UserInputError(f"{where}: runtime_options.threads must be an integer, 1 to 256")
    knobs = get_target(manifest["target"]).tuning_knobs
    checked_options(knobs, {k: v for k, v in options.items() if k != "threads"}, where)
    if not isinstance(manifest.get("tuned"), dict) or "device" not in manifest["tuned"]:
        raise UserInputError(f"{where}: runtime_options needs a 'tuned' table naming its device")


def without_tuning(manifest: Manifest) -> Manifest:
    """The manifest as exported: ``--runtime-options default``."""
    fields = {k: v for k, v in manifest.to_dict().items() if k not in ("runtime_options", "tuned")}
    return Manifest(fields)
