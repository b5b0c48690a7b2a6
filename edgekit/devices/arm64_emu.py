"""The emulated ARM64 device (``--device arm64-emu``): the aarch64 builds of LiteRT, XNNPACK and
onnxruntime, run under QEMU user-mode emulation on an x86_64 host.

What it proves: an artifact's numerics on the real aarch64 kernels a phone runs (LiteRT's builtin
and XNNPACK kernels, onnxruntime's MLAS), compared with the same artifact on the host's x86
kernels. What it does not: a phone's speed (QEMU's TCG runs vector float through softfloat
helpers, 50-1000x slower than native), memory, thermal behaviour, GPU/NPU delegates, or Android's
own builds of the runtimes (these are the manylinux aarch64 wheels).

``setup_device`` builds it into ``cache_dir()/"arm64-emu"``, idempotently, without root beyond
``apt-get``'s own download and without touching the host's apt state or Python:

- ``qemu/``: Debian's ``qemu-user`` from bookworm-backports (QEMU >= 10), unpacked with
  ``dpkg -x``; only ``qemu-aarch64`` is kept. QEMU 7.2 (bookworm's default) is refused: it does
  not emulate ``/proc/cpuinfo`` for aarch64, so cpuinfo (XNNPACK, onnxruntime) parses the host's
  x86 file and the runtimes crash, and with an SME-capable CPU model it gives wrong XNNPACK int8.
- ``sysroot-bookworm/``: a Debian bookworm arm64 userland with CPython 3.11 (the host's minor
  version), resolved by a private apt configuration with an empty dpkg status (so apt downloads
  the whole dependency closure), fetched with ``apt-get install --download-only`` and unpacked
  with ``dpkg -x``; no chroot, no binfmt.
- ``site-bookworm/``: the aarch64 manylinux wheels of the pinned runtimes, ``pip download
  --platform`` then ``pip install --no-deps --target``.
- with ``with_pte`` (``--with-pte``, ~150 MB more): ``sysroot-trixie/`` + ``site-trixie/``,
  trixie's arm64 CPython 3.13 with ``executorch-numpy-runtime`` (ExecuTorch 1.3.1's C++ runtime
  with XNNPACK, torch-free; it needs CPython >= 3.12). PyPI's aarch64 torch is a CUDA build that
  loads only with stubbed CUDA libraries, which edgekit does not ship; without this part a .pte
  is refused with that reason.
- ``device.json``: written last; its presence means the device is ready.

A run is ``qemu-aarch64 -L SYSROOT SYSROOT/usr/bin/python3.X arm64_runner.py REQUEST`` in a child
process with a timeout, so a crashing emulated runtime is a failed row, not a dead report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.accuracy import AccuracyRecord
from edgekit.cache import cache_dir
from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError

DEVICE = "arm64-emu"
MIN_QEMU = (10, 0)


@dataclass(frozen=True)
class Userland:
    """An arm64 Debian userland with one CPython and the aarch64 wheels on its path."""

    name: str  # its directories: sysroot-<name>/ and site-<name>/
    suite: str
    python: str
    wheels: tuple[str, ...]

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
)
# Optional (--with-pte): .pte files need a torch-free ExecuTorch runtime. executorch-numpy-runtime
# (ExecuTorch 1.3.1's C++ core with XNNPACK, numpy only) needs CPython >= 3.12: trixie's 3.13.
PTE = Userland(
    "trixie", "trixie", "python3.13", ("numpy==2.4.6", "executorch-numpy-runtime==1.4.0")
)
USERLAND_LIBS = ("libstdc++6", "libgcc-s1", "zlib1g", "libatomic1")
PLATFORMS = (
    "manylinux_2_28_aarch64",
    "manylinux_2_27_aarch64",
    "manylinux_2_17_aarch64",
    "manylinux2014_aarch64",
)
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
SUPPORTED_SUFFIXES = {".tflite": "tflite", ".onnx": "onnx", ".pte": "pte"}
LATENCY_LABEL = "emulated: not a phone's speed (QEMU user-mode; never compare with native)"
PTE_REASON = (
    "executorch .pte: not supported on arm64-emu without its optional ExecuTorch userland (run "
    "'edgekit device setup arm64-emu --with-pte': trixie arm64 CPython 3.13 + "
    "executorch-numpy-runtime, ~150 MB; PyPI's aarch64 torch is a CUDA build that loads only "
    "with stubbed CUDA libraries, which edgekit does not ship)"
)

DEBIAN_MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
APT_TIMEOUT_S = 600

Progress = Callable[[str], None]


def device_root() -> Path:
    return cache_dir() / DEVICE


def _mirrors() -> tuple[str, str]:
    """The Debian archive and its security archive (``EDGEKIT_DEBIAN_MIRROR`` and
    ``EDGEKIT_DEBIAN_SECURITY_MIRROR`` point at a local mirror or a snapshot)."""
    return (
        os.environ.get("EDGEKIT_DEBIAN_MIRROR", DEBIAN_MIRROR).rstrip("/"),
        os.environ.get("EDGEKIT_DEBIAN_SECURITY_MIRROR", SECURITY_MIRROR).rstrip("/"),
    )


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


# --------------------------------------------------------------------------------------------
# setup


def _run_step(command: list[str], what: str, env: dict[str, str] | None = None) -> str:
    """Run one setup command; a failure is one line naming the step and the tool's own error."""
    try:
        completed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=APT_TIMEOUT_S,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise DeviceUnavailable(f"arm64-emu setup: {what}: {command[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise DeviceUnavailable(
            f"arm64-emu setup: {what}: timed out after {APT_TIMEOUT_S} s"
        ) from None
    if completed.returncode != 0 or re.search(r"^(E:|W: Failed to fetch)", completed.stderr, re.M):
        raise DeviceUnavailable(f"arm64-emu setup: {what} failed: {_tool_error(completed)}")
    return completed.stdout


def _tool_error(completed: subprocess.CompletedProcess) -> str:
    """apt's ``E:``/``W: Failed`` line or pip's ``ERROR:`` line, else the last line of output."""
    lines = (completed.stderr + "\n" + completed.stdout).strip().splitlines()
    for pattern in (r"^E: ", r"^W: Failed to fetch", r"^ERROR: "):
        found = [line for line in lines if re.match(pattern, line)]
        if found:
            return re.sub(r"\s+", " ", found[0])[:300]
    return (lines[-1] if lines else f"exit status {completed.returncode}")[:300]


def _host_arch() -> str:
    return _run_step(["dpkg", "--print-architecture"], "dpkg --print-architecture").strip()


def _write_apt_config(base: Path, arch: str, sources: list[str]) -> dict[str, str]:
    """A private apt configuration: its own sources, lists, cache and an empty dpkg status, and
    no host configuration parts (those can carry hooks that clean the host's apt cache)."""
    for sub in ("lists/partial", "cache/archives/partial", "parts", "sources.list.d"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "status").write_text("")  # empty: apt resolves the full dependency closure
    (base / "sources.list").write_text("".join(line + "\n" for line in sources))
    settings = {
        "APT::Architecture": arch,
        "Dir::Etc::sourcelist": base / "sources.list",
        "Dir::Etc::sourceparts": base / "sources.list.d",
        "Dir::Etc::parts": base / "parts",
        "Dir::Etc::preferencesparts": base / "parts",
        "Dir::State": base,
        "Dir::State::lists": base / "lists",
        "Dir::State::status": base / "status",
        "Dir::Cache": base / "cache",
        "Dir::Cache::archives": base / "cache/archives",
        "APT::Install-Recommends": "false",
        "Debug::NoLocking": "true",
        "APT::Sandbox::User": "root",
        "Acquire::Retries": "1",
        "Acquire::http::Timeout": "30",
        "Acquire::Languages": "none",
    }
    lines = [f'{key} "{value}";' for key, value in settings.items()]
    lines.append(f'APT::Architectures {{ "{arch}"; }};')
    (base / "apt.conf").write_text("\n".join(lines) + "\n")
    return dict(os.environ, APT_CONFIG=str(base / "apt.conf"), DEBIAN_FRONTEND="noninteractive")


def _check_host_tools() -> None:
    missing = [tool for tool in ("apt-get", "dpkg") if shutil.which(tool) is None]
    if missing:
        raise DeviceUnavailable(
            f"arm64-emu setup: needs {' and '.join(missing)} (a Debian or Ubuntu host)"
        )
    if not KEYRING.is_file():
        raise DeviceUnavailable(
            f"arm64-emu setup: no Debian archive keyring at {KEYRING} "
            "(install debian-archive-keyring)"
        )


def _deb_line(mirror: str, suites: str, sections: str = "main") -> str:
    return f"deb [signed-by={KEYRING}] {mirror} {suites} {sections}"


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _setup_qemu(root: Path, say: Progress) -> Path:
    binary = root / "qemu" / "usr" / "bin" / "qemu-aarch64"
    if (root / "qemu" / ".done").exists() and binary.exists():
        say(f"qemu-aarch64 {'.'.join(map(str, qemu_version(binary)))}: ready (cached)")
        return binary
    shutil.rmtree(root / "qemu", ignore_errors=True)
    base = root / "apt-host"
    mirror, _ = _mirrors()
    env = _write_apt_config(base, _host_arch(), [_deb_line(mirror, "bookworm-backports")])
    say(f"qemu: apt-get update (bookworm-backports from {mirror})")
    _run_step(["apt-get", "update", "-q"], f"apt-get update of bookworm-backports ({mirror})", env)
    say("qemu: downloading qemu-user from bookworm-backports")
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        _run_step(
            ["sh", "-c", f"cd {tmp} && apt-get download -q qemu-user"],
            "apt-get download qemu-user",
            env,
        )
        debs = list(Path(tmp).glob("qemu-user_*.deb"))
        if not debs:
            raise DeviceUnavailable("arm64-emu setup: apt-get download qemu-user gave no .deb")
        unpacked = Path(tmp) / "root"
        _run_step(["dpkg", "-x", str(debs[0]), str(unpacked)], f"dpkg -x {debs[0].name}")
        source = unpacked / "usr" / "bin" / "qemu-aarch64"
        if not source.exists():
            raise DeviceUnavailable(f"arm64-emu setup: {debs[0].name} has no usr/bin/qemu-aarch64")
        binary.parent.mkdir(parents=True)
        shutil.move(str(source), binary)  # only the aarch64 emulator (14 MB of the package)
    shutil.rmtree(base, ignore_errors=True)
    version = qemu_version(binary)
    check_qemu_version(version, str(binary))
    (root / "qemu" / ".done").write_text("")
    say(f"qemu: qemu-aarch64 {'.'.join(map(str, version))}")
    return binary


def _merge_usr(sysroot: Path) -> None:
    """Trixie's packages ship only /usr (base-files makes /lib -> usr/lib on a real system, and
    the dynamic loader is looked up at /lib/ld-linux-aarch64.so.1): add those links."""
    for name in ("bin", "sbin", "lib"):
        if (sysroot / "usr" / name).is_dir() and not (sysroot / name).exists():
            (sysroot / name).symlink_to(f"usr/{name}")


def _setup_sysroot(root: Path, qemu: Path, land: Userland, say: Progress) -> None:
    sysroot = root / f"sysroot-{land.name}"
    stamp = root / f".done-sysroot-{land.name}"
    if stamp.exists() and (sysroot / "usr" / "bin" / land.python).exists():
        say(f"arm64 userland {land.suite} ({land.python}): ready (cached)")
        return
    stamp.unlink(missing_ok=True)
    base = root / f"apt-{land.name}"
    mirror, security = _mirrors()
    sources = [
        _deb_line(mirror, f"{land.suite} {land.suite}-updates"),
        _deb_line(security, f"{land.suite}-security"),
    ]
    env = _write_apt_config(base, "arm64", sources)
    say(f"arm64 userland: apt-get update ({land.suite} arm64 from {mirror})")
    _run_step(["apt-get", "update", "-q"], f"apt-get update of {land.suite} arm64 ({mirror})", env)
    packages = (land.python, *USERLAND_LIBS)
    say(f"arm64 userland: downloading {', '.join(packages)} and their dependencies")
    _run_step(
        ["apt-get", "install", "-y", "-q", "--download-only", *packages],
        f"apt-get install --download-only of the {land.suite} arm64 userland",
        env,
    )
    debs = sorted((base / "cache" / "archives").glob("*.deb"))
    say(f"arm64 userland: unpacking {len(debs)} .deb files with dpkg -x")
    shutil.rmtree(sysroot, ignore_errors=True)
    sysroot.mkdir()
    for deb in debs:
        _run_step(["dpkg", "-x", str(deb), str(sysroot)], f"dpkg -x {deb.name}")
    _merge_usr(sysroot)
    shutil.rmtree(base, ignore_errors=True)  # lists and .debs: ~60 MB, rebuilt if ever needed
    check = ["-c", "import platform; print(platform.machine())"]
    out = _emulated(Emulator(root, qemu), land, DEFAULT_CPU, check).strip()
    if out != "aarch64":
        raise DeviceUnavailable(f"arm64-emu setup: the emulated {land.python} says {out!r}")
    stamp.write_text("")


def _setup_site(root: Path, land: Userland, say: Progress) -> None:
    site = root / f"site-{land.name}"
    stamp = root / f".done-site-{land.name}"
    if stamp.exists() and stamp.read_text() == " ".join(land.wheels):
        say(f"aarch64 wheels ({', '.join(land.wheels)}): ready (cached)")
        return
    stamp.unlink(missing_ok=True)
    digits = land.python_version.replace(".", "")
    tags = ["--only-binary=:all:", "--python-version", land.python_version]
    tags += ["--implementation", "cp", "--abi", f"cp{digits}", "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS:
        tags += ["--platform", platform]
    wheels = root / f"wheels-{land.name}"
    shutil.rmtree(wheels, ignore_errors=True)
    say(f"aarch64 wheels: pip download {' '.join(land.wheels)} (+ dependencies)")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    # the host's pip constraints pin x86 choices that need not exist for aarch64
    env = dict(os.environ, PIP_CONSTRAINT="")
    _run_step([*pip, "download", "-q", *tags, "-d", str(wheels), *land.wheels], "pip download", env)
    say(f"aarch64 wheels: pip install --no-deps --target {site.name}/")
    shutil.rmtree(site, ignore_errors=True)
    files = [str(path) for path in sorted(wheels.glob("*.whl"))]
    _run_step(
        [*pip, "install", "-q", "--no-deps", "--no-index", *tags, "--target", str(site), *files],
        "pip install --target",
        env,
    )
    shutil.rmtree(wheels, ignore_errors=True)
    stamp.write_text(" ".join(land.wheels))


CORE_CHECK = (
    "import json, numpy, onnxruntime, ai_edge_litert, platform, sys; "
    "from importlib.metadata import version as v; "
    "print(json.dumps({'python': sys.version.split()[0], 'machine': platform.machine(), "
    "'numpy': numpy.__version__, 'onnxruntime': onnxruntime.__version__, "
    "'ai-edge-litert': v('ai-edge-litert')}))"
)
PTE_CHECK = (
    "import json, sys, executorch_numpy_runtime as en; "
    "from importlib.metadata import version as v; "
    "info = en.runtime_info(); "
    "print(json.dumps({'pte_python': sys.version.split()[0], "
    "'executorch-numpy-runtime': v('executorch-numpy-runtime'), "
    "'executorch_runtime': info['executorch_version'], 'pte_backends': info['backends']}))"
)


def setup_device(
    cpu: str | None = None, with_pte: bool = False, progress: Progress | None = print
) -> Path:
    """Build the emulated ARM64 device into ``cache_dir()/"arm64-emu"`` (idempotent: finished
    steps are kept) and check it runs on ``cpu``; ``with_pte`` adds the ExecuTorch userland.
    Returns the device directory."""
    say = progress or (lambda message: None)
    started = time.perf_counter()
    root = device_root()
    root.mkdir(parents=True, exist_ok=True)
    facts_path = root / "device.json"
    earlier = json.loads(facts_path.read_text()) if facts_path.is_file() else {}
    keep_pte = earlier.get("pte") or (root / f".done-site-{PTE.name}").exists()
    lands = [CORE, PTE] if with_pte or keep_pte else [CORE]
    _check_host_tools()
    qemu = _setup_qemu(root, say)
    chosen = choose_cpu(cpu, cpu_models(qemu))
    emulator = Emulator(root, qemu)
    for land in lands:
        _setup_sysroot(root, qemu, land, say)
        _setup_site(root, land, say)
    say(f"checking the runtimes on the emulated {chosen}")
    facts = json.loads(_emulated(emulator, CORE, chosen, ["-c", CORE_CHECK]).splitlines()[-1])
    if PTE in lands:
        lines = _emulated(emulator, PTE, chosen, ["-c", PTE_CHECK]).splitlines()
        facts.update(json.loads(lines[-1]), pte=True)
    facts.update(
        qemu=".".join(map(str, qemu_version(qemu))),
        default_cpu=chosen,
        cpus=[model for model in CPU_CHOICES if model in cpu_models(qemu)],
        size_mb=round(_dir_size(root) / 2**20, 1),
        setup_seconds=round(time.perf_counter() - started, 1),
    )
    facts_path.write_text(json.dumps(facts, indent=2) + "\n")
    pte = (
        f", executorch-numpy-runtime {facts['executorch-numpy-runtime']} on CPython "
        f"{facts['pte_python']}"
        if facts.get("pte")
        else ""
    )
    say(
        f"arm64-emu ready in {root}: QEMU {facts['qemu']}, CPython {facts['python']} aarch64, "
        f"numpy {facts['numpy']}, ai-edge-litert {facts['ai-edge-litert']}, onnxruntime "
        f"{facts['onnxruntime']}{pte}; CPU {chosen}; {facts['size_mb']:.0f} MB, "
        f"{facts['setup_seconds']:.0f} s"
    )
    return root


# --------------------------------------------------------------------------------------------
# running under emulation


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
            "PYTHONDONTWRITEBYTECODE": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3",
        }


def _emulated(
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
            f"arm64-emu: the emulated {land.python} failed ({_exit_reason(completed)})"
        )
    return completed.stdout


def _qemu_override() -> Path | None:
    """``EDGEKIT_QEMU_AARCH64``: use this qemu-aarch64 instead of the one setup unpacked."""
    chosen = os.environ.get("EDGEKIT_QEMU_AARCH64")
    return Path(chosen) if chosen else None


def _exit_reason(completed: subprocess.CompletedProcess) -> str:
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
    qemu = _qemu_override() or root / "qemu" / "usr" / "bin" / "qemu-aarch64"
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


def runner_kind(path: str | Path) -> str:
    """``tflite``, ``onnx`` or ``pte``; a clear line for formats the device cannot run."""
    suffix = Path(path).suffix
    if suffix not in SUPPORTED_SUFFIXES:
        raise DeviceUnavailable(
            f"{Path(path).name}: not supported on arm64-emu (it runs .tflite, .onnx and, with "
            "--with-pte, .pte)"
        )
    return SUPPORTED_SUFFIXES[suffix]


def _runner_request(
    artifact: Any, mode: str, threads: int, xnnpack: bool, crash_for_test: str | None = None
) -> dict[str, Any]:
    return {
        "crash_for_test": crash_for_test,
        "mode": mode,
        "kind": runner_kind(artifact.path),
        "artifact": str(Path(artifact.path).resolve()),
        "input_spec": artifact.manifest["input"],
        "output_spec": artifact.manifest["output"],
        "threads": threads,
        "xnnpack": xnnpack,
    }


def run_runner(
    request: dict[str, Any],
    cpu: str | None = None,
    timeout_s: float = 900.0,
    emulated: bool = True,
) -> dict[str, Any]:
    """Run ``arm64_runner.py`` on ``request`` under the emulator (or, with ``emulated=False``,
    on the host's own Python: the x86 reference of the same code path). Never raises for a
    crash or a timeout: the result has ``status: failed`` and the reason."""
    from edgekit.devices import arm64_runner

    script = str(Path(arm64_runner.__file__).resolve())
    with tempfile.TemporaryDirectory(prefix="edgekit-arm64-") as tmp:
        request = dict(request, result=str(Path(tmp) / "result.json"))
        request_path = Path(tmp) / "request.json"
        request_path.write_text(json.dumps(request))
        if emulated:
            emulator = load_device()
            land = PTE if request["kind"] == "pte" else CORE
            if land is PTE and not emulator.facts.get("pte"):
                raise DeviceUnavailable(PTE_REASON)
            chosen = choose_cpu(cpu or emulator.facts.get("default_cpu"), cpu_models(emulator.qemu))
            command = emulator.command(land, [script, str(request_path)])
            env = emulator.env(land, chosen)
        else:
            chosen = "host"
            command = [sys.executable, script, str(request_path)]
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
        try:
            completed = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            return {"status": "failed", "error": f"timed out after {timeout_s:.0f} s (killed)"}
        result_path = Path(request["result"])
        if not result_path.is_file():
            where = f"the emulated runtime on {chosen}" if emulated else "the host runner"
            return {"status": "failed", "error": f"{where} {_exit_reason(completed)}"}
        result = json.loads(result_path.read_text())
    result.setdefault("runtime", {})["cpu_model"] = chosen
    return result


def predict_arm64(
    artifact_path: str | Path,
    x_nchw: np.ndarray,
    cpu: str | None = None,
    xnnpack: bool = True,
    threads: int = 1,
    timeout_s: float = 900.0,
    emulated: bool = True,
    crash_for_test: str | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Float32 logits of NCHW float32 ``x_nchw`` from the artifact on the emulated aarch64
    kernels, staged as the host sessions stage (layout and int8 quantization from the
    manifest). ``xnnpack=False`` runs LiteRT's builtin kernels (ignored for .onnx)."""
    from edgekit.artifact import load_artifact

    artifact = load_artifact(artifact_path)
    with tempfile.TemporaryDirectory(prefix="edgekit-arm64-io-") as tmp:
        inputs, outputs = Path(tmp) / "x.npy", Path(tmp) / "y.npy"
        np.save(inputs, np.ascontiguousarray(x_nchw, dtype=np.float32))
        request = _runner_request(artifact, "predict", threads, xnnpack, crash_for_test)
        request.update(input=str(inputs), output=str(outputs))
        result = run_runner(request, cpu, timeout_s, emulated)
        if result["status"] != "ok":
            where = "arm64-emu" if emulated else "host (x86 reference)"
            raise EdgekitError(f"{artifact.path}: on {where}: {result['error']}")
        return np.load(outputs), result["runtime"]


def bench_arm64(
    artifact: Any,
    threads: int = 1,
    protocol: Any = None,
    cpu: str | None = None,
    xnnpack: bool = True,
    timeout_s: float = 900.0,
    sample: np.ndarray | None = None,
    crash_for_test: str | None = None,
) -> Any:
    """Latency of one artifact on the emulated device. Labelled: an emulated figure is not a
    phone's and must never enter a speed-up."""
    from edgekit.artifact import Artifact, load_artifact
    from edgekit.bench import LatencyRecord, Protocol

    loaded = artifact if isinstance(artifact, Artifact) else load_artifact(artifact)
    record = LatencyRecord.for_artifact(loaded, DEVICE, threads)
    protocol = protocol or Protocol()
    try:
        request = _runner_request(loaded, "bench", threads, xnnpack, crash_for_test)
    except DeviceUnavailable as exc:
        record.error = str(exc)
        return record
    with tempfile.TemporaryDirectory(prefix="edgekit-arm64-io-") as tmp:
        if sample is not None:
            np.save(Path(tmp) / "x.npy", np.ascontiguousarray(sample[:1], dtype=np.float32))
            request["input"] = str(Path(tmp) / "x.npy")
        request["protocol"] = {
            key: getattr(protocol, key)
            for key in ("warmup", "min_runs", "min_seconds", "max_seconds", "max_runs")
        }
        request["input_shape"] = _input_shape(loaded.manifest)
        try:
            result = run_runner(request, cpu, timeout_s)
        except EdgekitError as exc:  # device not set up, QEMU too old, unknown CPU model
            record.error = str(exc)
            return record
    record.attempts = 1
    if not record.fill(result):
        return record
    record.foreign_cpu = None  # QEMU's own threads make the guard's reading meaningless here
    record.runtime = dict(result["runtime"], emulated=True, latency=LATENCY_LABEL)
    record.warnings.append(LATENCY_LABEL)
    return record


def _input_shape(manifest: dict[str, Any]) -> list[int]:
    """The NCHW float input shape (the runner makes a fixed random sample of it)."""
    pre = manifest.get("preprocessing") or {}
    if "input_size" in pre and "channels" in pre:
        height, width = pre["input_size"]
        return [1, int(pre["channels"]), int(height), int(width)]
    spec = manifest["input"]
    shape = [int(v) for v in spec["shape"]]
    return [shape[0], shape[3], shape[1], shape[2]] if spec["layout"] == "NHWC" else shape


# --------------------------------------------------------------------------------------------
# numerics: ARM against x86, and against the baseline


def arm_vs_x86(arm: np.ndarray, x86: np.ndarray) -> dict[str, float]:
    """How far the aarch64 kernels' logits are from the x86 kernels' on the same inputs."""
    diff = np.abs(np.asarray(arm, dtype=np.float64) - np.asarray(x86, dtype=np.float64))
    return {
        "max_abs_diff": float(diff.max()) if diff.size else 0.0,
        "mean_abs_diff": float(diff.mean()) if diff.size else 0.0,
        "argmax_agreement": float(np.mean(arm.argmax(1) == x86.argmax(1))),
        "outputs_differing": int(np.count_nonzero(diff)),
        "outputs": int(diff.size),
    }


def x86_reference(
    artifact_path: str | Path, x: np.ndarray, xnnpack: bool = True, threads: int = 1
) -> tuple[np.ndarray, str]:
    """The same artifact on the host's x86 kernels. With XNNPACK (and for .onnx) that is the
    host session edgekit measures everywhere (``predict_in_child`` on cpu); LiteRT's builtin
    kernels have no host device, so the runner itself runs on the host Python for them."""
    from edgekit.bench import predict_in_child

    if xnnpack or runner_kind(artifact_path) == "onnx":
        logits, runtime = predict_in_child(artifact_path, x, "cpu", threads)
        return logits, f"host x86 cpu session ({runtime.get('runtime', '?')})"
    logits, runtime = predict_arm64(artifact_path, x, xnnpack=False, emulated=False)
    return logits, f"host x86, LiteRT builtin kernels ({runtime.get('runtime', '?')})"


def evaluate_arm64(
    artifact_path: str | Path,
    data: str = "digits",
    cpu: str | None = None,
    xnnpack: bool = True,
    threads: int = 1,
    limit: int | None = None,
    confidence: float = 0.95,
    x86: np.ndarray | None = None,
) -> Any:
    """Accuracy on the emulated device against the baseline (an AccuracyRecord, so gates and
    tables take it like any device's) plus ``arm_vs_x86``: the same artifact on the host x86
    kernels against the aarch64 ones. ``x86`` replaces the host reference (tests perturb it)."""
    from edgekit.accuracy import compare_on_labels, dataset_for, source_for
    from edgekit.artifact import load_artifact

    artifact = load_artifact(artifact_path)
    runner_kind(artifact.path)  # .pte and others: a clear line before anything runs
    source = source_for(artifact)
    dataset = dataset_for(artifact, data)
    split = dataset.evaluation
    x, y = (split.x, split.y) if limit is None else (split.x[:limit], split.y[:limit])
    arm, runtime = predict_arm64(artifact.path, x, cpu, xnnpack, threads)
    if x86 is None:
        x86, reference = x86_reference(artifact.path, x, xnnpack, threads)
    else:
        reference = "given by the caller"
    figures = compare_on_labels(arm, source.predict(x), y, dataset.class_names, confidence)
    kernels = "XNNPACK" if xnnpack and artifact.target == "tflite" else runtime.get("kernels")
    return Arm64AccuracyRecord(
        artifact=str(artifact.path),
        label=artifact.label + ("" if xnnpack or artifact.target != "tflite" else "-builtin"),
        device=DEVICE,
        dataset=dataset.name,
        **figures,
        arm_vs_x86=dict(
            arm_vs_x86(arm, np.asarray(x86)), reference=reference, kernels=kernels or ""
        ),
        emulation={
            "cpu_model": runtime.get("cpu_model"),
            "runtime": runtime.get("runtime"),
            "xnnpack": bool(xnnpack and artifact.target == "tflite"),
        },
    )


@dataclass
class Arm64AccuracyRecord(AccuracyRecord):
    """An AccuracyRecord on arm64-emu, with the ARM-vs-x86 comparison."""

    arm_vs_x86: dict[str, Any] = field(default_factory=dict)
    emulation: dict[str, Any] = field(default_factory=dict)


def arm_x86_gate(record: Any, max_diff: float) -> Any:
    """A regression gate on the ARM-vs-x86 max abs diff of an :func:`evaluate_arm64` record."""
    from edgekit.gates import GateResult

    figures = record.arm_vs_x86
    measured = float(figures["max_abs_diff"])
    detail = (
        f"argmax agreement {figures['argmax_agreement']:.4f}, "
        f"{figures['outputs_differing']}/{figures['outputs']} outputs differ"
    )
    return GateResult(
        record.label,
        record.device,
        "ARM vs x86 max |diff|",
        measured,
        max_diff,
        measured <= max_diff,
        detail,
    )
