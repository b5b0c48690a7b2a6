"""The conditions a block was timed in, read from Linux sysfs just before and just after it
(never inside it): the frequency and governor of the cores this process may run on, the thermal
zones' temperatures and trip points, and a Raspberry Pi firmware's throttle flags.

A block ran THROTTLED when the machine slowed itself meanwhile (``judge``): the fastest used
core's frequency fell, or its frequency cap was lowered, or a zone reached a trip point that
slows the chip, or the firmware says it throttled. Its time then measures the cooling, not the
model.

Stdlib only: the emulated guest and an edge board's bare Python run this very file.

The files, their units and where each is documented (tests/data/sysfs/README.md):
- ``cpuN/cpufreq`` links to the policy that drives cpuN (Documentation/admin-guide/pm/
  cpufreq.rst): ``scaling_cur_freq``, ``scaling_max_freq`` (the limit in force, which thermal
  cooling lowers) and ``cpuinfo_max_freq`` in kHz, ``scaling_governor`` a name;
- ``thermal_zoneN`` (Documentation/ABI/testing/sysfs-class-thermal): ``type``, ``temp`` and
  ``trip_point_M_temp`` in millidegrees Celsius, ``trip_point_M_type`` one of active, passive,
  hot, critical;
- the Raspberry Pi firmware node's ``get_throttled``: the word ``vcgencmd get_throttled``
  prints, in hex without ``0x``."""

from __future__ import annotations

import functools
import glob
import os
import statistics

CPU_DIR = "sys/devices/system/cpu"
THERMAL_DIR = "sys/class/thermal"
# "soc/soc:firmware" on the older boards, "soc@107c000000/soc@107c000000:firmware" on a Pi 5
FIRMWARE_GLOB = "sys/devices/platform/soc*/soc*:firmware/get_throttled"

# a fall of the fastest core's share of its maximum above this is a throttle; below it is how
# intel_pstate and schedutil report a busy core from one reading to the next
FELL_FRACTION = 0.10
# the trip types that slow the chip (passive: cpufreq cooling; hot, critical: the last resort);
# an active trip starts a fan, which slows nothing
SLOWING_TRIPS = ("passive", "hot", "critical")
# the bits of vcgencmd get_throttled: 0-3 now, 16-19 the same "has occurred" since boot
FIRMWARE_FLAGS = {
    0: "under-voltage",
    1: "arm frequency capped",
    2: "currently throttled",
    3: "soft temperature limit active",
    16: "under-voltage has occurred",
    17: "arm frequency capping has occurred",
    18: "throttling has occurred",
    19: "soft temperature limit has occurred",
}
NOW_MASK = 0xF
OCCURRED_MASK = 0xF0000


def _read(path: str) -> str | None:
    """A sysfs file's text; None where it is missing, unreadable or empty (a disabled zone)."""
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except (OSError, ValueError):
        return None
    return text or None


def _number(path: str) -> int | None:
    text = _read(path)
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _core_number(path: str) -> int | None:
    name = os.path.basename(os.path.dirname(path))  # .../cpu12/cpufreq -> cpu12
    return int(name[3:]) if name[3:].isdigit() else None


@functools.lru_cache(maxsize=16)
def _layout(root: str) -> tuple[tuple, tuple, str | None]:
    """What stays put while a process runs, read once: the cpufreq policies (their folder, the
    cores they drive and their label, the hardware maximum in kHz), the thermal zones (folder,
    name, trip points in °C with their types) and the firmware's throttle file."""
    policies: dict[str, list[tuple[int, str]]] = {}
    for link in glob.glob(os.path.join(root, CPU_DIR, "cpu[0-9]*", "cpufreq")):
        core = _core_number(link)
        if core is not None and os.path.isdir(link):
            name = os.path.basename(os.path.dirname(link))
            policies.setdefault(os.path.realpath(link), []).append((core, name))
    cpus = tuple(
        (
            folder,
            tuple(core for core, _ in sorted(cores)),
            _cores_label(sorted(cores)),
            _number(os.path.join(folder, "cpuinfo_max_freq")),
        )
        for folder, cores in sorted(policies.items(), key=lambda item: min(item[1]))
    )
    zones, names = [], set()
    for folder in sorted(
        glob.glob(os.path.join(root, THERMAL_DIR, "thermal_zone[0-9]*")),
        key=lambda path: (len(path), path),  # thermal_zone2 before thermal_zone10
    ):
        kind = _read(os.path.join(folder, "type")) or os.path.basename(folder)
        name = kind if kind not in names else f"{kind} ({os.path.basename(folder)})"
        names.add(name)
        zones.append((folder, name, _trips(folder)))
    found = sorted(glob.glob(os.path.join(root, FIRMWARE_GLOB)))
    return cpus, tuple(zones), found[0] if found else None


def _trips(folder: str) -> tuple[tuple[float, str], ...]:
    trips = []
    for path in glob.glob(os.path.join(folder, "trip_point_[0-9]*_temp")):
        milli = _number(path)
        kind = _read(path[: -len("temp")] + "type")
        # x86_pkg_temp's thresholds read 0 until someone sets them: no trip at all
        if milli is not None and milli > 0 and kind:
            trips.append((milli / 1000.0, kind))
    return tuple(sorted(trips))


def decode_throttled(raw: int) -> list[str]:
    """The names of the set bits of a ``get_throttled`` word, as vcgencmd's documentation
    gives them."""
    return [name for bit, name in FIRMWARE_FLAGS.items() if raw >> bit & 1]


def read_conditions(root: str = "/", cpus: list[int] | None = None) -> dict:
    """A snapshot of the machine's state: per cpufreq policy of the ``cpus`` in use (default:
    the cores this process may run on when ``root`` is this machine's, every core of a tree
    read from elsewhere) the current frequency, its cap and maximum in kHz and the governor;
    per thermal zone its temperature and trip points in °C; the firmware's throttle flags.
    ``readable`` is False, with a ``note``, where none of them exists (a VM). Never raises."""
    policies, zones, firmware = _layout(os.path.abspath(root))
    if cpus is None and os.path.abspath(root) == "/" and hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
    wanted = None if cpus is None else set(cpus)
    snapshot: dict = {"cpus": {}, "zones": {}, "firmware": None}
    for folder, cores, label, max_khz in policies:
        if wanted is not None and not wanted.intersection(cores):
            continue
        snapshot["cpus"][label] = {
            "cur_khz": _number(os.path.join(folder, "scaling_cur_freq")),
            "cap_khz": _number(os.path.join(folder, "scaling_max_freq")),
            "max_khz": max_khz,
            "governor": _read(os.path.join(folder, "scaling_governor")),
        }
    for folder, name, trips in zones:
        milli = _number(os.path.join(folder, "temp"))
        if milli is not None:  # a disabled zone reads empty or fails: it is left out
            snapshot["zones"][name] = {"temp_c": milli / 1000.0, "trips": [list(t) for t in trips]}
    text = _read(firmware) if firmware else None
    if text is not None:
        try:
            raw = int(text, 16)
            snapshot["firmware"] = {"raw": raw, "flags": decode_throttled(raw)}
        except ValueError:
            pass
    snapshot["readable"] = bool(snapshot["cpus"] or snapshot["zones"] or snapshot["firmware"])
    if not snapshot["readable"]:
        snapshot["note"] = not_readable_note(cpufreq=bool(policies), thermal=bool(zones))
    return snapshot


def not_readable_note(*, cpufreq: bool = False, thermal: bool = False) -> str:
    """Once per device: which of the sources this machine lacks."""
    missing = [what for what, has in (("cpufreq", cpufreq), ("thermal zones", thermal)) if not has]
    why = ", ".join(f"no {what}" for what in missing) or "nothing answered"
    return f"conditions: not readable on this machine ({why})"


def _cores_label(cores: list[tuple[int, str]]) -> str:
    """A policy's cores as sysfs names them: ``cpu0``, ``cpu0-3`` for a run of cores, else
    ``cpu0,cpu2``."""
    numbers = [core for core, _ in cores]
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{cores[0][1]}-{numbers[-1]}"
    return ",".join(name for _, name in cores)


def _share(policy: dict) -> float | None:
    """A policy's current frequency as a share of its own maximum (so a big and a little
    cluster compare), None where it is not read."""
    cur, top = policy.get("cur_khz"), policy.get("max_khz") or policy.get("cap_khz")
    return None if not cur or not top else cur / top


def _fastest(snapshot: dict) -> tuple[str, float] | None:
    shares = [(label, s) for label, p in snapshot["cpus"].items() if (s := _share(p)) is not None]
    return max(shares, key=lambda item: item[1]) if shares else None


def _mhz(khz: int | None) -> str:
    return "?" if khz is None else f"{khz / 1000:.0f}"


def _frequency_reason(before: dict, after: dict) -> str | None:
    for label, start in before["cpus"].items():
        end = after["cpus"].get(label, {})
        if start.get("cap_khz") and end.get("cap_khz") and end["cap_khz"] < start["cap_khz"]:
            return (
                f"frequency cap fell from {_mhz(start['cap_khz'])} to {_mhz(end['cap_khz'])} "
                f"MHz on {label}"
            )
    fastest, later = _fastest(before), _fastest(after)
    if fastest is None or later is None or later[1] >= fastest[1] - FELL_FRACTION:
        return None
    label = fastest[0]
    start, end = before["cpus"][label], after["cpus"].get(label, {})
    return (
        f"frequency fell from {_mhz(start.get('cur_khz'))} to {_mhz(end.get('cur_khz'))} MHz "
        f"on {label}"
    )


def _thermal_reason(before: dict, after: dict) -> str | None:
    for name, zone in after["zones"].items():
        start = before["zones"].get(name, {}).get("temp_c")
        hottest = max(zone["temp_c"], zone["temp_c"] if start is None else start)
        for trip_c, kind in zone["trips"]:
            if kind not in SLOWING_TRIPS or hottest < trip_c:
                continue
            if start is not None and start < trip_c <= zone["temp_c"]:
                return f"{name} crossed its {kind} trip {trip_c:.1f} °C ({zone['temp_c']:.1f} °C)"
            return f"{name} at {hottest:.1f} °C, at or above its {kind} trip {trip_c:.1f} °C"
    return None


def _firmware_reason(before: dict, after: dict) -> str | None:
    start = (before.get("firmware") or {}).get("raw", 0)
    end = (after.get("firmware") or {}).get("raw")
    if end is None:
        return None
    newly = end & ~start & OCCURRED_MASK  # a "has occurred" bit set during the block
    if (start | end) & NOW_MASK or newly:
        flags = decode_throttled((start | end) & NOW_MASK | newly)
        return f"firmware throttle flags 0x{end:x}: {', '.join(flags)}"
    return None


def judge(before: dict, after: dict) -> str | None:
    """Why the block timed between these two snapshots ran throttled, in one line; None when
    nothing read says so (or nothing could be read)."""
    if not before.get("readable") or not after.get("readable"):
        return None
    return (
        _firmware_reason(before, after)
        or _frequency_reason(before, after)
        or _thermal_reason(before, after)
    )


def block_conditions(before: dict, after: dict) -> dict:
    """What a block's reply carries (small: a round's replies go over a pipe): the fastest used
    core's MHz at each end, the governors, the hottest zone's °C and name, and ``judge``'s
    reason or None; or ``readable`` False with the note."""
    if not after.get("readable"):
        return {"readable": False, "note": after.get("note") or not_readable_note()}
    ends = [_fastest_mhz(before), _fastest_mhz(after)]
    temps = [
        (zone["temp_c"], name)
        for snapshot in (before, after)
        for name, zone in snapshot.get("zones", {}).items()
    ]
    hottest = max(temps) if temps else None
    return {
        "readable": True,
        "mhz": [m for m in ends if m is not None] or None,
        "governor": "/".join(
            sorted({p["governor"] for p in after["cpus"].values() if p.get("governor")})
        )
        or None,
        "max_c": None if hottest is None else round(hottest[0], 1),
        "zone": None if hottest is None else hottest[1],
        "throttled": judge(before, after),
    }


def _fastest_mhz(snapshot: dict) -> int | None:
    speeds = [p["cur_khz"] for p in snapshot.get("cpus", {}).values() if p.get("cur_khz")]
    return round(max(speeds) / 1000) if speeds else None


def summarize(blocks: list[dict | None]) -> dict | None:
    """A side's conditions over its blocks (each ``block_conditions``): min, median and max MHz,
    the governors, the hottest °C and its zone, how many blocks ran throttled; the note where
    nothing was readable; None where the runner reads none (a phone's)."""
    seen = [block for block in blocks if block]
    if not seen:
        return None
    readable = [block for block in seen if block.get("readable")]
    if not readable:
        return {"readable": False, "note": seen[0].get("note") or not_readable_note()}
    mhz = [m for block in readable for m in block.get("mhz") or []]
    temps = [(b["max_c"], b["zone"]) for b in readable if b.get("max_c") is not None]
    hottest = max(temps) if temps else None
    return {
        "readable": True,
        "mhz": None
        if not mhz
        else {"min": min(mhz), "median": statistics.median(mhz), "max": max(mhz)},
        "governors": sorted({b["governor"] for b in readable if b.get("governor")}),
        "max_c": None if hottest is None else hottest[0],
        "zone": None if hottest is None else hottest[1],
        "throttled_blocks": sum(1 for block in readable if block.get("throttled")),
    }
