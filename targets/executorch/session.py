"""One loaded ``forward`` method of a ``.pte`` on the XNNPACK CPU path. numpy and ExecuTorch's
runtime only: on the host that is the ``executorch.runtime`` pybindings (which take torch
tensors), in the arm64 guest the torch-free ``executorch_numpy_runtime`` (ExecuTorch 1.3.1's C++
core with XNNPACK); the same staging either way: NCHW in the manifest's dtype."""

from __future__ import annotations

import contextlib
import re
import sys
import types
import warnings
import weakref
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.quiet import quiet_native
from edgekit.errors import DeviceUnavailable, UserInputError, first_line
from edgekit.targets.manifest import Manifest
from edgekit.targets.session import Accelerator, Session

# ExecuTorch's runtime bindings (``executorch.runtime``) without its compiler. The pybindings
# module imports one leaf, ``executorch.exir._warnings`` (two decorators), and
# through the ``executorch.exir`` package's ``__init__`` that pulls in the whole compiler: torch's
# dynamo and inductor and the edge-op tables. On the pinned ExecuTorch that was most of the cost of
# loading a .pte: on a 2-core Intel Xeon VM the import took about 8 s beside torch's own 2.5 s, and
# every worker that runs a .pte pays it. So the leaf is imported with an empty stand-in for its
# package, which is removed again at once: a later ``import executorch.exir`` (an export in the
# same process) runs the real package as before. Where the stand-in does not take (another
# ExecuTorch layout), the plain import runs.
COMPILER = "executorch.exir"


@contextlib.contextmanager
def loading(path: Path) -> Iterator[None]:
    """A program's load: what the runtime logs to fd 2 on the way is held back, and a failure
    (the pybindings raise RuntimeError for a bad program) is one line naming the file, with
    the runtime's own reason where it logged one ("File size is too small ...")."""
    failure = None
    with quiet_native() as captured:
        try:
            yield
        except Exception as exc:
            failure, captured.echo = first_line(exc), False
    if failure is not None:
        said = captured.said()
        cause = logged_cause("\n".join(said))
        named = [cause[0]] if cause else []
        why = "; ".join(dict.fromkeys([failure, *named, *said[-1:]]))
        raise UserInputError(f"{path}: ExecuTorch cannot load it ({why})") from None


# XNNPACK logs the node it could not create to fd 2, before the backend's summary line; the
# exception says only "Failed to load method forward, error: 0x1"
_NODE_REFUSED = re.compile(r"^(?:\[[\w.]+:\d+\]\s*)?(Failed to create (\w+) node.*)$", re.MULTILINE)


def logged_cause(log: str) -> tuple[str, str] | None:
    """The line of the runtime's log that names the node XNNPACK could not create, and that
    node's kind; None where the log has none."""
    match = _NODE_REFUSED.search(log)
    return (match.group(1).strip(), match.group(2)) if match else None


def runtime() -> types.ModuleType:
    """``executorch.runtime``, imported without ``executorch.exir``'s package ``__init__``
    unless something in this process already imported it."""
    if "executorch.runtime" in sys.modules or COMPILER in sys.modules:
        import executorch.runtime

        return executorch.runtime
    import executorch

    stand_in = types.ModuleType(COMPILER)
    stand_in.__path__ = [f"{path}/exir" for path in executorch.__path__]
    sys.modules[COMPILER] = stand_in
    executorch.exir = stand_in
    try:
        import executorch.runtime

        return executorch.runtime
    except ImportError:
        pass  # the layout changed: the plain import below decides
    finally:
        # only the stand-in goes; the leaf it loaded stays bound where it was imported
        del sys.modules[COMPILER]
        del executorch.exir
    sys.modules.pop("executorch.runtime", None)
    import executorch.runtime

    return executorch.runtime


# sessions whose XNNPACK runtime shares the process-wide threadpool (see set_threads)
_OPEN_SESSIONS: weakref.WeakSet = weakref.WeakSet()


def set_threads(threads: int) -> int:
    """Size ExecuTorch's process-wide threadpool (XNNPACK uses it); the count in effect.

    Resetting it under a loaded XNNPACK method is "unsafe" by its name, so it is done before
    loading, only when the count changes, and other open sessions are told they now share it.
    """
    runtime()  # loads the pybindings without the compiler
    from executorch.extension.pybindings import portable_lib

    current = portable_lib._threadpool_get_thread_count()
    if threads > 0 and threads != current:
        others = [s for s in _OPEN_SESSIONS if s.info.get("threads") != threads]
        if others:
            warnings.warn(
                f"executorch: the threadpool is process-wide; resetting it to {threads} threads "
                f"also changes {len(others)} open session(s)",
                RuntimeWarning,
                stacklevel=3,
            )
        portable_lib._unsafe_reset_threadpool(threads)
    return int(portable_lib._threadpool_get_thread_count())


def registered_backends() -> list[str]:
    return list(runtime().Runtime.get().backend_registry.registered_backend_names)


class HostSession(Session):
    """``executorch.runtime`` (pybindings, XNNPACK built in)."""

    def __init__(self, path: Path, manifest: Manifest, threads: int) -> None:
        import torch

        bindings = runtime()
        if not path.exists():
            raise FileNotFoundError(path)
        with loading(path):  # the runtime's first use logs its CPU probing too
            effective = set_threads(threads)
            loader = bindings.Runtime.get()
            program = loader.load_program(path, verification=bindings.Verification.Minimal)
            self._method = program.load_method("forward")
        self._program = program
        spec = manifest.input
        self._dtype = getattr(torch, spec.dtype)
        calls = manifest.details.get("delegate_calls")
        self.info = {
            "runtime": "executorch.runtime (pybindings)",
            "delegate": "XNNPACK",
            "delegate_applied": None if calls is None else calls > 0,
            "kernels": "XNNPACK + portable",
            "threads": effective,
            "threads_requested": threads,
            "threadpool": "process-wide",
            "backends": list(loader.backend_registry.registered_backend_names),
        }
        _OPEN_SESSIONS.add(self)

    def stage(self, sample: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(sample)).to(self._dtype).contiguous()

    def stage_raw(self, arrays: list[np.ndarray]) -> list[Any]:
        import torch

        return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]

    def invoke(self, staged: Any) -> Any:
        return self._method.execute(staged if isinstance(staged, list) else [staged])[0]

    def output(self, raw: Any) -> np.ndarray:
        import torch

        # copy: the runtime may reuse the output buffer on the next execute
        return raw.detach().to(torch.float32).numpy().copy()

    def close(self) -> None:
        _OPEN_SESSIONS.discard(self)
        self._method = None
        self._program = None


class NumpyRuntimeSession(Session):
    """``executorch_numpy_runtime``: the torch-free runtime the arm64 guest has."""

    def __init__(self, path: Path, manifest: Manifest, threads: int) -> None:
        import executorch_numpy_runtime as etnr

        program = etnr.Runtime.get().load_program(str(path))
        self._method = program.load_method("forward")
        self._dtype = np.dtype(manifest.input.dtype)
        info = etnr.runtime_info()
        self.info = {
            "runtime": (
                f"executorch-numpy-runtime {metadata.version('executorch-numpy-runtime')} "
                f"(ExecuTorch {info['executorch_version']} runtime)"
            ),
            "backends": list(info["backends"]),
            "kernels": "XNNPACK + portable",
            "threads": threads,
        }

    def stage(self, sample: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(sample, dtype=self._dtype)

    def stage_raw(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [np.ascontiguousarray(a) for a in arrays]

    def invoke(self, staged: Any) -> Any:
        return self._method(staged if isinstance(staged, list) else [staged])[0]

    def output(self, raw: Any) -> np.ndarray:
        return np.asarray(raw, dtype=np.float32).copy()


def open_session(
    path: Path,
    manifest: Manifest,
    accelerator: Accelerator = Accelerator.CPU,
    threads: int = 1,
    **options: Any,
) -> Session:
    try:
        runtime()
    except ImportError:
        return NumpyRuntimeSession(Path(path), manifest, threads)
    if accelerator == Accelerator.GPU:
        raise DeviceUnavailable(
            "executorch: no GPU backend in the installed runtime (registered backends: "
            f"{', '.join(registered_backends()) or 'none'}); the pip executorch build has no "
            "Vulkan/CUDA/Metal delegate, so only the CPU (XNNPACK) is available"
        )
    return HostSession(Path(path), manifest, threads)
