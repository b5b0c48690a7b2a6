"""Building the emulated ARM64 device into ``cache_dir()/"arm64-emu"``, idempotently, without root
beyond ``apt-get``'s own download and without touching the host's apt state or Python:

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
  with XNNPACK, torch-free; it needs CPython >= 3.12).
- ``device.json``: written last; its presence means the device is ready.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from edgekit.common.fileio import temporary_directory
from edgekit.common.progress import Progress
from edgekit.devices.arm64_emu.emulator import (
    CORE,
    CPU_CHOICES,
    DEFAULT_CPU,
    PTE,
    Emulator,
    Userland,
    check_qemu_version,
    choose_cpu,
    cpu_models,
    device_root,
    emulated,
    qemu_version,
)
from edgekit.errors import DeviceUnavailable

USERLAND_LIBS = ("libstdc++6", "libgcc-s1", "zlib1g", "libatomic1")
PLATFORMS = (
    "manylinux_2_28_aarch64",
    "manylinux_2_27_aarch64",
    "manylinux_2_17_aarch64",
    "manylinux2014_aarch64",
)
DEBIAN_MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
APT_TIMEOUT_S = 600


def _mirrors() -> tuple[str, str]:
    """The Debian archive and its security archive (``EDGEKIT_DEBIAN_MIRROR`` and
    ``EDGEKIT_DEBIAN_SECURITY_MIRROR`` point at a local mirror or a snapshot)."""
    return (
        os.environ.get("EDGEKIT_DEBIAN_MIRROR", DEBIAN_MIRROR).rstrip("/"),
        os.environ.get("EDGEKIT_DEBIAN_SECURITY_MIRROR", SECURITY_MIRROR).rstrip("/"),
    )


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
    with temporary_directory("download-", root) as tmp:
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
    out = emulated(Emulator(root, qemu), land, DEFAULT_CPU, check).strip()
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
    cpu: str | None = None, *, with_pte: bool = False, progress: Progress | None = print
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
    facts = json.loads(emulated(emulator, CORE, chosen, ["-c", CORE_CHECK]).splitlines()[-1])
    if PTE in lands:
        lines = emulated(emulator, PTE, chosen, ["-c", PTE_CHECK]).splitlines()
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
