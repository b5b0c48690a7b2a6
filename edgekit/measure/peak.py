"""The machine's matmul peaks, the yardstick for "% of peak" (a row's achieved GFLOP/s or GOP/s
over the peak of the arithmetic it runs).

A peak is the best rate of several GEMM kernels of that arithmetic, each the best of repeated
calls (a peak is an upper bound, so best-of, not the median). Each target package contributes
its runtime's kernels (``targets/<name>/peak.py``, named by its ``Target.peak_module``; the
shared ``Kernel`` is in ``edgekit.targets.peak_kernels``);
today:

- fp32: onnxruntime's MLAS ``MatMul`` at 512^3, 1024^3 and 2048^3, and XNNPACK's fp32 GEMM as
  LiteRT runs it (a one-op ``FULLY_CONNECTED`` model) at 512^3 and 1024^3;
- int8: MLAS ``MatMulInteger`` (u8 x s8) and XNNPACK's qs8 ``FULLY_CONNECTED`` through LiteRT,
  each at 512^3 and 1024^3;
- fp16: XNNPACK's F16 GEMM as ExecuTorch runs it (a float16 ``nn.Linear`` lowered to XNNPACK)
  at 512^3 and 1024^3, the kernels an ExecuTorch fp16 artifact runs. LiteRT's fp16 files keep
  fp16 weights behind DEQUANTIZE and compute in fp32, and onnxruntime's CPU EP casts fp16 back:
  those rows divide by the fp32 peak (``arithmetic_of`` goes by what the file computes in).

The kernels run in a child process (``python -m edgekit.measure.peak THREADS...``), once per machine
fingerprint (those kernels' runtime versions included) and thread count, cached in
``cache_dir()/peaks/<fingerprint id>.json`` (``edgekit.measure.peak_cache``): two commands on one
machine divide by the same peak. A row faster than the peak raises the cached peak to its own
rate and is named as what gave it: no share is ever above 100 %. numpy's BLAS is not used:
where ``OPENBLAS_CORETYPE`` pins OpenBLAS to older kernels it reports half what the runtimes
reach."""

from __future__ import annotations

import contextlib
import importlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.common.machine import differing_fields, fingerprint
from edgekit.measure.peak_cache import cache_path, locked, read_entries, write_entries
from edgekit.report.peaks import FIELDS
from edgekit.targets.peak_kernels import Kernel

if TYPE_CHECKING:
    from edgekit.results import Row

ARITHMETICS = ("fp32", "fp16", "int8")
RUN_ORDER = ("fp32", "int8", "fp16")  # fp16 (torch, ExecuTorch's process-wide pool) runs last


def all_kernels() -> tuple[Kernel, ...]:
    """Every registered target's peak kernels: its ``peak_module``'s ``kernels()`` (a target
    without one has none). Several sizes each, since which is fastest depends on the caches and
    the thread count (on a shared 2-core VM 512^3 won most times); all of them take about 2.5 s
    a thread count there, plus the child's imports."""
    from edgekit.targets import get_target, target_names

    made: list[Kernel] = []
    for name in target_names():
        module = get_target(name).peak_module
        if module:
            made += importlib.import_module(module).kernels()
    rank = {arithmetic: i for i, arithmetic in enumerate(RUN_ORDER)}
    return tuple(sorted(made, key=lambda kernel: rank.get(kernel.arithmetic, len(rank))))


def peak_packages() -> tuple[str, ...]:
    """The distributions whose kernels the peaks time (their versions are in the fingerprint)."""
    return tuple(dict.fromkeys(k.package for k in all_kernels() if k.package))


def measure_kernels(threads: int, kernels: Iterable[Kernel] | None = None) -> dict[str, Any]:
    """Every kernel's best rate at ``threads`` (default: ``all_kernels``), and each
    arithmetic's peak: the best of them. A kernel that cannot run here (a runtime missing) is
    recorded with its reason and skipped."""
    started = time.perf_counter()
    rates: dict[str, dict[str, Any]] = {}
    for kernel in all_kernels() if kernels is None else kernels:
        try:
            rates[kernel.name] = {"arithmetic": kernel.arithmetic, "rate": kernel.rate(threads)}
        except Exception as exc:  # one runtime's failure must not cost the other peaks
            reason = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
            rates[kernel.name] = {"arithmetic": kernel.arithmetic, "rate": None, "error": reason}
    peaks = {}
    for arithmetic in ARITHMETICS:
        ran = {name: k["rate"] for name, k in rates.items() if k["arithmetic"] == arithmetic}
        ran = {name: rate for name, rate in ran.items() if rate is not None}
        if ran:
            best = max(ran, key=ran.__getitem__)
            peaks[arithmetic] = {"rate": ran[best], "kernel": best, "raised_by": None}
    return {
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": time.perf_counter() - started,
        "kernels": rates,
        "peaks": peaks,
    }


# --- which peak a row divides by -----------------------------------------------------------------


def arithmetic_of(recipe: str, int8_share: float | None, fp16_share: float | None = None) -> str:
    """Which peak a row's achieved rate divides by: ``int8`` where an int8 recipe runs most of
    its compute ops (or MACs) in int8, ``fp16`` where most MACs compute in float16 (ExecuTorch's
    fp16: XNNPACK F16 kernels), ``fp32`` otherwise (an int8-dynamic onnx file runs its
    convolutions in fp32; LiteRT and onnxruntime fp16 files compute in fp32)."""
    if recipe.startswith("int8") and (int8_share or 0.0) >= 0.5:
        return "int8"
    return "fp16" if (fp16_share or 0.0) >= 0.5 else "fp32"


def shares_of(audit: dict[str, Any] | None) -> tuple[float, float]:
    """(int8, fp16) shares of a file's MACs, from its audit (the census the export read): which
    arithmetic a row's rate is divided by. One figure for every file, edgekit's or another
    tool's (the coverage's int8 share counts ops; the peak is about the work, the MACs)."""
    compute = (audit or {}).get("compute") or {}
    shares = (float((compute.get(kind) or {}).get("mac_share", 0.0)) for kind in ("int8", "fp16"))
    return next(shares), next(shares)


# --- the cache ---------------------------------------------------------------------------------


def peak_fingerprint() -> dict[str, Any]:
    """This machine's fingerprint with the versions of the runtimes whose kernels are timed."""
    versions = {}
    for package in peak_packages():
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return fingerprint(versions=versions)


class MachinePeaks:
    """This machine's peaks at some thread counts, read from the cache or measured into it.
    ``place`` gives rows their share of the peak, raising it where a row is faster."""

    def __init__(self, machine: dict[str, Any], entries: dict[str, dict[str, Any]]) -> None:
        self.machine = machine
        self.entries = entries
        self._placed: list[Row] = []

    @classmethod
    def load(
        cls,
        threads: Iterable[int],
        say: Callable[[str], None] | None = None,
        measure: Callable[[list[int]], dict[str, dict[str, Any]]] | None = None,
    ) -> MachinePeaks:
        """The cached peaks of every thread count, measuring (and caching) the missing ones
        with ``measure`` (thread counts -> entries; default: ``measure_in_child``)."""
        machine = peak_fingerprint()
        path = cache_path(machine)
        with locked(path):
            entries = read_entries(path, machine)
            missing = [t for t in dict.fromkeys(int(t) for t in threads) if str(t) not in entries]
            if missing:
                listed = ", ".join(map(str, missing))
                if say:
                    say(f"measuring the machine's matmul peaks at {listed} thread(s), once")
                measured = (measure or measure_in_child)(missing)
                entries.update({str(t): measured[str(t)] for t in missing})
                write_entries(path, machine, entries)
        return cls(machine, entries)

    @property
    def path(self) -> Path:
        return cache_path(self.machine)

    def peak(self, threads: int | str | None, arithmetic: str) -> float | None:
        entry = self.entries.get(str(threads)) or {}
        return (entry.get("peaks", {}).get(arithmetic) or {}).get("rate")

    def figures(self) -> dict[str, dict[str, float]]:
        """``run["peaks"]``: by thread count, ``fp32_gflops``, ``fp16_gflops``, ``int8_gops``."""
        return {
            threads: {FIELDS[a]: p["rate"] for a, p in entry["peaks"].items() if a in FIELDS}
            for threads, entry in self.entries.items()
        }

    def kernels(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``run["peak_kernels"]``: what gave each peak (a kernel, or the row that raised it)."""
        return {threads: entry["peaks"] for threads, entry in self.entries.items()}

    def share(
        self, threads: int | None, arithmetic: str, rate: float, by: str, label: str
    ) -> float | None:
        """``rate`` over the peak, raising the peak (here and in the cache) to ``rate`` where it
        is faster: ``by`` names what ran (a row's key), ``label`` how the report names it."""
        peak = self.peak(threads, arithmetic)
        if peak is None:
            return None
        if rate > peak:
            self._raise(str(threads), arithmetic, rate, by, label)
            peak = self.peak(threads, arithmetic)
        return rate / peak

    def place(self, row: Row) -> None:
        """Set ``row.peak_fraction`` (from ``row.gflops`` and ``row.peak_kind``). A row measured
        on another machine gets none; every placed row of the same peak is rescaled when a
        later row raises it, so all rows of a run divide by one peak."""
        foreign = set(differing_fields(row.fingerprint, self.machine)) - {"threads", "versions"}
        if row.gflops is None or row.peak_kind is None or (row.fingerprint and foreign):
            return
        label = f"{row.name} row" + (f" ({row.model})" if row.model else "")
        before = self.peak(row.threads, row.peak_kind)
        row.peak_fraction = self.share(row.threads, row.peak_kind, row.gflops, row.key, label)
        self._placed.append(row)
        after = self.peak(row.threads, row.peak_kind)
        if before is not None and after != before:
            for other in self._placed:
                if (other.threads, other.peak_kind) == (row.threads, row.peak_kind):
                    other.peak_fraction = other.gflops / after

    def _raise(self, threads: str, arithmetic: str, rate: float, by: str, label: str) -> None:
        """Store ``rate`` as the peak, re-reading the cache under its lock so a peak another
        command raised meanwhile is kept when it is higher."""
        path = self.path
        with locked(path):
            stored = read_entries(path, self.machine)
            entry = stored.get(threads) or self.entries[threads]
            current = entry["peaks"].get(arithmetic) or self.entries[threads]["peaks"][arithmetic]
            if rate > current["rate"]:
                entry["peaks"][arithmetic] = {
                    "rate": rate,
                    "kernel": label,
                    "raised_by": by,
                    "raised_from": current["rate"],
                    "raised": datetime.now(UTC).isoformat(timespec="seconds"),
                }
            self.entries[threads] = entry
            write_entries(path, self.machine, {**self.entries, **stored, threads: entry})


def measure_in_child(threads: list[int]) -> dict[str, dict[str, Any]]:
    """``measure_kernels`` at each thread count in a fresh ``python -m edgekit.measure.peak``:
    no thread pool of the calling command (torch's OpenMP workers spin for a while after each
    parallel region) shares the cores, and ExecuTorch's process-wide pool stays as it was."""
    command = [sys.executable, "-m", "edgekit.measure.peak", *map(str, threads)]
    reason = "it gave no entry for that thread count"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        measured = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired) as exc:
        measured, reason = {}, str(exc)
    except (ValueError, IndexError):  # it died before its one line: its last words say why
        measured = {}
        reason = f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}"
    failed = {"peaks": {}, "kernels": {}, "error": f"the peak measurement failed: {reason:.200}"}
    return {str(t): measured.get(str(t)) or failed for t in threads}


def main(argv: list[str] | None = None) -> None:
    """``python -m edgekit.measure.peak THREADS...``: one JSON line, entries by thread count."""
    counts = [int(value) for value in (argv if argv is not None else sys.argv[1:])]
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(1)  # its OpenMP workers would spin beside the timed kernels
    kernels = all_kernels()
    print(json.dumps({str(t): measure_kernels(t, kernels) for t in counts}), flush=True)


def measure_peaks(threads: int = 1) -> dict[str, float]:
    """One thread count's peaks as ``run["peaks"]`` holds them (cached: ``MachinePeaks``)."""
    return MachinePeaks.load([threads]).figures()[str(threads)]


if __name__ == "__main__":
    from edgekit.common.shutdown import collect_once_at_exit

    collect_once_at_exit()  # before the runtimes' import (edgekit.common.shutdown)
    main()
