"""LiteRT's own per-op times. Its Python API exposes no profiler; its C API does: a
CompiledModel built with the runtime option ``enable_profiling = true`` keeps a profiler whose
events are XNNPACK's operators (type 8, named as XNNPACK names them, placed on the census by
alignment) and the builtin kernels (type 2, carrying the op's index in the graph). Called here
through ctypes on the ``libLiteRt.so`` that ai-edge-litert ships; its event record is
``{tag, type, start_us, elapsed_us, begin memory, end memory, meta, meta2, source}``."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.common.quiet import quiet_native
from edgekit.errors import UnsupportedExport, UserInputError
from edgekit.targets.manifest import Manifest
from edgekit.targets.profiling import Event, OpTimes

DELEGATE_OP, BUILTIN_OP, INVOKE = 8, 2, 1
MAX_EVENTS = 800  # read and reset the profiler before its buffer fills


class _Memory(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int64), ("b", ctypes.c_int64), ("c", ctypes.c_int64)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("tag", ctypes.c_char_p),
        ("type", ctypes.c_int),
        ("start_us", ctypes.c_uint64),
        ("elapsed_us", ctypes.c_uint64),
        ("begin", _Memory),
        ("end", _Memory),
        ("meta", ctypes.c_uint64),
        ("meta2", ctypes.c_uint64),
        ("source", ctypes.c_int),
    ]


class _Layout(ctypes.Structure):
    _fields_ = [
        ("packed", ctypes.c_uint32),
        ("dims", ctypes.c_int32 * 8),
        ("strides", ctypes.c_uint32 * 8),
    ]


class _TensorType(ctypes.Structure):
    _fields_ = [("element_type", ctypes.c_int32), ("layout", _Layout)]


# LiteRT's environment probes every accelerator it knows: on a CPU-only profile, a GPU (or NPU)
# that does not load is expected, not news
CPU_ONLY = (r"GPU accelerator could not be loaded", r"NPU accelerator could not be loaded")


def profile(path: Path, manifest: Manifest, threads: int, runs: int, warmup: int) -> OpTimes:
    with quiet_native(also=CPU_ONLY):
        return _profile(path, threads, runs, warmup)


def _profile(path: Path, threads: int, runs: int, warmup: int) -> OpTimes:
    model = _CompiledModel(Path(path), threads)
    try:
        for _ in range(warmup):
            model.run()
        names: list[str] = []  # the ops of one run, in the order they ran
        totals: list[float] = []
        invokes: list[float] = []
        done = 0
        while done < runs:
            chunk = min(runs - done, max(1, MAX_EVENTS // max(model.events_per_run, 1)))
            ops = []
            for event in model.profiled(chunk):
                name = event.tag.decode(errors="replace") if event.tag else "?"
                if event.type == INVOKE and name == "Invoke":
                    invokes.append(event.elapsed_us / 1000.0)
                elif event.type in (DELEGATE_OP, BUILTIN_OP):
                    # a builtin kernel carries its graph index; XNNPACK's ops their position
                    label = name if event.type == DELEGATE_OP else f"{name} #{event.meta}"
                    ops.append((label, event.elapsed_us / 1000.0))
            per_run = len(ops) // chunk
            if not names:
                names, totals = [label for label, _ in ops[:per_run]], [0.0] * per_run
            for position, (_, ms) in enumerate(ops[: per_run * chunk]):
                totals[position % per_run] += ms
            done += chunk
    finally:
        model.close()
    events = [Event(name, total / runs) for name, total in zip(names, totals, strict=True)]
    from ai_edge_litert import __version__ as litert_version

    return OpTimes(
        method=f"LiteRT {litert_version} CompiledModel profiler (C API, enable_profiling), "
        f"{runs} runs after {warmup} warm-up",
        events=events,
        runs=runs,
        run_ms=float(np.median(invokes)) if invokes else None,
        notes=["LiteRT's profiler counts whole microseconds per op (ops under 1 us read 0)"],
    )


class _CompiledModel:
    """The few LiteRT C API calls a profiled run needs (status 0 is success)."""

    def __init__(self, path: Path, threads: int) -> None:
        import ai_edge_litert

        self.lib = ctypes.CDLL(str(Path(ai_edge_litert.__file__).parent / "libLiteRt.so"))
        pointer = ctypes.c_void_p
        self.env, self.model, options = pointer(), pointer(), pointer()
        self.compiled, self.profiler = pointer(), pointer()
        self._keep: list[Any] = []
        self.events_per_run = 64
        self._call("LiteRtCreateEnvironment", 0, None, ctypes.byref(self.env))
        status = self.lib.LiteRtCreateModelFromFile(
            self.env, str(path).encode(), ctypes.byref(self.model)
        )
        if status != 0:
            raise UserInputError(f"{path}: LiteRT cannot load it (status {status})")
        self._call("LiteRtCreateOptions", ctypes.byref(options))
        self._call("LiteRtSetOptionsHardwareAccelerators", options, 1)  # CPU: XNNPACK
        self._opaque(options, b"runtime_options_string", "enable_profiling = true\n")
        self._opaque(options, b"xnnpack", f"num_threads = {threads}\n")
        self._call(
            "LiteRtCreateCompiledModel", self.env, self.model, options, ctypes.byref(self.compiled)
        )
        self.inputs = self._buffers("Input")
        self.outputs = self._buffers("Output")
        self._call("LiteRtCompiledModelGetProfiler", self.compiled, ctypes.byref(self.profiler))

    def _call(self, name: str, *args: Any) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:  # a file the C API cannot run as it is (dynamic shapes, for one)
            raise UnsupportedExport(
                f"LiteRT's profiler cannot run this file: {name} failed (status {status})"
            )

    def _opaque(self, options: Any, identifier: bytes, text: str) -> None:
        payload = ctypes.create_string_buffer(text.encode())
        keep = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: None)  # LiteRT must not free it
        self._keep += [payload, keep]
        opaque = ctypes.c_void_p()
        self._call(
            "LiteRtCreateOpaqueOptions",
            identifier,
            ctypes.cast(payload, ctypes.c_void_p),
            keep,
            ctypes.byref(opaque),
        )
        self._call("LiteRtAddOpaqueOptions", options, opaque)

    def _buffers(self, side: str) -> tuple[Any, int]:
        signature = ctypes.c_void_p()
        self._call(
            "LiteRtGetModelSignature", self.model, ctypes.c_size_t(0), ctypes.byref(signature)
        )
        count = ctypes.c_size_t()
        self._call(f"LiteRtGetNumSignature{side}s", signature, ctypes.byref(count))
        buffers = []
        for index in range(count.value):
            tensor, kind, need = ctypes.c_void_p(), _TensorType(), ctypes.c_void_p()
            self._call(
                f"LiteRtGetSignature{side}TensorByIndex",
                signature,
                ctypes.c_size_t(index),
                ctypes.byref(tensor),
            )
            self._call("LiteRtGetRankedTensorType", tensor, ctypes.byref(kind))
            self._call(
                f"LiteRtGetCompiledModel{side}BufferRequirements",
                self.compiled,
                ctypes.c_size_t(0),
                ctypes.c_size_t(index),
                ctypes.byref(need),
            )
            buffer = ctypes.c_void_p()
            self._call(
                "LiteRtCreateManagedTensorBufferFromRequirements",
                self.env,
                ctypes.byref(kind),
                need,
                ctypes.byref(buffer),
            )
            buffers.append(buffer)
        return (ctypes.c_void_p * len(buffers))(*buffers), len(buffers)

    def run(self) -> None:
        (ins, n_in), (outs, n_out) = self.inputs, self.outputs
        self._call(
            "LiteRtRunCompiledModel",
            self.compiled,
            ctypes.c_size_t(0),
            ctypes.c_size_t(n_in),
            ins,
            ctypes.c_size_t(n_out),
            outs,
        )

    def profiled(self, runs: int) -> list[_Event]:
        self._call("LiteRtResetProfiler", self.profiler)
        self._call("LiteRtStartProfiler", self.profiler)
        for _ in range(runs):
            self.run()
        self._call("LiteRtStopProfiler", self.profiler)
        count = ctypes.c_int()
        self._call("LiteRtGetNumProfilerEvents", self.profiler, ctypes.byref(count))
        records = (_Event * max(count.value, 1))()
        self._call("LiteRtGetProfilerEvents", self.profiler, count, records)
        self.events_per_run = max(1, count.value // runs)
        return list(records[: count.value])

    def close(self) -> None:
        for name, handle in (
            ("LiteRtDestroyCompiledModel", self.compiled),
            ("LiteRtDestroyModel", self.model),
            ("LiteRtDestroyEnvironment", self.env),
        ):
            if handle and hasattr(self.lib, name):
                getattr(self.lib, name)(handle)
