"""The emulator: QEMU user mode and the arm64 userlands that setup built, and how a guest command
is made. A run is ``qemu-aarch64 -L SYSROOT SYSROOT/usr/bin/python3.X guest.py`` in a child
process with a timeout, so a crashing emulated runtime is a failed row, not a dead report."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.common.cache import cache_dir
from edgekit.common.fileio import journal
from edgekit.errors import DeviceUnavailable, UserInputError

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

MIN_QEMU = (10, 0)


@dataclass(frozen=True)
class Userland:
    """An arm64 Debian userland with one CPython and the aarch64 wheels on its path."""

    name: str  # its directories: sysroot-<name>/ and site-<name>/
    suite: str
    python: str
    wheels: tuple[str, ...]
    modules: tuple[str, ...]  # the runtime modules its wheels provide

    @property
    def python_version(self) -> str:
        return self.python.removeprefix("python")


# The runtimes at the versions the host uses (pyproject pins), as aarch64 manylinux wheels, on
# bookworm's CPython 3.11: the same minor version as the host.
CORE = Userland(
    "bookworm",
    "bookworm",
    "python3.11",
    ("numpy==2.4.6", "ai-edge-litert==2.3.0", "onnxruntime==1.32.0"),
    ("ai_edge_litert", "onnxruntime"),
)
# Optional (--with-pte): .pte files need a torch-free ExecuTorch runtime. executorch-numpy-runtime
# (ExecuTorch 1.3.1's C++ core with XNNPACK, numpy only) needs CPython >= 3.12: trixie's 3.13.
PTE = Userland(
    "trixie",
    "trixie",
    "python3.13",
    ("numpy==2.4.6", "executorch-numpy-runtime==1.4.0"),
    ("executorch_numpy_runtime",),
)
USERLANDS = (CORE, PTE)

# Phone-like cores first: the Cortex-A76 is the big core of many phones (dotprod, fp16), the
# A53/A55 the little cores of nearly all of them, the A710 an Armv9 big core (SVE2, i8mm).
# Neoverse N1/V1 are server cores.
CPU_CHOICES = (
    "cortex-a76",
    "cortex-a53",
    "cortex-a55",
    "cortex-a710",
    "neoverse-n1",
    "neoverse-v1",
)
DEFAULT_CPU = "cortex-a76"
FALLBACK_CPU = "neoverse-n1"  # same Armv8.2 feature set as the A76, for a QEMU without it
LATENCY_LABEL = "emulated: not a phone's speed (QEMU user-mode; never compare with native)"
PTE_REASON = (
    "executorch .pte: not supported on arm64-emu without its optional ExecuTorch userland (run "
    "'edgekit device setup arm64-emu --with-pte': trixie arm64 CPython 3.13 + "
    "executorch-numpy-runtime, ~150 MB; PyPI's aarch64 torch is a CUDA build that loads only "
    "with stubbed CUDA libraries, which edgekit does not ship)"
)


def device_root() -> Path:
    return cache_dir() / "arm64-emu"


# --------------------------------------------------------------------------------------------
# QEMU: version and CPU models


def parse_qemu_version(text: str) -> tuple[int, int, int]:
    """``qemu-aarch64 version 10.0.2 (Debian 1:10.0.2+ds-1~bpo12+1)`` -> (10, 0, 2)."""
    match = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise DeviceUnavailable(f"arm64-emu: cannot read a QEMU version from {text.strip()[:80]!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def check_qemu_version(version: tuple[int, int, int], binary: str = "qemu-aarch64") -> None:
    """Refuse QEMU < 10 with the reason (the runtimes crash or compute wrong int8 under it)."""
    if version[:2] >= MIN_QEMU:
        return
    found = ".".join(str(part) for part in version)
    raise DeviceUnavailable(
        f"arm64-emu: {binary} is QEMU {found}; edgekit needs QEMU >= "
        f"{MIN_QEMU[0]} (older QEMU does not emulate /proc/cpuinfo for aarch64, so onnxruntime and "
        "LiteRT crash, and with SME-capable CPU models XNNPACK int8 results are wrong); run "
        "'edgekit device setup arm64-emu' to fetch QEMU 10 from bookworm-backports"
    )


def qemu_version(binary: Path | str) -> tuple[int, int, int]:
    try:
        completed = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except FileNotFoundError:
        raise DeviceUnavailable(f"arm64-emu: QEMU not found at {binary}") from None
    except OSError as exc:
        raise DeviceUnavailable(f"arm64-emu: cannot run {binary}: {exc.strerror}") from None
    return parse_qemu_version(completed.stdout + completed.stderr)


def parse_cpu_models(text: str) -> list[str]:
    """``qemu-aarch64 -cpu help``: ``Available CPUs:`` then one model name per line."""
    models = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.endswith(":"):
            continue
        models.append(line.split()[0])
    return models


def cpu_models(binary: Path | str) -> list[str]:
    completed = subprocess.run(
        [str(binary), "-cpu", "help"], capture_output=True, text=True, timeout=30, check=False
    )
    return parse_cpu_models(completed.stdout)


def choose_cpu(requested: str | None, available: list[str]) -> str:
    """The requested model if this QEMU has it; by default the phone-like Cortex-A76."""
    if requested is None:
        return DEFAULT_CPU if DEFAULT_CPU in available else FALLBACK_CPU
    if requested not in available:
        offered = [cpu for cpu in CPU_CHOICES if cpu in available]
        raise UserInputError(
            f"arm64-emu: QEMU has no CPU model '{requested}' (choose from {', '.join(offered)}; "
            "all models: qemu-aarch64 -cpu help)"
        )
    return requested


@dataclass(frozen=True)
class Emulator:
    """A ready device: the emulator and its userlands."""

    root: Path
    qemu: Path
    facts: dict[str, Any] = field(default_factory=dict)

    def command(self, land: Userland, args: list[str]) -> list[str]:
        sysroot = self.root / f"sysroot-{land.name}"
        python = sysroot / "usr" / "bin" / land.python
        return [str(self.qemu), "-L", str(sysroot), str(python), *args]

    def env(self, land: Userland, cpu: str) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"),
            "LANG": "C.UTF-8",
            "QEMU_CPU": cpu,
            "PYTHONPATH": str(self.root / f"site-{land.name}"),
            "PYTHONNOUSERSITE": "1",
            # no PYTHONDONTWRITEBYTECODE: the userland's Debian packages ship no bytecode (their
            # postinst compiles it; dpkg -x runs none), so the guest caches what it compiles
            # (atomically, beside the sources) instead of compiling it emulated in every process
            "TF_CPP_MIN_LOG_LEVEL": "3",
            **{k: v for k, v in os.environ.items() if k == "EDGEKIT_TEST_CRASH"},
        }


def emulated(
    emulator: Emulator, land: Userland, cpu: str, args: list[str], timeout_s: float = 300
) -> str:
    try:
        completed = subprocess.run(
            emulator.command(land, args),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=emulator.env(land, cpu),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DeviceUnavailable(f"arm64-emu: the emulated {land.python} timed out") from None
    if completed.returncode != 0:
        raise DeviceUnavailable(
            f"arm64-emu: the emulated {land.python} failed ({exit_reason(completed)})"
        )
    return completed.stdout


def qemu_override() -> Path | None:
    """``EDGEKIT_QEMU_AARCH64``: use this qemu-aarch64 instead of the one setup unpacked."""
    chosen = os.environ.get("EDGEKIT_QEMU_AARCH64")
    return Path(chosen) if chosen else None


def exit_reason(completed: subprocess.CompletedProcess) -> str:
    if completed.returncode < 0:
        import signal

        return f"crashed with {signal.Signals(-completed.returncode).name}"
    if completed.returncode > 128:  # qemu re-raises a guest's fatal signal; its exit shows it
        import signal

        try:
            return f"crashed with {signal.Signals(completed.returncode - 128).name}"
        except ValueError:
            pass
    lines = [line for line in completed.stderr.strip().splitlines() if line.strip()]
    return f"exit {completed.returncode}: {lines[-1][:200] if lines else 'no output'}"


def load_device() -> Emulator:
    """The set-up device, or DeviceUnavailable saying how to set it up."""
    root = device_root()
    facts_path = root / "device.json"
    if not facts_path.is_file():
        raise DeviceUnavailable(
            f"arm64-emu: not set up in {root} (run 'edgekit device setup arm64-emu': "
            "about 1.5 minutes and 300 MB)"
        )
    facts = json.loads(facts_path.read_text())
    for land in (CORE, PTE) if facts.get("pte") else (CORE,):
        done = [root / f".done-{part}-{land.name}" for part in ("sysroot", "site")]
        if not all(path.exists() for path in done):
            raise DeviceUnavailable(
                f"arm64-emu: the {land.suite} userland in {root} is incomplete (an interrupted "
                "setup?); run 'edgekit device setup arm64-emu' again"
            )
    qemu = qemu_override() or root / "qemu" / "usr" / "bin" / "qemu-aarch64"
    if not qemu.exists():
        raise DeviceUnavailable(
            f"arm64-emu: QEMU not found at {qemu} (run 'edgekit device setup arm64-emu' again)"
        )
    check_qemu_version(qemu_version(qemu), str(qemu))
    return Emulator(root, qemu, facts)


def device_ready() -> bool:
    try:
        load_device()
    except DeviceUnavailable:
        return False
    return True


def userland_for(modules: tuple[str, ...]) -> Userland | None:
    """The userland whose wheels provide every one of ``modules`` (a target's guest_modules)."""
    for land in USERLANDS:
        if set(modules) <= set(land.modules):
            return land
    return None


def _module_file(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise UserInputError(f"arm64-emu: cannot find module {name} to copy into the guest")
    return Path(spec.origin)


# What the guest imports besides a target's session module: numpy and stdlib only, all of them.
GUEST_MODULES = (
    "edgekit.errors",
    "edgekit.common.quiet",
    "edgekit.worker.loop",
    "edgekit.worker.conditions",
    "edgekit.targets.session",
    "edgekit.targets.manifest",
    "edgekit.worker.memory",
    "edgekit.common.shutdown",
)


def guest_tree(session_module: str, directory: Path) -> Path:
    """A throwaway tree of the installed files the guest runs as they are: the target's own
    session module and what it imports, under empty package ``__init__`` files (the real ones
    pull torch). Returns the guest script's path."""
    for name in (*GUEST_MODULES, session_module):
        destination = directory / Path(*name.split(".")).with_suffix(".py")
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_module_file(name), destination)
        package = destination.parent
        while package != directory:
            (package / "__init__.py").touch()
            package = package.parent
    script = directory / "guest.py"
    shutil.copyfile(Path(__file__).with_name("guest.py"), script)
    return script


def guest_command(
    emulator: Emulator | None, land: Userland, cpu: str, tree: Path
) -> tuple[list[str], dict[str, str]]:
    """The guest's command line and environment: under QEMU, or (``emulator`` None) the host's
    own Python on the same tree, the x86 reference of the very same code."""
    script = str(tree / "guest.py")
    if emulator is None:
        import sys

        env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="3")
        return [sys.executable, script], env
    env = emulator.env(land, cpu)
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{env['PYTHONPATH']}"
    return emulator.command(land, [script]), env


def scratch_dir() -> tempfile.TemporaryDirectory:
    directory = tempfile.TemporaryDirectory(prefix="edgekit-arm64-")
    journal(directory.name)
    return directory


def request_for(artifact: Artifact, session_module: str, threads: int, options: dict) -> dict:
    return {
        "session_module": session_module,
        "artifact": str(Path(artifact.path).resolve()),
        "manifest": artifact.manifest.to_dict(),
        "accelerator": "cpu-kernels",
        "threads": threads,
        "session_options": options,
    }
