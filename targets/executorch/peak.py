"""ExecuTorch's peak kernel (see ``edgekit.measure.peak``): XNNPACK's F16 GEMM as an ExecuTorch
fp16 artifact runs it, a float16 ``nn.Linear`` lowered to XNNPACK, its program kept in the cache."""

from __future__ import annotations

import contextlib
from importlib import metadata

from edgekit.common.cache import cache_dir
from edgekit.common.fileio import write_bytes_atomic
from edgekit.targets.peak_kernels import Call, Kernel

PACKAGE = "executorch"  # whose version the rate depends on


def _export_fp16_linear(size: int) -> bytes:
    """A float16 ``nn.Linear(size, size)`` on a [size, size] input, lowered to XNNPACK: the
    F16 GEMM an ExecuTorch fp16 artifact runs."""
    from edgekit.common.quiet import quiet_native
    from edgekit.targets.executorch.convert import quiet_library_noise

    quiet_library_noise()  # before executorch imports torchao
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    linear = torch.nn.Linear(size, size, bias=False).half().eval()
    example = torch.ones(size, size, dtype=torch.float16)
    with quiet_native():
        exported = torch.export.export(linear, (example,))
        lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
        program = lowered.to_executorch()
    delegates = program.executorch_program.execution_plan[0].delegates
    if not any(delegate.id == "XnnpackBackend" for delegate in delegates):
        raise RuntimeError("XNNPACK did not take the fp16 linear")
    return bytes(program.buffer)


def _fp16_program(size: int, *, rebuild: bool = False) -> bytes:
    """The exported program, kept in the cache: exporting costs seconds (and importing
    torch.export more), and each new thread count or machine would pay it again."""
    version = metadata.version(PACKAGE)
    path = cache_dir() / "peaks" / f"linear-fp16-{size}-executorch-{version}.pte"
    if path.is_file() and not rebuild:
        return path.read_bytes()
    data = _export_fp16_linear(size)
    with contextlib.suppress(OSError):
        write_bytes_atomic(path, data)
    return data


def _executorch_fp16(size: int, threads: int) -> Call:
    import torch

    from edgekit.common.quiet import quiet_native
    from edgekit.targets.executorch.session import runtime, set_threads

    x = torch.randn(size, size, generator=torch.Generator().manual_seed(0)).half()
    with quiet_native():
        set_threads(threads)  # ExecuTorch's threadpool is process-wide
        Runtime = runtime().Runtime
        try:
            loaded = Runtime.get().load_program(_fp16_program(size))
        except RuntimeError:  # a damaged cached program: export it again
            loaded = Runtime.get().load_program(_fp16_program(size, rebuild=True))
        method = loaded.load_method("forward")
    # the method runs inside the loaded program: the call holds both alive
    return lambda: (loaded, method.execute([x]))


def kernels() -> tuple[Kernel, ...]:
    """The fp16 linear at 512^3 and 1024^3."""
    return tuple(
        Kernel("ExecuTorch XNNPACK", "linear fp16", "fp16", s, _executorch_fp16, PACKAGE)
        for s in (512, 1024)
    )
