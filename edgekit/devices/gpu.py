"""The gpu device: what GPU a GPU delegate would run on here, and whether it is a real one.

Mesa's lavapipe (llvmpipe) is a software Vulkan device: LiteRT's GPU accelerator runs its real
code path and numerics there, but its latency is a CPU's, and every report must say so."""

from __future__ import annotations

import functools

from edgekit.doctor import vulkan_facts


@functools.cache
def software_vulkan() -> bool:
    """True when the only Vulkan devices here are software rasterisers (lavapipe/llvmpipe)."""
    return bool(vulkan_facts().get("software_only"))


def gpu_label() -> str:
    facts = vulkan_facts()
    names = ", ".join(facts.get("devices", [])) or "no Vulkan device"
    return f"{names} (software Vulkan, not a GPU speed)" if facts.get("software_only") else names
